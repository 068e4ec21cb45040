"""Horovod across ipyparallel engines, driven from the notebook: no horovodrun, no mpirun, no SSH between nodes.

The notebook's process (the *driver*) owns an ipyparallel controller and the engines that stand for nodes:

    cluster = Cluster(cfg).start()          # (a) local engines, (b) SSH hosts, or (c) engines started by hand
    cluster.preflight(data_dir)             # same software and data on every node? (a DataFrame; refuses mismatches)
    run = cluster.launch(cfg, run_dir)      # Horovod rendezvous here, HOROVOD_* env on each engine, train() on each
    run.panel(); run.wait()                 # live per-rank view; results ordered by Horovod rank
    cluster.stop()

How Horovod starts without horovodrun: the driver runs Horovod's HTTP rendezvous server and computes the host
assignment (rank, local rank, cross rank per engine) from the engines' host names, exactly as horovodrun would; each
engine receives the HOROVOD_* variables horovodrun would have exported and calls hvd.init(), whose Gloo controller
reads them. Engine ids are not ranks: everything the driver returns is ordered by Horovod rank.

Local engines standing for nodes ("two nodes on one laptop") share one real host name; with
`cluster.logical_hosts` each engine gets its own logical host name node0, node1, ... so that Horovod's local and
cross ranks look like N single-rank nodes (local_rank 0 and cross_rank = rank on every engine), as on the homework's
VMs. On a real multi-GPU machine turn it off, so the engines of one machine share a host and pin distinct GPUs.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import nmtkit

LOOPBACK = "127.0.0.1"
# The data files a prepared data directory must hold on every node (see docs/architecture.md).
DATA_MARKERS = ("manifest.json", "spm.model")


class ClusterError(RuntimeError):
    """The cluster could not start, reach a node, or run the job; the message names the node and what to do."""


class PreflightError(ClusterError):
    """The nodes differ (software, data, network) in a way that would break or silently skew training."""


class RankFailedError(ClusterError):
    """A rank died or raised during a distributed job; the message names its rank, host and engine."""


# --- pure parts: host list, rank plan, per-rank environment, GPU operations ----------------------------------------

@dataclass(frozen=True)
class Slot:
    """One Horovod process: the fields of horovod.runner's SlotInfo (the rendezvous server reads them)."""
    hostname: str
    rank: int
    local_rank: int
    cross_rank: int
    size: int
    local_size: int
    cross_size: int


def parse_hosts(text: str) -> list[tuple[str, int]]:
    """'10.0.0.5:2,10.0.0.6:2' -> [('10.0.0.5', 2), ('10.0.0.6', 2)]; a host without ':n' has one slot."""
    hosts = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, _, count = item.rpartition(":") if ":" in item else (item, "", "1")
        if not name or not count.isdigit() or int(count) < 1:
            raise ClusterError(f"cluster.hosts: bad entry {item!r}: expected host:slots, e.g. 10.0.0.5:2")
        hosts.append((name, int(count)))
    if len({h for h, _ in hosts}) != len(hosts):
        raise ClusterError(f"cluster.hosts: {text!r} names a host twice; give each host once with its slot count")
    return hosts


def host_assignments(node_of_engine: list[str]) -> list[Slot]:
    """The Horovod slot of each engine (same order as the input), from the node each engine runs on.

    Ranks go node by node in the order nodes first appear, as horovodrun's get_host_assignments does; local_rank
    counts within a node; cross_rank r at local rank l is the index of the node among the nodes that have a
    local rank l (so cross_size is the number of such nodes).
    """
    nodes: dict[str, list[int]] = {}
    for i, node in enumerate(node_of_engine):
        nodes.setdefault(node, []).append(i)
    size = len(node_of_engine)
    slots: list[Slot | None] = [None] * size
    rank = 0
    for node, engines in nodes.items():
        for local_rank, i in enumerate(engines):
            having = [n for n, e in nodes.items() if len(e) > local_rank]
            slots[i] = Slot(hostname=node, rank=rank, local_rank=local_rank, cross_rank=having.index(node),
                            size=size, local_size=len(engines), cross_size=len(having))
            rank += 1
    return slots  # type: ignore[return-value]


def collective_ops(nccl_built: bool, gloo_built: bool, gpus: int) -> dict[str, str]:
    """The HOROVOD_* operation variables for one rank, from how Horovod was built and the GPUs it sees.

    Gloo is the controller and carries CPU tensors (there is no MPI here: no mpirun, no SSH between nodes).
    GPU tensors go through NCCL when Horovod was built with it and the rank has a GPU; Horovod decides that at
    build time (HOROVOD_GPU_OPERATIONS=NCCL when pip compiles it), so here the variable records the choice in the
    rank's environment and the preflight table. A GPU rank without a NCCL build still works, through host memory
    and Gloo, but slowly: preflight_problems reports it.
    """
    if not gloo_built:
        raise ClusterError("Horovod was built without Gloo: rebuild it with HOROVOD_WITH_GLOO=1 "
                           "(see scripts/setup.sh); nmtkit starts Horovod through Gloo's rendezvous, not mpirun")
    env = {"HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo"}
    if nccl_built and gpus > 0:
        env["HOROVOD_GPU_OPERATIONS"] = "NCCL"
    return env


