"""Two "hosts" without cloud VMs: one engine in each of two network namespaces, a 2-rank Horovod training across
them, and the interface counters prove that the gradients crossed the link between them.

Topology (names get a random suffix so parallel runs never collide; everything is removed even on failure):

    host namespace: bridge nmtbr<id> 10.77.0.1  <- controller + Horovod rendezvous listen here (control traffic)
         |-- veth --> ns A: ctl0 10.77.0.2             ns B: ctl0 10.77.0.3 <-- veth --|
    ns A: nmt0 10.77.1.1  <====== veth pair, tc tbf 1gbit (the homework's VMs) ======>  ns B: nmt0 10.77.1.2

Horovod's Gloo traffic is pinned to nmt0 (HOROVOD_GLOO_IFACE), so nmt0's counters hold the gradients and nothing
else; the engines reach the controller over the bridge, exactly like VMs with a management and a data network.

Each engine also gets its own host name (a UTS namespace via `unshare --uts`) that resolves, through
/etc/netns/<ns>/hosts (which `ip netns exec` mounts over /etc/hosts), to its nmt0 address: Horovod 0.28.1 binds its
process-set Gloo context to the address of the host name and ignores HOROVOD_GLOO_IFACE there, so with the shared
host name (which resolves to 127.0.0.1) rank 1 dies with "connect [127.0.0.1]:port: Connection refused". Real VMs
need the same: their host name must resolve to the training network's address (preflight checks it).
"""
import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nmtkit import config
from nmtkit.cluster import Cluster

CTL_NET, DATA_NET = "10.77.0", "10.77.1"


def _netns_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    trial = f"nmttrial{secrets.token_hex(3)}"
    r = subprocess.run(["ip", "netns", "add", trial], capture_output=True, text=True)
    if r.returncode != 0:
        return f"`ip netns add` failed here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", trial], capture_output=True)
    return None


_why = _netns_unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.netns,
              pytest.mark.skipif(_why is not None, reason=_why or ""),
              pytest.mark.skipif(not importlib.util.find_spec("horovod"), reason="Horovod is not installed")]


def sh(*cmd: str, ns: str | None = None) -> str:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    r = subprocess.run(full, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(full)}: {r.stderr.strip()}")
    return r.stdout


class TwoHosts:
    """The namespaces, links and engine processes of one test; cleanup() undoes all of it."""

    def __init__(self):
        sfx = secrets.token_hex(3)
        self.ns = [f"nmtA{sfx}", f"nmtB{sfx}"]
        self.bridge, self.host_ends = f"nmtbr{sfx}", [f"nmtha{sfx}", f"nmthb{sfx}"]
        self.names = [f"hosta-{sfx}", f"hostb-{sfx}"]
        self.procs: list[subprocess.Popen] = []

    def up(self, rate: str | None = "1gbit") -> None:
        hosts = "127.0.0.1 localhost\n" + "".join(f"{DATA_NET}.{i + 1} {n}\n" for i, n in enumerate(self.names))
        for ns in self.ns:
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts)
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{CTL_NET}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i, (ns, end) in enumerate(zip(self.ns, self.host_ends)):
            sh("ip", "link", "add", end, "type", "veth", "peer", "name", "ctl0", "netns", ns)
            sh("ip", "link", "set", end, "master", self.bridge, "up")
            sh("ip", "addr", "add", f"{CTL_NET}.{i + 2}/24", "dev", "ctl0", ns=ns)
            sh("ip", "link", "set", "ctl0", "up", ns=ns)
        # the data link: one veth pair straight between the two namespaces, both ends named nmt0
        sh("ip", "link", "add", "nmt0", "netns", self.ns[0], "type", "veth", "peer", "name", "nmt0", "netns", self.ns[1])
        for i, ns in enumerate(self.ns):
            sh("ip", "addr", "add", f"{DATA_NET}.{i + 1}/24", "dev", "nmt0", ns=ns)
            sh("ip", "link", "set", "nmt0", "up", ns=ns)
            if rate:
                sh("tc", "qdisc", "add", "dev", "nmt0", "root", "tbf", "rate", rate, "burst", "256kb",
                   "latency", "50ms", ns=ns)

    def start_engine(self, i: int, engine_file: str, log: Path) -> None:
        ns = self.ns[i]
        root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ, PYTHONPATH=root, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2",
                   TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
        out = open(log, "wb")
        self.procs.append(subprocess.Popen(["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
                                            f'hostname {self.names[i]} && exec "$0" "$@"', sys.executable, "-m",
                                            "ipyparallel.engine", f"--file={engine_file}", "--log-level=WARN"],
                                           stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root))

    def counters(self, ns: str, dev: str = "nmt0") -> dict[str, int]:
        read = lambda name: int(sh("cat", f"/sys/class/net/{dev}/statistics/{name}", ns=ns))  # noqa: E731
        return {"tx_bytes": read("tx_bytes"), "rx_bytes": read("rx_bytes")}

    def cleanup(self) -> None:
        for p in self.procs:  # only the engine processes this test started, by pid
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        for ns in self.ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)  # removes its veth ends too
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)


