"""The class's JupyterHub (docs/hub.md): DockerSpawner, one container per student from the students' image, each
student's work in their own volume and exchange boxes, idle servers culled, secrets outside the repository.

Everything a deployment changes comes from the environment (NMTKIT_HUB_*), so this file stays as shipped. It
imports nothing from JupyterHub's packages (classes are named by their entry points), so it also loads in a plain
traitlets config loader: tests/test_hub_config.py."""
import asyncio
import os
import secrets
import sys
import time
from pathlib import Path

c = globals()["get_config"]()  # put there by JupyterHub's config loader (a bare name would be undefined to ruff)

STATE = Path(os.environ.get("NMTKIT_HUB_STATE", Path.home() / ".local/share/nmtkit-hub"))
COURSE = os.environ.get("NMTKIT_HUB_COURSE", "nmtkit")
EXCHANGE = STATE / "exchange" / COURSE            # on the host; never mounted whole into a student's container
EXCHANGE_IN = f"/srv/nbgrader/exchange/{COURSE}"  # nbgrader's default exchange root, inside the containers
STUDENTS_IMAGE = os.environ.get("NMTKIT_HUB_IMAGE", "nmtkit-students:latest")
INSTRUCTOR_IMAGE = os.environ.get("NMTKIT_HUB_INSTRUCTOR_IMAGE", "nmtkit-instructor:latest")
INSTRUCTORS = {u for u in os.environ.get("NMTKIT_HUB_INSTRUCTORS", "instructor").split(",") if u}
UID_BASE = 20000  # students' uids: UID_BASE + the hub's user id, away from the host's and the image's users


def _secret(name: str, nbytes: int) -> Path:
    """The file holding a secret, made on first start (mode 0600, created exclusively: two starts never race)."""
    path = STATE / name
    STATE.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(nbytes))
    return path


c.JupyterHub.cookie_secret_file = str(_secret("jupyterhub_cookie_secret", 32))
c.ConfigurableHTTPProxy.auth_token = _secret("proxy_auth_token", 32).read_text().strip()
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
# configurable-http-proxy from `npm install` in hub/ (make hub), else one on PATH
_chp = Path(__file__).resolve().parent / "node_modules" / ".bin" / "configurable-http-proxy"
if _chp.exists():
    c.ConfigurableHTTPProxy.command = [str(_chp)]

