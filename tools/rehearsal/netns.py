"""Two "VMs" on one machine: two network namespaces, each with its own host name and its own OpenSSH server.

    root namespace: bridge nmr<id> 10.77.C.1   <- the driver: ipyparallel controller, Horovod rendezvous, ssh client
         |-- veth --> vm1: ctl0 10.77.C.2                   vm2: ctl0 10.77.C.3 <-- veth --|
    vm1: nmt0 10.77.D.1  <== veth pair, tc tbf <rate> (the homework's 1 Gbit/s private network) ==>  vm2: nmt0 10.77.D.2

The bridge is the management network the driver reaches the hosts by (SSH, engines to controller); nmt0 is the
private data network Horovod is pinned to, so nmt0's counters hold the gradients and nothing else. C is picked so
that the bridge's subnet is free in the root namespace (parallel rehearsals, tests and bench/scaling.py all build
their hosts here, each with its own random suffix and subnet).

Each host runs `/usr/sbin/sshd -D` under `ip netns exec <ns> unshare --uts --mount`: its own host name, resolving
(through /etc/netns/<ns>/hosts, which `ip netns exec` mounts over /etc/hosts) to its nmt0 address, as Horovod
0.28.1 needs; a private tmpfs on /run (for sshd's /run/sshd, so nothing is created outside the temp dir); and on the
second host a private empty tmpfs over `hide` (the directory that holds the prepared data), so that the second host
lacks the data like a fresh VM and preflight's push is real. Everything else (the code, the venv, the run
directory) is at the same path on both hosts because they share this machine's filesystem, as VMs that each ran
`git clone` + `make setup` into the same path would have.

Keys are throwaway: a host key per server and one client key, made by ssh-keygen in a private temp dir that goes
away on exit with the namespaces, the bridge, /etc/netns/<ns> and every process left in the namespaces.
"""
from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tools.rehearsal.probes as probes
from nmtkit.cluster.link import counter_at
from nmtkit.errors import NmtkitError

SSHD = "/usr/sbin/sshd"
INSTALL = "apt-get install -y openssh-server iproute2"
DATA_IFACE = "nmt0"


class RehearsalError(NmtkitError, RuntimeError):
    """The rehearsal cannot run, or its reference run cannot be made or frozen as asked; the message says why."""