@pytest.fixture
def hosts():
    h = TwoHosts()
    try:
        h.up()
        yield h
    finally:
        h.cleanup()
        leftovers = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert not any(ns in leftovers for ns in h.ns), leftovers


def test_two_namespaces_train_across_a_veth_link(hosts, tmp_path):
    from nmtkit.data.prepare import prepare
    cfg = config.load("tiny", {
        "data.train_size": 2000, "data.dev_size": 20, "data.test_size": 20, "data.vocab_size": 300,
        "data.dir": str(tmp_path / "data"), "model.d_model": 32, "model.encoder_layers": 1,
        "model.decoder_layers": 1, "model.num_heads": 2, "model.d_ff": 64, "train.steps": 6, "train.log_every": 3,
        "train.ckpt_every": 0, "eval.every": 0, "eval.dev_sentences": 5, "eval.test_sentences": 5,
        "eval.beam_size": 1, "eval.max_extra_len": 3, "monitor.enabled": False})
    prepare(cfg, progress=False)
    # the controller listens on the bridge address both namespaces reach; the engines are started "by hand"
    # real host names this time (one rank per host), as on the homework's VMs
    cluster = Cluster(cfg, engines=2, launcher="manual", listen_ip=f"{CTL_NET}.1", iface="nmt0",
                      logical_hosts=False, profile_dir=tmp_path / "ipython")
    cluster.start()
    try:
        engine_file = cluster.connection_files()["engine"]
        for i, ns in enumerate(hosts.ns):
            hosts.start_engine(i, engine_file, tmp_path / f"{ns}.log")
        cluster.wait_for_engines(2, timeout=120)
        table = cluster.preflight(cfg.data.dir)  # shared filesystem: the data is already "on both nodes"
        assert table["rendezvous_ok"].all() and list(table["iface"]) == ["ctl0", "ctl0"]
        assert sorted(table["host"]) == hosts.names and sorted(table["host_addr"]) == [f"{DATA_NET}.1", f"{DATA_NET}.2"]
        before = [hosts.counters(ns) for ns in hosts.ns]
        results = cluster.launch(cfg, tmp_path / "run", preflight=False).wait(timeout=300)
        after = [hosts.counters(ns) for ns in hosts.ns]
    finally:
        cluster.stop()
    summaries = [r["value"] for r in results]
    assert [s["status"] for s in summaries] == ["finished", "finished"]
    assert summaries[0]["weights_checksum"] == summaries[1]["weights_checksum"]
    assert sorted(r["value"]["host"] for r in results) == hosts.names
    # ring allreduce on 2 ranks: each rank sends half the gradient in reduce-scatter and half in allgather, i.e.
    # about one float32 per parameter per step; the initial broadcast adds more. So tx >= 4 bytes x params x steps.
    bound = 4 * summaries[0]["params"] * cfg.train.steps
    for b, a in zip(before, after):
        sent, received = a["tx_bytes"] - b["tx_bytes"], a["rx_bytes"] - b["rx_bytes"]
        print(f"nmt0: sent {sent:,} B, received {received:,} B, bound {bound:,} B "
              f"({summaries[0]['params']:,} params x {cfg.train.steps} steps x 4 B)")
        assert sent >= bound and received >= bound