# The proxy (the public face) on loopback unless told otherwise; the hub's API on the Docker network's gateway,
# which hub/start.sh finds (`docker network inspect`), so only the containers reach it
c.JupyterHub.ip = os.environ.get("NMTKIT_HUB_IP", "127.0.0.1")
c.JupyterHub.port = int(os.environ.get("NMTKIT_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = os.environ.get("NMTKIT_HUB_API_IP") or "127.0.0.1"  # never "" (every address)
# the proxy's own API (the hub talks to it there): loopback, on a port of the host's choosing if 8001 is taken
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ.get('NMTKIT_HUB_PROXY_API_PORT', '8001')}"
if os.environ.get("NMTKIT_HUB_SSL_CERT"):
    c.JupyterHub.ssl_cert = os.environ["NMTKIT_HUB_SSL_CERT"]
    c.JupyterHub.ssl_key = os.environ["NMTKIT_HUB_SSL_KEY"]

# Authentication: accounts from the roster for a small class and the tests; OAuth for a real class
AUTH = os.environ.get("NMTKIT_HUB_AUTH", "native")
if AUTH == "native":
    c.JupyterHub.authenticator_class = "nativeauthenticator.NativeAuthenticator"
    c.NativeAuthenticator.open_signup = False
    c.NativeAuthenticator.enable_signup = False  # accounts come from `nmtkit hub-roster` only
    # only the roster makes accounts (sign-up is off), so whoever can log in is on it; JupyterHub 5 lets nobody in
    # by default, and a list read at start would miss students the roster adds to a running hub
    c.Authenticator.allow_all = True
elif AUTH == "github":
    c.JupyterHub.authenticator_class = "github"
elif AUTH == "oidc":
    c.JupyterHub.authenticator_class = "generic-oauth"
    _issuer = os.environ["NMTKIT_HUB_OIDC_URL"].rstrip("/")
    c.GenericOAuthenticator.authorize_url = f"{_issuer}/protocol/openid-connect/auth"
    c.GenericOAuthenticator.token_url = f"{_issuer}/protocol/openid-connect/token"
    c.GenericOAuthenticator.userdata_url = f"{_issuer}/protocol/openid-connect/userinfo"
    c.GenericOAuthenticator.scope = ["openid", "email", "profile"]
    c.GenericOAuthenticator.username_claim = os.environ.get("NMTKIT_HUB_OIDC_USERNAME", "preferred_username")
else:
    sys.exit(f"NMTKIT_HUB_AUTH={AUTH!r} is not one of native, github, oidc (docs/hub.md 'Logging in')")
if AUTH != "native":  # OAuthenticator reads OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET, OAUTH_CALLBACK_URL itself
    _roster = STATE / "allowed_users"  # written by the roster import, one user a line
    if _roster.exists():
        c.Authenticator.allowed_users = set(_roster.read_text().split())
c.Authenticator.admin_users = INSTRUCTORS

# One container per user, from the students' image (the instructor's for instructors)
c.JupyterHub.spawner_class = "docker"
c.DockerSpawner.image = STUDENTS_IMAGE
c.DockerSpawner.network_name = os.environ.get("NMTKIT_HUB_NETWORK", "nmtkit-hub")
c.DockerSpawner.use_internal_ip = True
c.DockerSpawner.prefix = "nmtkit-hub"
c.DockerSpawner.remove = True  # the container goes at stop; the work is in the volume
# a restarted hub (a new roster, a config change) finds the running servers again instead of stopping them all
c.JupyterHub.cleanup_servers = False
c.DockerSpawner.cpu_limit = float(os.environ.get("NMTKIT_HUB_CPUS", "2"))
c.DockerSpawner.mem_limit = os.environ.get("NMTKIT_HUB_MEM", "4G")  # the course peaks at 3.2-3.6 GiB
c.DockerSpawner.notebook_dir = "/home/jovyan/work"
c.DockerSpawner.cmd = ["jupyterhub-singleuser"]
# extra options for each single-user server (the tests: `--LabApp.expose_app_in_browser=True` to drive JupyterLab)
c.Spawner.args = os.environ.get("NMTKIT_HUB_SERVER_ARGS", "").split()
# a stopped or killed server is started again when its student comes back: the hub's "not running" page launches it
# after 2 s without a click (the work is in the volume)
c.JupyterHub.implicit_spawn_seconds = 2
# start as root so docker/start.sh gives jovyan this student's uid, then drops to it (docker-stacks' NB_UID)
c.DockerSpawner.extra_create_kwargs = {"user": "root", "labels": {"nmtkit.hub": COURSE}}
c.DockerSpawner.environment = {
    "NB_UID": lambda spawner: str(UID_BASE + spawner.user.id),
    "NMTKIT_STUDENT_ID": lambda spawner: spawner.user.name,  # the student's variant (issue 55)
}
c.DockerSpawner.volumes = {
    "nmtkit-hub-user-{username}": "/home/jovyan/work",
    str(EXCHANGE / "outbound"): {"bind": f"{EXCHANGE_IN}/outbound", "mode": "ro"},
    str(EXCHANGE / "inbound" / "{username}"): {"bind": f"{EXCHANGE_IN}/inbound", "mode": "rw"},
    str(EXCHANGE / "feedback" / "{username}"): {"bind": f"{EXCHANGE_IN}/feedback", "mode": "ro"},
    str(Path(__file__).resolve().parent / "nbgrader_config.py"): {
        "bind": "/etc/jupyter/nbgrader_config.py", "mode": "ro"},
}


def prepare(spawner) -> None:
    """Before a server starts: the instructor's image for instructors, and this user's exchange boxes made and owned
    by their uid (Docker would make a missing bind source root-owned, which the student could not write)."""
    name, uid = spawner.user.name, UID_BASE + spawner.user.id
    if name in INSTRUCTORS:
        spawner.image = INSTRUCTOR_IMAGE
    (EXCHANGE / "outbound").mkdir(parents=True, exist_ok=True)
    for box in ("inbound", "feedback"):
        path = EXCHANGE / box / name
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if os.geteuid() == 0:
            os.chown(path, uid, -1)


async def old_container_gone(spawner, timeout: float = 60.0) -> None:
    """Wait for Docker to finish removing this user's last container. With `remove` Docker removes a stopped
    container itself (auto_remove), after the hub has seen it stop; a start in that window finds it "removing", takes
    the 409 of its own removal for done, and then cannot create a container of the same name (a 500 to the student:
    a stop-and-start in the hub's heavy test, CI of 5cc4092)."""
    deadline = time.monotonic() + timeout
    while (obj := await spawner.get_object()) is not None and time.monotonic() < deadline:
        state = obj.get("State", {}).get("Status")
        if state != "removing" and not (state in ("exited", "dead") and obj.get("HostConfig", {}).get("AutoRemove")):
            return  # running, or one Docker will not remove itself: DockerSpawner.start removes it
        await asyncio.sleep(0.5)


async def before_start(spawner) -> None:
    prepare(spawner)
    await old_container_gone(spawner)


c.Spawner.pre_spawn_hook = before_start

# Idle servers stopped after NMTKIT_HUB_CULL_TIMEOUT s (1 h): a closed tab's `nmtkit train` stops with the
# container, its checkpoints stay in the volume, and `nmtkit train --resume` continues (docs/hub.md)
CULL = int(os.environ.get("NMTKIT_HUB_CULL_TIMEOUT", "3600"))
c.JupyterHub.load_roles = [{
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
}]
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={CULL}",
                f"--cull-every={max(10, min(300, CULL // 4))}"],
}]

# The marking page (nmtkit.course.instructor.markpage, docs/hub.md "Marking the written answers"): the grading's
# --out in NMTKIT_HUB_GRADES, served at /services/marking/ behind the hub's login; instructors only (admins hold
# access:services, and the page itself refuses anyone not in NMTKIT_HUB_INSTRUCTORS). It runs on the hub's Python
# (tornado, jupyterhub's service auth) with the kit's checkout on its path: the page needs only SQLite from the kit.
GRADES = os.environ.get("NMTKIT_HUB_GRADES")
if GRADES:
    KIT = os.environ.get("NMTKIT_HUB_KIT", str(Path(__file__).resolve().parents[1]))
    c.JupyterHub.services.append({
        "name": "marking", "url": f"http://127.0.0.1:{os.environ.get('NMTKIT_HUB_MARKING_PORT', '10101')}",
        "command": [sys.executable, "-m", "nmtkit.course.instructor.markpage", "--hub", "--out", GRADES],
        "environment": {"PYTHONPATH": KIT, "NMTKIT_HUB_INSTRUCTORS": ",".join(sorted(INSTRUCTORS))},
        "oauth_no_confirm": True,
    })
