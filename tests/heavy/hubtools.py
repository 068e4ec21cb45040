"""The class's hub driven as people use it (tests/heavy/test_hub.py): `make hub` started with a state directory, a
network and ports of its own, accounts from a roster file (`make hub-roster`), logins through the hub's login page,
servers started and stopped through the hub's API with each user's own token."""
from __future__ import annotations

import csv
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import requests
from dockertools import DOCKER, ROOT, docker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def why_not() -> str | None:
    """Why the hub cannot run here beyond what the image needs (None: it can)."""
    for tool, pkg in (("npm", "npm"), ("python3", "python3-venv")):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            return f"the hub needs {tool}: sudo apt-get install -y {pkg}"
    return None


class Hub:
    """One hub: its own state directory, course, network, proxy port and users (names unique to this run)."""

    def __init__(self, state: Path, image: str, instructor_image: str, log: Path):
        sfx = uuid.uuid4().hex[:6]
        self.state, self.log, self.image, self.instructor_image = state, log, image, instructor_image
        self.course, self.network = f"c{sfx}", f"nmtkit-hub-test-{sfx}"
        self.instructor, self.students = f"prof{sfx}", [f"alice{sfx}", f"bob{sfx}"]
        self.instructors = [self.instructor]  # NMTKIT_HUB_INSTRUCTORS (the marking test adds a second grader)
        self.extra_env: dict[str, str] = {}  # more NMTKIT_HUB_* settings (the marking service's)
        self.port, self.proxy_api = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.passwords: dict[str, str] = {}
        self.tokens: dict[str, str] = {}
        for third in range(150, 200):  # a 10.x subnet of its own, clear of the multi-host tests' 10.200+
            if docker("network", "create", "--label", "nmtkit.hub=1", "--subnet", f"10.{third}.78.0/24",
                      self.network, check=False).returncode == 0:
                break

    @property
    def exchange(self) -> Path:
        return self.state / "exchange" / self.course

    def env(self, cull: int = 3600) -> dict:
        return {**os.environ, "NMTKIT_HUB_STATE": str(self.state), "NMTKIT_HUB_COURSE": self.course,
                "NMTKIT_HUB_PORT": str(self.port), "NMTKIT_HUB_PROXY_API_PORT": str(self.proxy_api),
                "NMTKIT_HUB_IMAGE": self.image, "NMTKIT_HUB_INSTRUCTOR_IMAGE": self.instructor_image,
                "NMTKIT_HUB_NETWORK": self.network, "NMTKIT_HUB_INSTRUCTORS": ",".join(self.instructors),
                "NMTKIT_HUB_CULL_TIMEOUT": str(cull),
                "NMTKIT_HUB_SERVER_ARGS": "--LabApp.expose_app_in_browser=True", "DOCKER": DOCKER, **self.extra_env}

    def start(self, cull: int = 3600, timeout: float = 900) -> str:
        """`make hub` in the background; what it printed once the hub answers (the first start sets up hub/.venv)."""
        self.proc = subprocess.Popen(["make", "-C", str(ROOT), "hub"], env=self.env(cull), start_new_session=True,
                                     stdout=open(self.log, "a"), stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while True:
            try:
                if requests.get(f"{self.url}/hub/api/", timeout=5).ok:
                    return self.log.read_text()
            except requests.RequestException:
                pass
            said = self.log.read_text()[-3000:]
            assert self.proc.poll() is None, f"make hub ended (rc {self.proc.returncode}): {said}"
            assert time.time() < deadline, f"the hub did not answer in {timeout:.0f} s: {said}"
            time.sleep(1)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
        # make ends at once; the hub it started shuts down after it (its PID file goes last)
        deadline = time.time() + 60
        while (self.state / "jupyterhub.pid").exists() and time.time() < deadline:
            time.sleep(0.5)

    def roster(self, path: Path) -> str:
        """`make hub-roster` with a CSV of this hub's users; their first passwords, read as the instructor would."""
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["username", "email"])
            w.writerows([u, f"{u}@example.edu"] for u in [*self.instructors, *self.students])
        out = subprocess.run(["make", "-C", str(ROOT), "hub-roster", f"ROSTER={path}"], env=self.env(),
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        with open(self.state / "initial-passwords.csv") as f:
            self.passwords.update(dict(row for row in csv.reader(f) if row))
        return out.stdout

    def login(self, user: str) -> requests.Session:
        """The hub's login page, as a browser posts it (with its XSRF cookie); then a token of the user's own."""
        s = requests.Session()
        s.get(f"{self.url}/hub/login", timeout=30).raise_for_status()
        r = s.post(f"{self.url}/hub/login", timeout=60, allow_redirects=False,
                   data={"username": user, "password": self.passwords[user], "_xsrf": s.cookies.get("_xsrf")})
        assert r.status_code == 302 and "/hub/login" not in r.headers.get("location", ""), (r.status_code,
                                                                                            r.text[-500:])
        # the XSRF token the hub's own pages give their scripts (tied to this login's session)
        page = s.get(f"{self.url}/hub/token", timeout=30).text
        xsrf = re.search(r'xsrf_token: "([^"]+)"', page).group(1)
        t = s.post(f"{self.url}/hub/api/users/{user}/tokens", json={"note": "test"}, timeout=30,
                   headers={"X-XSRFToken": xsrf})
        assert t.status_code == 201, (t.status_code, t.text[-500:])
        self.tokens[user] = t.json()["token"]
        return s

    def api(self, method: str, path: str, user: str, **kw) -> requests.Response:
        """The hub's REST API with `user`'s own token."""
        return requests.request(method, f"{self.url}/hub/api{path}", timeout=60,
                                headers={"Authorization": f"token {self.tokens[user]}"}, **kw)

    def server(self, method: str, user: str, path: str, as_user: str | None = None, timeout: float = 120,
               **kw) -> requests.Response:
        """A request to `user`'s single-user server through the proxy, with `as_user`'s token (default: their own)."""
        return requests.request(method, f"{self.url}/user/{user}/{path.lstrip('/')}", timeout=timeout,
                                headers={"Authorization": f"token {self.tokens[as_user or user]}"}, **kw)

    def ready(self, user: str) -> bool | None:
        """True: the server is up; False: none (not starting, not stopping); None: on its way."""
        server = self.api("GET", f"/users/{user}", user).json().get("servers", {}).get("")
        return None if server and not server.get("ready") else bool(server)

    def wait(self, user: str, ready: bool, timeout: float = 300) -> float:
        start = time.time()
        while self.ready(user) is not ready:
            assert time.time() - start < timeout, f"{user}'s server not {'ready' if ready else 'stopped'} in " \
                                                  f"{timeout:.0f} s: {self.log.read_text()[-2000:]}"
            time.sleep(1)
        return time.time() - start

    def spawn(self, user: str) -> float:
        r = self.api("POST", f"/users/{user}/server", user)
        assert r.status_code in (201, 202), (r.status_code, r.text[-500:], self.log.read_text()[-3000:])
        return self.wait(user, True)

    def container(self, user: str) -> str:
        return f"nmtkit-hub-{user}"

    def exec_as_user(self, user: str, *cmd: str) -> subprocess.CompletedProcess:
        """A command in `user`'s container as the uid their server runs as (what their terminal would run)."""
        uid = docker("exec", self.container(user), "id", "-u", "jovyan").stdout.strip()
        return docker("exec", "-u", uid, "-w", "/home/jovyan/work", self.container(user), *cmd, check=False)

    def remove_all(self) -> None:
        """What the hub's tests made: the hub, its containers, the users' volumes and the network (also on failure)."""
        self.stop()
        for user in [*self.instructors, *self.students]:
            docker("rm", "-f", self.container(user), check=False)
            docker("volume", "rm", "-f", f"nmtkit-hub-user-{user}", check=False)
        docker("network", "rm", self.network, check=False)