def rank_env(slot: Slot, *, addr: str, port: int, iface: str, ops: dict[str, str],
             gloo_timeout: int = 60, device_index: int | None = None) -> dict[str, str]:
    """Everything a rank needs in os.environ before hvd.init(): what horovodrun would have exported."""
    env = {
        "TF_USE_LEGACY_KERAS": "1",
        "HOROVOD_HOSTNAME": slot.hostname,  # must equal the host name in the plan the rendezvous server holds
        "HOROVOD_RANK": str(slot.rank),
        "HOROVOD_SIZE": str(slot.size),
        "HOROVOD_LOCAL_RANK": str(slot.local_rank),
        "HOROVOD_LOCAL_SIZE": str(slot.local_size),
        "HOROVOD_CROSS_RANK": str(slot.cross_rank),
        "HOROVOD_CROSS_SIZE": str(slot.cross_size),
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": addr,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
        "HOROVOD_GLOO_IFACE": iface,
        # How long Gloo waits for a peer (rendezvous and every collective): a dead rank frees the others after it.
        "HOROVOD_GLOO_TIMEOUT_SECONDS": str(gloo_timeout),
        # The GPU this rank pins: its local rank on the physical machine (differs from HOROVOD_LOCAL_RANK only
        # when local engines pose as nodes on a multi-GPU machine).
        "NMTKIT_DEVICE_INDEX": str(slot.local_rank if device_index is None else device_index),
    }
    env.update(ops)
    return env


def controller_ip(hosts: list[str], route_src: Callable[[str], str] | None = None) -> str:
    """Where the controller and the rendezvous server listen: loopback for local engines, else the one local
    address that routes to every remote host. Never 0.0.0.0: the controller would be open on every network."""
    if not hosts:
        return LOOPBACK
    route_src = route_src or source_address
    sources = {h: route_src(h) for h in hosts}
    distinct = sorted(set(sources.values()))
    if len(distinct) != 1:
        detail = ", ".join(f"{h} via {s}" for h, s in sources.items())
        raise ClusterError(f"the remote hosts are reached through different local addresses ({detail}); "
                           f"pass listen_ip= (cluster.iface) to choose the network that reaches them all")
    return distinct[0]


