"""hub/jupyterhub_config.py loaded as JupyterHub loads it (traitlets' file loader): limits, each student's own volume
and exchange boxes (no shared exchange mounted), the proxy on loopback, secrets made once, 0600, outside the
repository; OAuth loads with a fake client id in the hub's own venv (docs/hub.md)."""
import asyncio
import os
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from traitlets.config.loader import PyFileConfigLoader

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "hub" / "jupyterhub_config.py"
HUB_PY = ROOT / "hub" / ".venv" / "bin" / "python"


def load(monkeypatch, state: Path, **env: str):
    for key in [k for k in os.environ if k.startswith("NMTKIT_HUB_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("NMTKIT_HUB_STATE", str(state))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return PyFileConfigLoader(CONFIG.name, path=str(CONFIG.parent)).load_config()


def test_limits_images_and_network_defaults(monkeypatch, tmp_path):
    cfg = load(monkeypatch, tmp_path / "state")
    assert cfg.DockerSpawner.cpu_limit == 2.0 and cfg.DockerSpawner.mem_limit == "4G"
    assert cfg.DockerSpawner.image == "nmtkit-students:latest"
    assert cfg.JupyterHub.ip == "127.0.0.1"
    assert cfg.JupyterHub.authenticator_class == "nativeauthenticator.NativeAuthenticator"
    assert cfg.NativeAuthenticator.open_signup is False
    culler = cfg.JupyterHub.services[0]
    assert culler["name"] == "idle-culler" and "--timeout=3600" in culler["command"]
    cfg = load(monkeypatch, tmp_path / "state", NMTKIT_HUB_CPUS="1", NMTKIT_HUB_MEM="6G", NMTKIT_HUB_CULL_TIMEOUT="60")
    assert cfg.DockerSpawner.cpu_limit == 1.0 and cfg.DockerSpawner.mem_limit == "6G"
    assert "--timeout=60" in cfg.JupyterHub.services[0]["command"]


def test_each_student_mounts_only_their_own_boxes(monkeypatch, tmp_path):
    state = tmp_path / "state"
    volumes = load(monkeypatch, state).DockerSpawner.volumes
    exchange = state / "exchange" / "nmtkit"
    assert str(exchange) not in volumes  # the shared-exchange trap: never the whole tree
    writable = {src: v for src, v in volumes.items() if isinstance(v, str) or v.get("mode") != "ro"}
    # everything a student can write is theirs by name: their volume and their inbound box
    assert all("{username}" in src for src in writable), writable
    assert volumes[str(exchange / "feedback" / "{username}")]["mode"] == "ro"
    assert volumes[str(exchange / "outbound")]["mode"] == "ro"


class FakeSpawner(SimpleNamespace):
    """What the hook uses of DockerSpawner: the user, the image, and `get_object` (None once the container is gone)."""

    async def get_object(self):
        self.asked += 1
        return self.containers.pop(0) if self.containers else None


def spawner(name: str, uid: int, *containers: dict) -> FakeSpawner:
    return FakeSpawner(user=SimpleNamespace(name=name, id=uid), image="nmtkit-students:latest",
                       containers=list(containers), asked=0)


def test_prepare_gives_uid_boxes_and_the_instructors_image(monkeypatch, tmp_path):
    cfg = load(monkeypatch, tmp_path / "state")
    student = spawner("alice", 3)
    asyncio.run(cfg.Spawner.pre_spawn_hook(student))
    box = tmp_path / "state" / "exchange" / "nmtkit" / "inbound" / "alice"
    assert box.is_dir() and stat.S_IMODE(box.stat().st_mode) == 0o700
    assert student.image == "nmtkit-students:latest"
    assert cfg.DockerSpawner.environment["NB_UID"](student) == "20003"
    assert cfg.DockerSpawner.environment["NMTKIT_STUDENT_ID"](student) == "alice"
    teacher = spawner("instructor", 1)
    asyncio.run(cfg.Spawner.pre_spawn_hook(teacher))
    assert teacher.image == "nmtkit-instructor:latest"


def test_a_start_waits_for_docker_to_finish_removing_the_last_container(monkeypatch, tmp_path):
    """A stop-then-start: Docker is still removing the stopped container (auto_remove), whose name the new one needs;
    the hook waits until it is gone. A running container, or a stopped one Docker keeps, is left to the spawner."""
    cfg = load(monkeypatch, tmp_path / "state")
    auto = {"HostConfig": {"AutoRemove": True}}
    going = spawner("alice", 3, {"State": {"Status": "exited"}, **auto}, {"State": {"Status": "removing"}, **auto})
    asyncio.run(cfg.Spawner.pre_spawn_hook(going))
    assert going.asked == 3 and not going.containers  # asked until Docker said it was gone
    for kept in ({"State": {"Status": "running"}, **auto}, {"State": {"Status": "exited"}, "HostConfig": {}}):
        left = spawner("bob", 4, kept, {"State": {"Status": "removing"}})
        asyncio.run(cfg.Spawner.pre_spawn_hook(left))
        assert left.asked == 1, kept


def test_secrets_are_made_once_0600_outside_the_repository(monkeypatch, tmp_path):
    state = tmp_path / "state"
    first = load(monkeypatch, state)
    cookie = Path(first.JupyterHub.cookie_secret_file)
    assert cookie.parent == state and ROOT not in cookie.parents
    for name in ("jupyterhub_cookie_secret", "proxy_auth_token"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600
    assert len(first.ConfigurableHTTPProxy.auth_token) == 64
    again = load(monkeypatch, state)
    assert again.ConfigurableHTTPProxy.auth_token == first.ConfigurableHTTPProxy.auth_token
    assert cookie.read_text() == Path(again.JupyterHub.cookie_secret_file).read_text()


def test_an_unknown_authenticator_is_one_clear_line(monkeypatch, tmp_path):
    with pytest.raises(SystemExit, match="NMTKIT_HUB_AUTH='ldap' is not one of native, github, oidc"):
        load(monkeypatch, tmp_path / "state", NMTKIT_HUB_AUTH="ldap")


OAUTH_PROBE = """
import sys
from traitlets.config.loader import PyFileConfigLoader
from jupyterhub.app import JupyterHub
cfg = PyFileConfigLoader("jupyterhub_config.py", path=sys.argv[1]).load_config()
hub = JupyterHub(config=cfg)
auth = hub.authenticator_class(config=cfg)
print(type(auth).__name__, auth.client_id, auth.oauth_callback_url, sorted(auth.admin_users))
"""


@pytest.mark.skipif(not HUB_PY.exists(), reason="the hub's venv is absent: `make hub` makes it, or "
                    "`python3 -m venv hub/.venv && hub/.venv/bin/pip install -r hub/requirements.txt`")
@pytest.mark.parametrize("auth, cls", [("github", "GitHubOAuthenticator"), ("oidc", "GenericOAuthenticator")])
def test_oauth_loads_with_a_fake_client_id(tmp_path, auth, cls):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NMTKIT_HUB_", "OAUTH_"))}
    env.update(NMTKIT_HUB_STATE=str(tmp_path), NMTKIT_HUB_AUTH=auth, OAUTH_CLIENT_ID="fake-client-id",
               OAUTH_CLIENT_SECRET="fake-secret", OAUTH_CALLBACK_URL="https://hub.example/hub/oauth_callback",
               NMTKIT_HUB_OIDC_URL="https://sso.example/realms/uni")
    r = subprocess.run([str(HUB_PY), "-c", OAUTH_PROBE, str(CONFIG.parent)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == [cls, "fake-client-id", "https://hub.example/hub/oauth_callback", "['instructor']"]


ROSTER = ROOT / "hub" / "roster.py"


@pytest.mark.skipif(not HUB_PY.exists(), reason="the hub's venv is absent: `make hub` makes it, or "
                    "`python3 -m venv hub/.venv && hub/.venv/bin/pip install -r hub/requirements.txt`")
def test_roster_makes_accounts_boxes_and_passwords_once(tmp_path):
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMTKIT_HUB_")}
    env["NMTKIT_HUB_STATE"] = str(state)
    roster = tmp_path / "roster.csv"
    roster.write_text("username,email\nalice,a@uni.example\nbob,\n")
    run = [str(HUB_PY), str(ROSTER), str(roster)]
    r = subprocess.run(run, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "2 students, 2 new accounts" in r.stdout
    passwords = state / "initial-passwords.csv"
    assert stat.S_IMODE(passwords.stat().st_mode) == 0o600
    assert [line.split(",")[0] for line in passwords.read_text().splitlines()] == ["alice", "bob"]
    assert (state / "allowed_users").read_text().split() == ["alice", "bob"]
    assert (state / "exchange" / "nmtkit" / "inbound" / "bob").is_dir()
    r = subprocess.run(run, env=env, capture_output=True, text=True, timeout=120)
    assert "2 students, 0 new accounts" in r.stdout and len(passwords.read_text().splitlines()) == 2
    roster.write_text("username\nalice\nAlice Smith\n")
    r = subprocess.run(run, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1].startswith(f"{roster}:3: username 'Alice Smith'")
