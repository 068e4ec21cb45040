"""Two "hosts" on one machine for bench/scaling.py: network namespaces joined by a veth pair with a tc rate limit.

The approach of tests/test_cluster_netns.py (read its docstring for the why of each piece): a bridge in the host
namespace carries the control traffic (controller, rendezvous); a veth pair nmt0 <-> nmt0 straight between the two
namespaces carries Horovod's Gloo traffic (HOROVOD_GLOO_IFACE=nmt0), shaped by `tc ... tbf`; each engine runs in
its own UTS namespace with a host name that resolves to its nmt0 address. Needs root and iproute2.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

CTL_NET, DATA_NET = "10.78.0", "10.78.1"
ROOT = Path(__file__).resolve().parents[1]


def unavailable() -> str | None:
    """Why two namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (`ip`, `tc`) is not installed"
    probe = f"nmtprobe{secrets.token_hex(3)}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"`ip netns add` failed here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def sh(*cmd: str, ns: str | None = None) -> str:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    r = subprocess.run(full, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(full)}: {r.stderr.strip()}")
    return r.stdout


class TwoHosts:
    """Namespaces, links and the engine processes this bench started; cleanup() undoes all of it."""

    def __init__(self):
        sfx = secrets.token_hex(3)
        self.ns = [f"nmbA{sfx}", f"nmbB{sfx}"]
        self.bridge, self.host_ends = f"nmbbr{sfx}", [f"nmbha{sfx}", f"nmbhb{sfx}"]
        self.names = [f"benchA-{sfx}", f"benchB-{sfx}"]
        self.procs: list[subprocess.Popen] = []
        self.ctl_ip = f"{CTL_NET}.1"

    def up(self) -> None:
        hosts = "127.0.0.1 localhost\n" + "".join(f"{DATA_NET}.{i + 1} {n}\n" for i, n in enumerate(self.names))
        for ns in self.ns:
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts)
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.ctl_ip}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i, (ns, end) in enumerate(zip(self.ns, self.host_ends)):
            sh("ip", "link", "add", end, "type", "veth", "peer", "name", "ctl0", "netns", ns)
            sh("ip", "link", "set", end, "master", self.bridge, "up")
            sh("ip", "addr", "add", f"{CTL_NET}.{i + 2}/24", "dev", "ctl0", ns=ns)
            sh("ip", "link", "set", "ctl0", "up", ns=ns)
        sh("ip", "link", "add", "nmt0", "netns", self.ns[0], "type", "veth", "peer", "name", "nmt0", "netns", self.ns[1])
        for i, ns in enumerate(self.ns):
            sh("ip", "addr", "add", f"{DATA_NET}.{i + 1}/24", "dev", "nmt0", ns=ns)
            sh("ip", "link", "set", "nmt0", "up", ns=ns)

    def set_rate(self, rate: str | None) -> None:
        """tc tbf on both ends of the data link (each end shapes what it sends); None removes the limit."""
        for ns in self.ns:
            subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "nmt0", "root"], capture_output=True)
            if rate:
                sh("tc", "qdisc", "add", "dev", "nmt0", "root", "tbf", "rate", rate, "burst", "256kb",
                   "latency", "50ms", ns=ns)

    def start_engine(self, i: int, engine_file: str, log: Path) -> None:
        ns = self.ns[i]
        env = dict(os.environ, PYTHONPATH=str(ROOT), TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2",
                   TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1", OMP_NUM_THREADS="1")
        out = open(log, "wb")
        self.procs.append(subprocess.Popen(["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
                                            f'hostname {self.names[i]} && exec "$0" "$@"', sys.executable, "-m",
                                            "ipyparallel.engine", f"--file={engine_file}", "--log-level=WARN"],
                                           stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT)))

    def counters(self, ns: str, dev: str = "nmt0") -> dict[str, int]:
        read = lambda name: int(sh("cat", f"/sys/class/net/{dev}/statistics/{name}", ns=ns))  # noqa: E731
        return {"tx_bytes": read("tx_bytes"), "rx_bytes": read("rx_bytes")}

    def cleanup(self) -> None:
        for p in self.procs:  # only the engine processes this bench started, by pid
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        for ns in self.ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