def source_address(host: str) -> str:
    """The local address this machine uses to reach `host` (no packet is sent: a UDP connect picks the route)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(host), 9))
            return s.getsockname()[0]
    except OSError as e:
        raise ClusterError(f"no route from this machine to {host}: {e}; check the host list (cluster.hosts)") from None


def iface_for(addr: str) -> str:
    """The network interface this machine would use to reach `addr` (the one Gloo should bind to)."""
    try:
        out = subprocess.run(["ip", "-o", "route", "get", addr], capture_output=True, text=True, timeout=5).stdout
        m = re.search(r"\bdev (\S+)", out)
        if m:
            return m.group(1)
    except (OSError, subprocess.SubprocessError):
        pass
    import psutil  # fallback without iproute2: the interface holding the source address
    src = LOOPBACK if addr.startswith("127.") else source_address(addr)
    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address == src for a in addrs):
            return name
    return "lo" if addr.startswith("127.") else ""


# --- preflight: facts gathered on each engine, and the decision --------------------------------------------------

def preflight_problems(facts: list[dict]) -> list[str]:
    """What would break training, one sentence per problem naming the node and the difference; [] when fine.

    `facts` are node_facts() dicts, one per rank in rank order (the first is the reference), with `node` and
    `rank` added by the driver.
    """
    problems = []
    if not facts:
        return ["no engines: start the cluster first"]
    ref = facts[0]

    def who(f):
        return f"rank {f['rank']} on {f['node']}" + (f" ({f['host']})" if f["host"] != f["node"] else "")

    for f in facts:
        if f.get("error"):
            problems.append(f"{who(f)}: {f['error']}")
            continue
        for key, label in (("nmtkit", "nmtkit"), ("nmtkit_source", "nmtkit source (sha256)"),
                           ("tensorflow", "TensorFlow"), ("horovod", "Horovod"), ("horovod_build", "Horovod build"),
                           ("python", "Python")):
            if f is not ref and f.get(key) != ref.get(key):
                problems.append(f"{who(f)}: {label} {f.get(key)} differs from {ref.get(key)} on {who(ref)}; "
                                f"install the same version on every node")
        if f.get("horovod") is None:
            problems.append(f"{who(f)}: Horovod is not importable there ({f.get('horovod_error')}); "
                            f"install it (scripts/setup.sh) on that node")
        if not f.get("data_ok"):
            problems.append(f"{who(f)}: prepared data missing in {f.get('data_dir')} "
                            f"(no {', '.join(f.get('data_missing') or DATA_MARKERS)}); "
                            f"run prepare(cfg) there or let preflight copy it (push_data=True)")
        elif f is not ref and ref.get("data_ok") and f.get("data_sha") != ref.get("data_sha"):
            problems.append(f"{who(f)}: prepared data differs from {who(ref)} (manifest sha256 "
                            f"{str(f.get('data_sha'))[:12]} vs {str(ref.get('data_sha'))[:12]}); prepare it with the "
                            f"same config everywhere")
        if f.get("rendezvous_ok") is False:
            problems.append(f"{who(f)}: cannot reach the rendezvous server at {f.get('rendezvous')} "
                            f"({f.get('rendezvous_error')}); open that port from the node to the driver, or choose "
                            f"the network with cluster.iface")
        if f.get("gpus", 0) and not f.get("nccl_built"):
            problems.append(f"{who(f)}: has {f['gpus']} GPU(s) but Horovod was built without NCCL; rebuild with "
                            f"HOROVOD_GPU_OPERATIONS=NCCL (gradients would go through host memory)")
        if (f.get("rendezvous") and not f["rendezvous"].startswith("127.")
                and str(f.get("host_addr", "")).startswith("127.")):
            problems.append(f"{who(f)}: its host name {f['host']} resolves to {f['host_addr']} there; Horovod 0.28.1 "
                            f"binds part of its Gloo traffic to that address (it ignores HOROVOD_GLOO_IFACE for "
                            f"process sets), so the other nodes cannot connect: map {f['host']} to the node's "
                            f"address on the training network in /etc/hosts")
        if f is not ref and f.get("gpus", 0) != ref.get("gpus", 0):
            problems.append(f"{who(f)}: sees {f.get('gpus', 0)} GPU(s) but {who(ref)} sees {ref.get('gpus', 0)}")
    return problems


def preflight_table(facts: list[dict]):
    """The per-rank facts as a pandas DataFrame indexed by rank (what the notebook shows)."""
    import pandas as pd
    cols = ["node", "host", "host_addr", "engine", "pid", "python", "nmtkit", "tensorflow", "horovod", "horovod_build", "gpus",
            "data_ok", "data_dir", "rendezvous_ok", "iface"]
    rows = [{c: f.get(c) for c in cols} | {"rank": f["rank"]} for f in facts]
    for row in rows:  # paths inside the workspace print the same on every machine (and in committed notebooks)
        row["data_dir"] = _under_workspace(row["data_dir"])
    return pd.DataFrame(rows, columns=["rank"] + cols).set_index("rank")


def _under_workspace(path: str | None) -> str | None:
    from nmtkit.runs import workspace
    if not path:
        return path
    try:
        return "<workspace>/" + str(Path(path).resolve().relative_to(workspace()))
    except ValueError:
        return path


def _source_sha() -> str:
    """One hash of nmtkit's Python sources: 'same nmtkit' means the same code, not just the same version number."""
    root = Path(nmtkit.__file__).parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


# --- functions that run on the engines (module level, so ipyparallel sends them by reference) --------------------