def unavailable() -> str | None:
    """Why the two SSH hosts cannot be built here (a sentence with the fix), or None when they can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, sshd on port 22); run it as root"
    for tool in ("ip", "tc", "unshare", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed: {INSTALL}"
    if not os.access(SSHD, os.X_OK):
        return f"{SSHD} is missing: {INSTALL}"
    probe = f"nmrprobe{secrets.token_hex(3)}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return (f"`ip netns add` fails here ({r.stderr.strip()}): needs root with CAP_SYS_ADMIN outside a locked "
                "container")
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def sh(*cmd: str, ns: str | None = None, timeout: float = 30) -> str:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    r = subprocess.run(full, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RehearsalError(f"{' '.join(full)}: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout


def _free_subnets() -> tuple[str, str]:
    """Two free /24s under 10.77 (control, data): the control one must not clash with any route of this machine."""
    used = sh("ip", "-o", "addr") + sh("ip", "route")
    for c in range(100 + secrets.randbelow(50), 250, 2):
        if f"10.77.{c}." not in used:
            return f"10.77.{c}", f"10.77.{c + 1}"
    raise RehearsalError("no free 10.77.x.0/24 subnet for the rehearsal's bridge")


@dataclass
class Host:
    name: str        # its host name (UTS namespace) and its name in the ssh config
    ns: str          # the network namespace
    ctl_addr: str    # on the bridge: what the driver reaches it by
    data_addr: str   # on nmt0: what its host name resolves to, where Horovod's traffic goes
    log: Path        # sshd's log
    proc: subprocess.Popen | None = None


class TwoHosts:
    """`with TwoHosts(rate="1gbit", hide=data_parent) as net:` -> net.hosts, net.ssh_config, net.listen_ip."""

    def __init__(self, rate: str | None = "1gbit", hide: str | os.PathLike | None = None, prefix: str = "vm",
                 cores: tuple[tuple[int, ...], ...] | None = None, data_iface: str = DATA_IFACE):
        """`cores`: each host's CPU cores (`taskset` on its sshd, so every process started over SSH on that host,
        engines and ranks, runs on them alone); None: every host shares all of the machine's cores. `data_iface`:
        the data link's name in both hosts (real VMs name theirs ens5, eth1, ...; a graded variant picks one)."""
        if not re.fullmatch(r"[a-z][a-z0-9]{1,14}", data_iface) or data_iface in ("lo", "ctl0"):
            raise RehearsalError(f"data_iface={data_iface!r}: an interface name of 2-15 lower-case letters and "
                                 f"digits, not lo or ctl0")
        self.data_iface = data_iface
        if cores is not None and (len(cores) != 2 or not all(cores)
                                  or not set().union(*cores) <= os.sched_getaffinity(0)):
            raise RehearsalError(f"cores={cores}: two non-empty sets of this machine's cores "
                                 f"{sorted(os.sched_getaffinity(0))}, one a host")
        self.cores = cores
        sfx = secrets.token_hex(3)
        self.rate, self.hide = rate, (str(Path(hide).resolve()) if hide else None)
        self.bridge = f"nmrbr{sfx}"
        self.tmp = Path(tempfile.mkdtemp(prefix="nmtkit-ssh-"))
        self.ssh_config = self.tmp / "ssh_config"
        self.key = self.tmp / "client_key"
        self.ctl_net, self.data_net = "", ""
        self.hosts = [Host(f"{prefix}{i + 1}-{sfx}", f"nmr{i + 1}{sfx}", "", "", self.tmp / f"sshd-{i + 1}.log")
                      for i in range(2)]
        self._made: list[tuple[str, str]] = []  # what exists, for the teardown (kind, name)
        self.engines: list[subprocess.Popen] = []  # ssh sessions of engines started by start_engine()

    @property
    def listen_ip(self) -> str:
        """The driver's address on the bridge (controller and rendezvous listen here)."""
        return f"{self.ctl_net}.1"

    def __enter__(self) -> "TwoHosts":
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    # --- set-up ---------------------------------------------------------------------------------------------

    def up(self) -> None:
        why = unavailable()
        if why:
            raise RehearsalError(why)
        # Two rehearsals starting at once (a test run and `make rehearsal`) could both find the same subnet free
        # before either takes it: pick and take it under one machine-wide lock. Names carry a random id.
        with open(Path(tempfile.gettempdir()) / "nmtkit-rehearsal-subnets.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.ctl_net, self.data_net = _free_subnets()
            for i, h in enumerate(self.hosts):
                h.ctl_addr, h.data_addr = f"{self.ctl_net}.{i + 2}", f"{self.data_net}.{i + 1}"
            self._network()
        self._keys()
        for i, h in enumerate(self.hosts):
            self._sshd(h, hide=self.hide if i == 1 else None)
        self.wait_ssh()

    def _network(self) -> None:
        hosts = "127.0.0.1 localhost\n" + "".join(f"{h.data_addr} {h.name}\n" for h in self.hosts)
        for h in self.hosts:
            sh("ip", "netns", "add", h.ns)
            self._made.append(("ns", h.ns))
            sh("ip", "link", "set", "lo", "up", ns=h.ns)
            etc = Path("/etc/netns") / h.ns
            etc.mkdir(parents=True, exist_ok=True)
            self._made.append(("etc", str(etc)))
            (etc / "hosts").write_text(hosts)
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        self._made.append(("link", self.bridge))
        sh("ip", "addr", "add", f"{self.listen_ip}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i, h in enumerate(self.hosts):
            end = f"{self.bridge}{'ab'[i]}"
            sh("ip", "link", "add", end, "type", "veth", "peer", "name", "ctl0", "netns", h.ns)
            self._made.append(("link", end))
            sh("ip", "link", "set", end, "master", self.bridge, "up")
            sh("ip", "addr", "add", f"{h.ctl_addr}/24", "dev", "ctl0", ns=h.ns)
            sh("ip", "link", "set", "ctl0", "up", ns=h.ns)
        a, b = self.hosts
        sh("ip", "link", "add", self.data_iface, "netns", a.ns, "type", "veth", "peer", "name", self.data_iface,
           "netns", b.ns)
        for h in self.hosts:
            sh("ip", "addr", "add", f"{h.data_addr}/24", "dev", self.data_iface, ns=h.ns)
            sh("ip", "link", "set", self.data_iface, "up", ns=h.ns)
        if self.rate:
            self.set_rate(self.rate)

    def set_rate(self, rate: str | None) -> None:
        """Limit the data link to `rate` (tc syntax: 1gbit, 200mbit) in both directions; None: unshaped."""
        for h in self.hosts:
            if rate:
                sh("tc", "qdisc", "replace", "dev", self.data_iface, "root", "tbf", "rate", rate, "burst", "256kb",
                   "latency", "50ms", ns=h.ns)
            else:  # back to the veth's default qdisc (deleting a root qdisc that is not there fails: ignore it)
                subprocess.run(["ip", "netns", "exec", h.ns, "tc", "qdisc", "del", "dev", self.data_iface, "root"],
                               capture_output=True)
        self.rate = rate

    def _keys(self) -> None:
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "nmtkit-rehearsal", "-f", str(self.key))
        lines = [f"Host {h.name}\n    HostName {h.ctl_addr}\n" for h in self.hosts]
        lines.append(f"Host *\n    User root\n    IdentityFile {self.key}\n    IdentitiesOnly yes\n"
                     f"    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n    BatchMode yes\n"
                     "    ConnectTimeout 10\n    ServerAliveInterval 5\n    ServerAliveCountMax 3\n"
                     "    LogLevel ERROR\n")
        self.ssh_config.write_text("".join(lines))

    def _sshd(self, h: Host, hide: str | None) -> None:
        d = self.tmp / h.name
        d.mkdir()
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key"))
        cfg = d / "sshd_config"
        cfg.write_text(
            f"Port 22\nListenAddress {h.ctl_addr}\nListenAddress {h.data_addr}\nHostKey {d / 'host_key'}\n"
            f"PidFile {d / 'sshd.pid'}\nPermitRootLogin prohibit-password\nPubkeyAuthentication yes\n"
            f"AuthorizedKeysFile {self.key}.pub\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            # the key lives in a temp dir under /tmp (world-writable), which StrictModes would refuse
            f"UsePAM no\nStrictModes no\nPrintMotd no\nSubsystem sftp internal-sftp\nLogLevel ERROR\n")
        script = ('hostname "$1" && mount -t tmpfs -o mode=755 tmpfs /run && mkdir -m 755 /run/sshd && '
                  '{ [ -z "$2" ] || mount -t tmpfs -o mode=755 tmpfs "$2"; } && exec "$3" -D -e -f "$4"')
        with open(h.log, "wb") as log:
            i = self.hosts.index(h)
            pin = [] if self.cores is None else ["taskset", "-c", ",".join(map(str, self.cores[i]))]
            h.proc = subprocess.Popen(["ip", "netns", "exec", h.ns, *pin, "unshare", "--uts", "--mount",
                                       "--propagation", "private", "sh", "-c", script, "sh", h.name, hide or "",
                                       SSHD, str(cfg)], stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)

    def wait_ssh(self, timeout: float = 30) -> None:
        for h in self.hosts:
            deadline = time.time() + timeout
            while True:
                if h.proc.poll() is not None:
                    raise RehearsalError(f"sshd on {h.name} exited ({h.proc.returncode}): {h.log.read_text().strip()}")
                r = self.ssh(h.name, "true", check=False, timeout=15)
                if r.returncode == 0:
                    break
                if time.time() > deadline:
                    raise RehearsalError(f"ssh {h.name} fails after {timeout:.0f} s: {r.stderr.strip()}")
                time.sleep(0.3)

    # --- use -----------------------------------------------------------------------------------------------

    def ssh_cmd(self, host: str) -> list[str]:
        return ["ssh", "-F", str(self.ssh_config), host]

    def ssh(self, host: str, *cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        r = subprocess.run(self.ssh_cmd(host) + ["--", *cmd], capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RehearsalError(f"ssh {host} {' '.join(cmd)}: {r.stderr.strip()}")
        return r

    def start_engine(self, i: int, engine_file: str | os.PathLike, log: Path, code_root: str | os.PathLike) -> None:
        """One ipyparallel engine on host i, started over SSH (so it has the host's name, mounts and network),
        with the same environment as the SSH launcher's engines (tools.rehearsal.ssh.launcher_traits). It
        lives as long as its ssh session: down() ends both."""
        from tools.rehearsal.ssh import launcher_traits
        cmd = launcher_traits(self.ssh_config, code_root, self.tmp)["engine_cmd"]
        with open(log, "wb") as out:
            self.engines.append(subprocess.Popen(self.ssh_cmd(self.hosts[i].name) + ["--", *cmd,
                                                 f"--file={engine_file}", "--log-level=WARN"],
                                                 stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    def manual_cluster(self, cfg, profile_dir: str | os.PathLike, code_root: str | os.PathLike, per_host: int = 1):
        """A started nmtkit Cluster (launcher "manual": the controller on the bridge, Horovod pinned to the data
        link, real host names) with `per_host` engines started by hand on each host, as students do on VMs."""
        from nmtkit.cluster import Cluster
        cluster = Cluster(cfg, engines=2 * per_host, launcher="manual", listen_ip=self.listen_ip,
                          iface=self.data_iface,
                          logical_hosts=False, profile_dir=profile_dir).start()
        try:
            engine_file = cluster.connection_files()["engine"]
            for i in range(2):
                for k in range(per_host):
                    self.start_engine(i, engine_file, Path(profile_dir) / f"engine-{i}-{k}.log", code_root)
            cluster.wait_for_engines(2 * per_host, timeout=300)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def counters(self, i: int, dev: str | None = None) -> dict[str, int]:
        """tx/rx bytes of the data link's end in host i (read through /sys in its namespace)."""
        dev = dev or self.data_iface
        out = sh("cat", f"/sys/class/net/{dev}/statistics/tx_bytes", f"/sys/class/net/{dev}/statistics/rx_bytes",
                 ns=self.hosts[i].ns)
        tx, rx = (int(v) for v in out.split())
        return {"tx_bytes": tx, "rx_bytes": rx}

    # --- teardown: only what up() made ---------------------------------------------------------------------

    def down(self) -> None:
        for p in self.engines:  # our own ssh sessions, by pid
            if p.poll() is None:
                p.kill()
                p.wait()
        self._kill_ssh_clients()
        for h in self.hosts:
            if h.proc is not None and h.proc.poll() is None:
                h.proc.terminate()
                try:
                    h.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    h.proc.kill()
        for kind, name in reversed(self._made):
            if kind == "ns":
                self._kill_inside(name)
                subprocess.run(["ip", "netns", "del", name], capture_output=True)  # its veth ends go with it
            elif kind == "link":
                subprocess.run(["ip", "link", "del", name], capture_output=True)
            elif kind == "etc":
                shutil.rmtree(name, ignore_errors=True)
        self._made.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _kill_ssh_clients(self) -> None:
        """ssh clients still running with our config (a launcher's wait loop) would hang on a vanished host."""
        import psutil
        cfg = str(self.ssh_config)
        for p in psutil.process_iter(["cmdline"]):
            if cfg in (p.info["cmdline"] or []):
                try:
                    p.kill()
                except psutil.Error:
                    pass

    @staticmethod
    def _kill_inside(ns: str) -> None:
        """Processes still in our namespace (engines started over SSH, their sessions) are ours: end them."""
        for _ in range(2):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            time.sleep(0.3)


class CounterLog:
    """The data link's byte counters in one host, sampled every `interval` s by a process inside its namespace:
    `with CounterLog(ns) as c: ...` then `c.tx_at(t)` (interpolated) for any wall-clock time t inside the window."""

    def __init__(self, ns: str, dev: str = DATA_IFACE, interval: float = 0.1, python: str = "python3"):
        self.cmd = ["ip", "netns", "exec", ns, *probes.command(python, "counters", dev, str(interval))]
        self.samples: list[tuple[float, int, int]] = []
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "CounterLog":
        import threading
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

        def read():
            for line in self.proc.stdout:
                t, tx, rx = line.split()
                self.samples.append((float(t), int(tx), int(rx)))

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait()
        self._reader.join(timeout=5)

    def tx_at(self, t: float) -> float:
        """tx bytes at time t, linear between the two samples around it."""
        return counter_at(self.samples, t)
