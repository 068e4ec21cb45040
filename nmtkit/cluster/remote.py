"""The functions that run on the engines. Module level, so ipyparallel sends them by reference (each engine
imports this module). TensorFlow, horovod.tensorflow and nmtkit.training are imported inside them, so the driver,
which imports this module too, never loads TensorFlow."""
from __future__ import annotations

import hashlib
import os
import socket
import sys
import time
from pathlib import Path
from typing import Callable

import horovod
import psutil
from ipyparallel.datapub import publish_data

import nmtkit
from nmtkit.allocation import rank_deadline
from nmtkit.cluster.plan import iface_for
from nmtkit.config import Config
from nmtkit.errors import ClusterError
from nmtkit.files import sha256_file
from nmtkit.gpus import gpu_holders
from nmtkit.keras2 import import_tf
from nmtkit.runs import RunHandle

# The data files a prepared data directory must hold on every node (see docs/architecture.md).
DATA_MARKERS = ("manifest.json", "spm.model")


def engine_identity() -> dict:
    """Who this engine is: host, pid, Python, and the GPUs a scheduler bound it (CUDA_VISIBLE_DEVICES, or None, and
    the UUIDs of the GPUs it can open: under Slurm's device cgroups every task calls its own GPU 0)."""
    from nmtkit.gpus import gpu_uuids
    return {"host": socket.gethostname(), "pid": os.getpid(), "python": sys.version.split()[0], "cwd": os.getcwd(),
            "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "gpu_uuids": gpu_uuids()}


def node_facts(data_dir: str | None, rendezvous: tuple[str, int] | None = None) -> dict:
    """The software, GPUs, data and network facts preflight compares across nodes."""
    f = engine_identity()
    try:
        f["host_addr"] = socket.gethostbyname(f["host"])
    except OSError as e:
        f["host_addr"] = f"unresolvable ({e})"
    f["nmtkit"] = nmtkit.__version__
    f["nmtkit_source"] = source_sha()
    tf = import_tf()
    f["tensorflow"] = tf.__version__
    f["gpus"] = len(tf.config.list_physical_devices("GPU"))
    # the wheel's CUDA support, said beside what it found: a CUDA build on a machine without GPUs runs on CPU
    f["tf_cuda"] = ("CUDA build, no GPU found" if not f["gpus"] else "CUDA build") if tf.test.is_built_with_cuda() \
        else "CPU build"
    f["gpu_memory"] = gpu_holders([os.getpid()])  # other processes holding a GPU: preflight names them
    f.update(horovod_facts())
    f.update(data_facts(data_dir))
    if rendezvous is not None:
        addr, port = rendezvous
        f["rendezvous"] = f"{addr}:{port}"
        f["iface"] = iface_for(addr)
        try:
            socket.create_connection((addr, port), timeout=5).close()
            f["rendezvous_ok"], f["rendezvous_error"] = True, None
        except OSError as e:
            f["rendezvous_ok"], f["rendezvous_error"] = False, f"{type(e).__name__}: {e}"
    f["ifaces"] = sorted(psutil.net_if_addrs())  # cluster.iface must be one of them (preflight)
    return f


def horovod_facts() -> dict:
    """Horovod's version and how it was built (gloo, mpi, nccl, cuda): the real build flags, not assumptions."""
    try:
        import horovod.tensorflow as hvd  # loads the compiled library and TensorFlow: engines only
        built = {"gloo": hvd.gloo_built(), "mpi": hvd.mpi_built(), "nccl": hvd.nccl_built(),
                 "cuda": hvd.cuda_built()}
        return {"horovod": horovod.__version__, "nccl_built": bool(built["nccl"]),
                "horovod_build": ",".join(name for name, ok in built.items() if ok)}
    except Exception as e:  # noqa: BLE001  reported as a fact, refused by preflight_problems
        return {"horovod": None, "horovod_build": None, "nccl_built": False, "horovod_error": repr(e)}


def data_facts(data_dir: str | None) -> dict:
    if data_dir is None:
        return {"data_dir": None, "data_ok": True, "data_missing": [], "data_sha": None}
    d = Path(data_dir).expanduser()
    missing = [m for m in DATA_MARKERS if not (d / m).is_file()]
    return {"data_dir": str(d), "data_ok": not missing, "data_missing": missing,
            "data_sha": None if missing else sha256_file(d / "manifest.json")}


def source_sha() -> str:
    """One hash of nmtkit's Python sources: 'same nmtkit' means the same code, not just the same version number."""
    root = Path(nmtkit.__file__).parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def write_file_chunk(path: str, data: bytes, offset: int, final_size: int | None = None) -> int:
    """Write `data` at `offset` of `path`.part; the last chunk checks the size and renames it into place.

    Not files.atomic_write_bytes: a data file arrives in many messages, so it is assembled on disk first.
    """
    p = Path(path).expanduser()
    p.parent.mkdir(parents=True, exist_ok=True)
    part = p.with_name(p.name + ".part")
    with open(part, "r+b" if offset else "wb") as f:
        f.seek(offset)
        f.write(data)
        if final_size is not None:
            f.flush()
            os.fsync(f.fileno())
    if final_size is not None:
        if part.stat().st_size != final_size:
            raise OSError(f"{p}: received {part.stat().st_size} bytes, expected {final_size}")
        os.replace(part, p)
    return len(data)


PINNED: dict = {}  # what rank_main's pin_devices() did on this engine last, for rank_check


def _tf_started() -> bool:
    """TensorFlow's runtime (devices, thread pools) exists in this process already."""
    try:
        from tensorflow.python.eager import context
        return context.context()._context_handle is not None
    except Exception:  # noqa: BLE001  a private detail: unknown means "not known to have started"
        return False


def pin_args(env: dict) -> tuple[int, int, str | None]:
    """pin_devices' (local rank, local size, device index) for a rank's environment. An engine a scheduler bound
    its own GPUs (NMTKIT_GPUS_BOUND) is alone on them: it pins the first it sees, and its host's other ranks, on
    other GPUs, neither count against its GPUs nor share its cores (Slurm binds those per task too)."""
    if env.get("NMTKIT_GPUS_BOUND") == "1":
        return 0, 1, "0"
    return int(env["HOROVOD_LOCAL_RANK"]), int(env["HOROVOD_LOCAL_SIZE"]), env.get("NMTKIT_DEVICE_INDEX")


def rank_main(env: dict, fn: Callable, args: tuple, kwargs: dict) -> dict:
    """Set this rank's environment, hvd.init(), call fn. Returns {'rank', 'host', 'pid', 'value'}."""
    os.environ.update(env)
    import_tf()  # TensorFlow with the Keras 2 API before Horovod loads it
    from nmtkit.training.dist import pin_devices  # the TensorFlow layer: engines only
    # this rank's GPU, memory growth and threads before anything (rank_check's allreduce included) runs an op;
    # raises if an earlier call on this engine initialised TensorFlow with other devices
    started = _tf_started()
    PINNED.clear()
    PINNED.update(pin_devices(*pin_args(env)), tf_started_before=started)
    import horovod.tensorflow as hvd  # engines only
    # Horovod: the kit launches through Gloo's rendezvous, so the build must have it
    if not hvd.gloo_built():
        raise ClusterError(f"Horovod on {env['HOROVOD_HOSTNAME']} was built without Gloo: rebuild it with "
                           f"HOROVOD_WITH_GLOO=1 (see scripts/setup.sh)")
    # Horovod: a previous launch on this engine is shut down so init() reads the new environment
    if hvd.is_initialized():
        hvd.shutdown()
    hvd.init()  # Horovod: from the HOROVOD_* environment set above
    # Horovod: the rank it made of that environment must be the one the plan assigned
    if hvd.rank() != int(env["HOROVOD_RANK"]) or hvd.size() != int(env["HOROVOD_SIZE"]):
        raise ClusterError(f"Horovod started as rank {hvd.rank()}/{hvd.size()} but was assigned "
                           f"{env['HOROVOD_RANK']}/{env['HOROVOD_SIZE']}")
    value = fn(*args, **kwargs)
    # Horovod: the rank orders the results
    return {"rank": hvd.rank(), "host": env["HOROVOD_HOSTNAME"], "pid": os.getpid(), "value": value}


def rank_check() -> dict:
    """Run through rank_main: what this rank was told, what Horovod made of it, and an allreduce across ranks.

    `cluster.submit(rank_check).wait()` is the quickest check that Horovod works across the nodes.
    """
    import horovod.tensorflow as hvd  # engines only
    tf = import_tf()
    # Horovod: 1 + 2 + ... + N on every rank when the ranks reach each other
    total = hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum)
    env = {k: v for k, v in os.environ.items() if k.startswith(("HOROVOD_", "NCCL_", "TF_NUM_"))}
    return {"env": env, "pid": os.getpid(), "allreduce_sum": float(total),
            # what rank_main pinned before this allreduce (the first op on the engine)
            "pinned": dict(PINNED), "gpus": [d.name for d in tf.config.get_visible_devices("GPU")],
            "threads": (tf.config.threading.get_intra_op_parallelism_threads(),
                        tf.config.threading.get_inter_op_parallelism_threads()),
            # Horovod: how it placed this rank (rank, size, local rank and size, cross rank and size)
            "hvd": (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size())}


def train_rank(cfg_dict: dict, run: RunHandle, data_dir: str | None, resume: bool) -> dict:
    """Run through rank_main: train() with Horovod, publishing each log record to the driver (Job.progress).
    `run`: the driver's session of the run directory (path and token, as an argument: never the environment);
    rank 0 stops if another job takes the directory over."""
    # nmtkit.training is the TensorFlow layer: imported on the engines only
    from nmtkit.training.dist import Horovod
    from nmtkit.training.loop import train

    def on_log(record: dict) -> None:
        publish_data({"record": {k: v for k, v in record.items() if isinstance(v, (int, float, str, bool))},
                      "time": time.time()})

    cfg = Config.from_dict(cfg_dict)
    dist = Horovod(compression=cfg.train.compression)
    summary = train(cfg, run.open(), data_dir=data_dir, dist=dist, on_log=on_log, resume=resume,
                    deadline=rank_deadline())  # the allocation's end, as the launcher gave every rank
    summary["weights_checksum"] = dist.weights_checksum()  # equal on every rank when the ranks stayed in sync
    summary["host"] = dist.host
    summary["fused_allreduce"] = dist.fused
    return summary