def engine_identity() -> dict:
    """Who this engine is: host, pid, Python."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "python": sys.version.split()[0],
            "cwd": os.getcwd()}


def node_facts(data_dir: str | None, rendezvous: tuple[str, int] | None = None) -> dict:
    """Runs on an engine: the software, GPUs, data and network facts preflight compares across nodes."""
    from nmtkit.keras2 import import_tf
    f = engine_identity()
    try:
        f["host_addr"] = socket.gethostbyname(f["host"])
    except OSError as e:
        f["host_addr"] = f"unresolvable ({e})"
    f["nmtkit"] = nmtkit.__version__
    f["nmtkit_source"] = _source_sha()
    tf = import_tf()
    f["tensorflow"] = tf.__version__ + ("+cuda" if tf.test.is_built_with_cuda() else "")
    f["gpus"] = len(tf.config.list_physical_devices("GPU"))
    try:
        import horovod
        from horovod.common.basics import HorovodBasics  # noqa: F401  (loads the compiled library)
        import horovod.tensorflow as hvd
        f["horovod"] = horovod.__version__
        f["nccl_built"] = bool(hvd.nccl_built())
        f["horovod_build"] = ",".join(name for name, ok in (("gloo", hvd.gloo_built()), ("mpi", hvd.mpi_built()),
                                                            ("nccl", f["nccl_built"]), ("cuda", hvd.cuda_built()))
                                      if ok)
    except Exception as e:  # noqa: BLE001  reported as a fact, refused by preflight_problems
        f["horovod"], f["horovod_build"], f["nccl_built"], f["horovod_error"] = None, None, False, repr(e)
    if data_dir is not None:
        d = Path(data_dir).expanduser()
        f["data_dir"] = str(d)
        f["data_missing"] = [m for m in DATA_MARKERS if not (d / m).is_file()]
        f["data_ok"] = not f["data_missing"]
        f["data_sha"] = hashlib.sha256((d / "manifest.json").read_bytes()).hexdigest() if f["data_ok"] else None
    else:
        f["data_dir"], f["data_ok"], f["data_missing"], f["data_sha"] = None, True, [], None
    if rendezvous is not None:
        addr, port = rendezvous
        f["rendezvous"] = f"{addr}:{port}"
        f["iface"] = iface_for(addr)
        try:
            socket.create_connection((addr, port), timeout=5).close()
            f["rendezvous_ok"], f["rendezvous_error"] = True, None
        except OSError as e:
            f["rendezvous_ok"], f["rendezvous_error"] = False, f"{type(e).__name__}: {e}"
    return f


def write_file_chunk(path: str, data: bytes, offset: int, final_size: int | None = None) -> int:
    """Runs on an engine: write `data` at `offset` of `path`.part; the last chunk renames it into place."""
    p = Path(path).expanduser()
    p.parent.mkdir(parents=True, exist_ok=True)
    part = p.with_name(p.name + ".part")
    with open(part, "r+b" if offset else "wb") as f:
        f.seek(offset)
        f.write(data)
    if final_size is not None:
        if part.stat().st_size != final_size:
            raise OSError(f"{p}: received {part.stat().st_size} bytes, expected {final_size}")
        os.replace(part, p)
    return len(data)


def _horovod_fresh():
    """A Horovod that will read this process's current HOROVOD_* environment: shut down a previous launch's."""
    import horovod.tensorflow as hvd
    if hvd.is_initialized():
        hvd.shutdown()
    return hvd


def rank_main(env: dict, fn: Callable, args: tuple, kwargs: dict) -> dict:
    """Runs on an engine: set this rank's environment, hvd.init(), call fn. Returns {'rank', 'host', 'value'}."""
    os.environ.update(env)
    import nmtkit.keras2
    nmtkit.keras2.import_tf()
    hvd = _horovod_fresh()
    hvd.init()
    if hvd.rank() != int(env["HOROVOD_RANK"]) or hvd.size() != int(env["HOROVOD_SIZE"]):
        raise ClusterError(f"Horovod started as rank {hvd.rank()}/{hvd.size()} but was assigned "
                           f"{env['HOROVOD_RANK']}/{env['HOROVOD_SIZE']}")
    value = fn(*args, **kwargs)
    return {"rank": hvd.rank(), "host": env["HOROVOD_HOSTNAME"], "pid": os.getpid(), "value": value}


def rank_probe() -> dict:
    """Runs on a rank (through rank_main): what it was told, what Horovod made of it, and a 2-rank allreduce.

    `cluster.submit(rank_probe).wait()` is the quickest check that Horovod works across the nodes.
    """
    import horovod.tensorflow as hvd
    import tensorflow as tf
    total = hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum)
    return {"env": {k: v for k, v in os.environ.items() if k.startswith("HOROVOD_")}, "pid": os.getpid(),
            "allreduce_sum": float(total),
            "hvd": (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size())}


def train_rank(cfg_dict: dict, run_dir: str, data_dir: str | None, resume: bool) -> dict:
    """Runs on an engine (through rank_main): train() with Horovod, publishing each log record to the driver."""
    from ipyparallel.datapub import publish_data
    from nmtkit.config import Config
    from nmtkit.train.dist import Horovod
    from nmtkit.train.loop import train

    def on_log(record: dict) -> None:
        publish_data({"record": {k: v for k, v in record.items() if isinstance(v, (int, float, str, bool))},
                      "time": time.time()})

    dist = Horovod()
    summary = train(Config.from_dict(cfg_dict), run_dir, data_dir=data_dir, dist=dist, on_log=on_log,
                    resume=resume)
    summary["weights_checksum"] = dist.weights_checksum()  # equal on every rank when the ranks stayed in sync
    summary["host"] = dist.host
    return summary


# --- the rendezvous server ----------------------------------------------------------------------------------------

class Rendezvous:
    """Horovod's HTTP rendezvous (the key-value store Gloo uses to find its peers), bound to ONE address.

    horovod.runner's RendezvousServer listens on every interface; on a cloud VM that is an open port to the world,
    so this binds the same handler to the controller's address only. A fresh one per launch.
    """

    def __init__(self, addr: str, slots: list[Slot]):
        from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer
        self.addr = addr
        try:
            self._httpd = RendezvousHTTPServer((addr, 0), RendezvousHandler, 0)
        except OSError as e:
            raise ClusterError(f"cannot listen for the Horovod rendezvous on {addr}: {e}") from None
        self.port = self._httpd.server_address[1]
        self._httpd.init(slots)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="hvd-rendezvous", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None


# --- the cluster ---------------------------------------------------------------------------------------------------

@dataclass
class Engine:
    """One engine as the driver sees it (ordered by rank once a plan exists)."""
    id: int
    host: str          # the real host name
    node: str          # the host name Horovod sees (a logical nodeN for local engines posing as nodes)
    pid: int
    slot: Slot | None = None
    device_index: int = 0


class Cluster:
    """An ipyparallel controller plus engines, one engine per Horovod rank.

    Modes (cfg.cluster): `hosts` empty -> local engines (`engines` of them); `hosts` set and `launcher` "auto" or
    "ssh" -> engines started over SSH on those hosts; `launcher` "manual" -> only the controller starts, students
    run engine_command() on each node.
    """

    def __init__(self, cfg=None, *, engines: int | None = None, hosts: str | None = None,
                 launcher: str | None = None, listen_ip: str | None = None, logical_hosts: bool | None = None,
                 profile_dir: str | os.PathLike | None = None, start_timeout: int | None = None,
                 gloo_timeout: int | None = None, iface: str | None = None, heartbeat_ms: int = 1000):
        from nmtkit.config import ClusterConfig, Config
        cc = cfg.cluster if isinstance(cfg, Config) else (cfg or ClusterConfig())
        self.n = engines if engines is not None else cc.engines
        self.hosts = parse_hosts(hosts if hosts is not None else cc.hosts)
        self.launcher = launcher or cc.launcher
        if self.launcher not in ("auto", "local", "ssh", "manual"):
            raise ClusterError(f"cluster.launcher: {self.launcher!r}: choose auto, local, ssh or manual")
        if self.launcher == "auto":
            self.launcher = "ssh" if self.hosts else "local"
        if self.launcher == "ssh" and not self.hosts:
            raise ClusterError("cluster.launcher=ssh needs cluster.hosts, e.g. 10.0.0.5:2,10.0.0.6:2")
        if self.hosts and self.launcher != "local":
            self.n = sum(k for _, k in self.hosts)
        self.logical_hosts = cc.logical_hosts if logical_hosts is None else logical_hosts
        self.iface = cc.iface if iface is None else iface
        self.listen_ip = listen_ip or controller_ip([h for h, _ in self.hosts] if self.launcher != "local" else [])
        if self.listen_ip in ("0.0.0.0", "", "*"):
            raise ClusterError("refusing to listen on every interface (0.0.0.0): give the address of the network "
                               "that reaches the nodes")
        self.start_timeout = start_timeout or cc.start_timeout
        self.gloo_timeout = gloo_timeout or cc.rendezvous_timeout
        self.profile_dir = str(profile_dir) if profile_dir else None
        self.heartbeat_ms = heartbeat_ms
        self._ipp = None
        self.client = None
        self.ids: list[int] = []           # the engines this cluster uses (stale ids of dead engines excluded)
        self._engines: list[Engine] | None = None
        self.timings: dict[str, float] = {}

    # lifecycle

    def start(self) -> "Cluster":
        import ipyparallel as ipp
        t0 = time.time()
        kwargs: dict[str, Any] = dict(
            controller_ip=self.listen_ip, engine_timeout=self.start_timeout, shutdown_atexit=True, log_level=40,
            # Notice a dead engine in a few seconds (the default is 30 s): the fault path depends on it.
            controller_args=[f"--HeartMonitor.period={self.heartbeat_ms}", "--HeartMonitor.max_heartmonitor_misses=5"])
        if self.profile_dir:
            Path(self.profile_dir).mkdir(parents=True, exist_ok=True)
            kwargs["profile_dir"] = self.profile_dir
        if self.launcher == "ssh":
            kwargs["engine_launcher_class"] = "ssh"
            kwargs["engines"] = {h: k for h, k in self.hosts}
        self._ipp = ipp.Cluster(**kwargs)
        self._ipp.start_controller_sync()
        self._secure_connection_files()
        self.client = self._ipp.connect_client_sync()
        if self.launcher != "manual":
            self._start_engines(self.n)
        self.timings["cluster_start_s"] = time.time() - t0
        return self

    def _engine_env(self) -> dict[str, str]:
        """Environment of local engines: nmtkit importable, Keras 2, and each 'node' its share of the cores."""
        root = str(Path(nmtkit.__file__).resolve().parents[1])
        threads = max(1, (os.cpu_count() or 1) // max(1, self.n))
        return {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p),
                "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
                "TF_NUM_INTRAOP_THREADS": str(threads), "TF_NUM_INTEROP_THREADS": "1"}

    def _start_engines(self, n: int) -> None:
        before = set(self.client.ids)
        env = self._engine_env() if self.launcher == "local" else {"TF_USE_LEGACY_KERAS": "1"}
        self._ipp.start_engines_sync(n, environment=env)
        self.ids = self._wait_for_new(before, n)

    def _wait_for_new(self, before: set, n: int, timeout: float | None = None) -> list[int]:
        deadline = time.time() + (timeout or self.start_timeout)
        while True:
            new = sorted(set(self.client.ids) - before)
            if len(new) >= n:
                self._engines = None
                return new[:n]
            if time.time() > deadline:
                raise ClusterError(f"only {len(new)} of {n} engines registered within {timeout or self.start_timeout}"
                                   f" s; see the engine logs in {self._ipp.profile_dir}/log")
            time.sleep(0.2)

    def wait_for_engines(self, n: int | None = None, timeout: float | None = None) -> list[int]:
        """For hand-started engines: wait until n of them have registered (n defaults to the host list's slots)."""
        n = n or self.n
        self.ids = self._wait_for_new(set(), n, timeout)
        return self.ids

    def engine_command(self, python: str = "ipengine") -> str:
        """The command a student runs on each node to join this controller (mode c).

        Copy the engine connection file to the node first (it holds the controller's address and key; keep it
        private): `scp <file> node:~/` then on the node run the printed command.
        """
        f = self.connection_files().get("engine")
        if f is None:
            raise ClusterError("the controller has not written its engine connection file yet: start() first")
        prefix = "TF_USE_LEGACY_KERAS=1 "
        return f"{prefix}{python} --file=~/{Path(f).name}" if python == "ipengine" else \
            f"{prefix}{python} -m ipyparallel.engine --file=~/{Path(f).name}"

    def connection_files(self) -> dict[str, str]:
        sec = Path(self._ipp.profile_dir) / "security"
        files = {}
        for kind in ("engine", "client"):
            hits = glob.glob(str(sec / f"ipcontroller-{self._ipp.cluster_id}-{kind}.json"))
            if hits:
                files[kind] = hits[0]
        return files

    def _secure_connection_files(self, timeout: float = 30) -> None:
        """The connection files hold the key that lets anyone run code on the engines: owner-only (0600)."""
        deadline = time.time() + timeout
        while len(self.connection_files()) < 2 and time.time() < deadline:
            time.sleep(0.1)
        files = list(self.connection_files().values()) + [self._ipp.cluster_file]
        for f in files:
            if os.path.exists(f):
                os.chmod(f, stat.S_IRUSR | stat.S_IWUSR)

    def stop(self) -> None:
        if self._ipp is not None:
            try:
                if self.client is not None:
                    self.client.close()
            finally:
                self._ipp.stop_cluster_sync()
                self._ipp, self.client, self.ids, self._engines = None, None, [], None

    def __enter__(self):
        return self.start() if self._ipp is None else self

    def __exit__(self, *exc):
        self.stop()

    def restart_engines(self) -> None:
        """Fresh engine processes (the way out of a rank stuck in a Gloo collective): same count, new ids."""
        if self.launcher == "manual":
            raise ClusterError("engines started by hand cannot be restarted from here: restart ipengine on each node")
        before = set(self.client.ids)
        self._ipp.stop_engines_sync()
        self._start_engines(self.n)
        del before

    # engines and plan

    def engines(self, refresh: bool = False) -> list[Engine]:
        """The engines in rank order, with their Horovod slots."""
        if self._engines is not None and not refresh:
            return self._engines
        if not self.ids:
            raise ClusterError("no engines: start() the cluster (or wait_for_engines() for hand-started ones)")
        view = self.client[self.ids]
        idents = view.apply_async(engine_identity).get(timeout=self.start_timeout)
        if self.logical_hosts:
            nodes = [f"node{i}" for i in range(len(self.ids))]
        else:
            nodes = [d["host"] for d in idents]
        slots = host_assignments(nodes)
        engines = []
        per_host: dict[str, int] = {}
        for eid, d, node, slot in zip(self.ids, idents, nodes, slots):
            dev = per_host.get(d["host"], 0)
            per_host[d["host"]] = dev + 1
            engines.append(Engine(id=eid, host=d["host"], node=node, pid=d["pid"], slot=slot, device_index=dev))
        self._engines = sorted(engines, key=lambda e: e.slot.rank)
        return self._engines

    def is_local(self, engine: Engine) -> bool:
        return engine.host == socket.gethostname() and self.launcher == "local"

    # preflight

    def preflight(self, data_dir: str | os.PathLike | None = None, *, push_data: bool = True,
                  rendezvous: tuple[str, int] | None = None, raise_on_problems: bool = True):
        """Check every node before training; returns the per-rank DataFrame, raises PreflightError on a mismatch.

        Local engines share the driver's data directory. Remote nodes that lack the data get it copied through
        their engines (push_data) into the same path.
        """
        engines = self.engines()
        probe = None
        if rendezvous is None:  # a throwaway listener on the rendezvous address: can every node reach us?
            probe = socket.create_server((self.listen_ip, 0))
            rendezvous = (self.listen_ip, probe.getsockname()[1])
        try:
            data = str(Path(data_dir).resolve()) if data_dir is not None else None
            facts = self._gather_facts(engines, data, rendezvous)
            if push_data and data is not None and Path(data).is_dir():
                missing = [e for e, f in zip(engines, facts) if not f.get("error") and not f.get("data_ok")
                           and not self.is_local(e)]
                if missing:
                    for e in missing:
                        self.push_data(data, data, engine=e)
                    facts = self._gather_facts(engines, data, rendezvous)
        finally:
            if probe is not None:
                probe.close()
        self.last_facts = facts
        table = preflight_table(facts)
        problems = preflight_problems(facts)
        if problems and raise_on_problems:
            raise PreflightError("preflight refused to train:\n  - " + "\n  - ".join(problems))
        return table

    def _gather_facts(self, engines: list[Engine], data_dir, rendezvous) -> list[dict]:
        jobs = [self.client[e.id].apply_async(node_facts, data_dir, rendezvous) for e in engines]
        facts = []
        for e, job in zip(engines, jobs):
            try:
                f = job.get(timeout=self.start_timeout)
            except Exception as err:  # noqa: BLE001  a node that cannot even answer is a preflight problem
                f = {"host": e.host, "pid": e.pid, "error": f"{type(err).__name__}: {err}"}
            f.update(rank=e.slot.rank, node=e.node, engine=e.id)
            facts.append(f)
        return facts

    def push_data(self, src: str | os.PathLike, dest: str, *, engine: Engine, chunk: int = 8 << 20) -> int:
        """Copy the prepared data files of `src` to `dest` on one engine's node (atomic per file). Returns bytes."""
        total = 0
        view = self.client[engine.id]
        for p in sorted(Path(src).iterdir()):
            if not p.is_file() or p.name.startswith("."):
                continue
            size = p.stat().st_size
            with open(p, "rb") as f:
                offset = 0
                while True:
                    block = f.read(chunk)
                    last = offset + len(block) >= size
                    view.apply_sync(write_file_chunk, str(Path(dest) / p.name), block, offset, size if last else None)
                    offset += len(block)
                    if last:
                        break
            total += size
        return total

    # jobs

    def submit(self, fn: Callable, *args, ranks: int | None = None, **kwargs) -> "Job":
        """Run fn(*args, **kwargs) on every engine (or the first `ranks`) as one Horovod job: a fresh rendezvous,
        each engine's HOROVOD_* environment, hvd.init(), then fn. Returns a Job at once."""
        import horovod  # noqa: F401  the driver needs Horovod's rendezvous server
        engines = self._first(ranks)
        t0 = time.time()
        rdv = Rendezvous(self.listen_ip, [e.slot for e in engines])
        facts = getattr(self, "last_facts", None) or []
        build = {f["rank"]: f for f in facts}
        jobs = []
        for e in engines:
            f = build.get(e.slot.rank, {})
            iface = self.iface or f.get("iface") or iface_for(self.listen_ip)
            ops = collective_ops(bool(f.get("nccl_built")), True, int(f.get("gpus") or 0))
            env = rank_env(e.slot, addr=self.listen_ip, port=rdv.port, iface=iface, ops=ops,
                           gloo_timeout=self.gloo_timeout, device_index=e.device_index)
            jobs.append(self.client[e.id].apply_async(rank_main, env, fn, args, kwargs))
        return Job(self, engines, jobs, rdv, t0)

    def _first(self, ranks: int | None) -> list[Engine]:
        """The first `ranks` engines (all by default), re-planned as a job of that size."""
        engines = self.engines()
        if ranks is None or ranks == len(engines):
            return engines
        if not 1 <= ranks <= len(engines):
            raise ClusterError(f"ranks={ranks}: this cluster has {len(engines)} engines")
        chosen = engines[:ranks]
        slots = host_assignments([e.node for e in chosen])
        return sorted((Engine(e.id, e.host, e.node, e.pid, s, e.device_index) for e, s in zip(chosen, slots)),
                      key=lambda e: e.slot.rank)

    def launch(self, cfg, run_dir: str | os.PathLike, *, data_dir: str | os.PathLike | None = None,
               resume: bool = True, preflight: bool = True, ranks: int | None = None) -> "Job":
        """Start distributed training in the background: preflight, then train() on every rank (or the first
        `ranks`; a run resumes from its last checkpoint with any number of ranks). Returns a Job at once."""
        data = Path(data_dir or cfg.data.dir).resolve()
        if preflight:
            self.preflight(data)
        run_dir = Path(run_dir).resolve()
        return self.submit(train_rank, cfg.to_dict(), str(run_dir), str(data), resume, ranks=ranks)


# --- a running job: results, stop, faults, the live panel ---------------------------------------------------------

class Job:
    """A distributed job in flight. wait() -> per-rank results in rank order; stop(); panel(); progress()."""

    def __init__(self, cluster: Cluster, engines: list[Engine], jobs: list, rendezvous: Rendezvous, t0: float):
        self.cluster, self.engines, self.jobs, self.rendezvous, self.t0 = cluster, engines, jobs, rendezvous, t0
        self.error: RankFailedError | None = None
        self._lock = threading.Lock()
        self._panel_thread = None
        self.stop_requested = False

    @property
    def done(self) -> bool:
        return self.error is not None or all(j.ready() for j in self.jobs)

    def _who(self, e: Engine) -> str:
        return f"rank {e.slot.rank} on host {e.host}" + (f" (node {e.node})" if e.node != e.host else "") + \
            f", engine {e.id}, pid {e.pid}"

    def check(self) -> None:
        """Raise RankFailedError if a rank died or raised (and release the others); otherwise return."""
        with self._lock:
            if self.error is not None:
                raise self.error
            live = set(self.cluster.client.ids)
            for e, j in zip(self.engines, self.jobs):
                dead = e.id not in live or (self.cluster.is_local(e) and not _pid_alive(e.pid))
                if dead and not j.ready():
                    self._fail(e, "its engine process died (killed, or out of memory) while training")
                if j.ready() and not j.successful():
                    try:
                        j.get(0)
                    except Exception as err:  # noqa: BLE001
                        self._fail(e, _short(err))
            if self.error is not None:
                raise self.error

    def _fail(self, e: Engine, why: str) -> None:
        if self.error is None:
            self.error = RankFailedError(f"{self._who(e)}: {why}. The other ranks were released; the run can "
                                         f"resume from its last checkpoint with cluster.launch(...) (same or "
                                         f"different number of ranks)")
            self._release()

    def _release(self) -> None:
        """Free ranks that may be blocked in a Gloo collective waiting for the dead one."""
        self.rendezvous.stop()
        try:
            if self.cluster.launcher == "manual":
                live = set(self.cluster.client.ids)
                self.cluster.client.abort(targets=[e.id for e in self.engines if e.id in live], block=False)
            else:
                self.cluster.restart_engines()
        except Exception as err:  # noqa: BLE001  the error we raise is about the rank; note this one
            self.error.args = (self.error.args[0] + f" (releasing the other engines failed: {_short(err)})",)

    def wait(self, timeout: float | None = None, poll: float = 0.5) -> list[dict]:
        """Block until every rank returns; their results ordered by Horovod rank. Raises RankFailedError."""
        deadline = None if timeout is None else time.time() + timeout
        while not all(j.ready() for j in self.jobs):
            self.check()
            if deadline is not None and time.time() > deadline:
                raise TimeoutError(f"job still running after {timeout} s: {self.progress_text()}")
            time.sleep(poll)
        self.check()
        self.rendezvous.stop()
        results = sorted((j.get() for j in self.jobs), key=lambda r: r["rank"])
        return results

    def results(self) -> list:
        """The per-rank return values (e.g. train()'s summaries), in rank order."""
        return [r["value"] for r in self.wait()]

    def stop(self, timeout: float = 120) -> list[dict]:
        """Ask every rank to stop (SIGINT: the training loop agrees across ranks, rank 0 checkpoints), then wait."""
        self.stop_requested = True
        self.cluster.client.send_signal("SIGINT", targets=[e.id for e in self.engines], block=True)
        return self.wait(timeout=timeout)

    # live view

    def progress(self):
        """The latest published record of every rank, as a DataFrame indexed by rank."""
        import pandas as pd
        rows = []
        for e, j in zip(self.engines, self.jobs):
            rec = (j.data or {}).get("record", {}) if hasattr(j, "data") else {}
            state = "failed" if (j.ready() and not j.successful()) else ("done" if j.ready() else "running")
            rows.append({"rank": e.slot.rank, "node": e.node, "state": state, "step": rec.get("step"),
                         "loss": rec.get("loss"), "ms/step": _ms(rec.get("step_time")),
                         "tok/s": rec.get("tok_per_sec", rec.get("tokens_per_sec"))})
        return pd.DataFrame(rows).set_index("rank")

    def progress_text(self) -> str:
        return self.progress().to_string()

    def panel(self, interval: float = 1.0):
        """A live widget (every rank's step, loss and step time) updated from a background thread; plain text
        when ipywidgets is not available. Returns the widget (display it) or the text."""
        try:
            import ipywidgets as widgets
            from IPython import get_ipython
            if get_ipython() is None:
                raise ImportError("not in IPython")
        except ImportError:
            return self.progress_text()
        box = widgets.HTML(value=self._panel_html())

        def loop():
            while True:
                finished = self.done
                try:
                    self.check()
                    box.value = self._panel_html()
                except RankFailedError as err:
                    box.value = self._panel_html() + f"<p style='color:#b00'><b>{_html(str(err))}</b></p>"
                    return
                if finished:
                    return
                time.sleep(interval)

        self._panel_thread = threading.Thread(target=loop, name="nmtkit-panel", daemon=True)
        self._panel_thread.start()
        return box

    def _panel_html(self) -> str:
        df = self.progress()
        head = f"<p>{len(self.engines)} ranks, {time.time() - self.t0:.0f} s</p>"
        return head + df.to_html(na_rep="-", float_format=lambda v: f"{v:.4g}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


def _short(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[-1] if text else ''}"[:500]


def _ms(v) -> float | None:
    return None if v is None else round(1000 * float(v), 1)


def _html(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def start(cfg) -> Cluster:
    """The notebook's one-liner: the cluster that cfg.cluster describes, started."""
    return Cluster(cfg).start()
