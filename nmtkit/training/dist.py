"""Single process vs Horovod: the only place the training code touches Horovod.

The loop in `nmtkit.training.loop` calls these and nothing else, so one step function serves both:

    rank, size, local_rank, local_size, is_chief   who am I
    mean_all(grads)                    average a step's gradients over ranks
    mean(x)                            average one tensor over ranks
    broadcast(variables)               copy rank 0's values into every rank's variables
    any(flag) -> bool                  True on every rank if it is True on any (agree to stop)
    sum(x) -> float                    sum a Python number over ranks (tokens per step)
    gather(obj) -> list                every rank's picklable object, in rank order, on every rank (evaluation)

`pin_devices(...)` (through `set_threads(dist)` in one process, `rank_main` on the engines and `Horovod()`):
every process's GPU (one per local rank), memory growth and thread pools, before TensorFlow's first op.
"""
from __future__ import annotations

import os
import socket
import sys

from nmtkit.config import choices
from nmtkit.errors import StackError
from nmtkit.keras2 import import_tf

MAX_TOWERS = 2  # measured on 2-core hosts only (bench/README.md): more towers would each get a smaller batch


def thread_counts(cores: int, local_ranks: int, env=None, gpu: bool = False) -> tuple[int, int] | None:
    """(intra-op, inter-op) threads for one of `local_ranks` ranks on `cores` cores: the cores split evenly,
    at least one each (TensorFlow's default gives every rank all the cores, and N ranks then fight over them).
    On a CPU a rank with 2+ cores runs its step as towers side by side (`towers`), each op on a share of
    them: one thread an op on 2 cores. None when TF_NUM_INTRAOP_THREADS or TF_NUM_INTEROP_THREADS is set:
    TensorFlow reads those itself."""
    env = os.environ if env is None else env
    if env.get("TF_NUM_INTRAOP_THREADS") or env.get("TF_NUM_INTEROP_THREADS"):
        return None
    share = max(1, cores // max(1, local_ranks))
    if gpu or share < 2:
        return share, share
    return share // min(share, MAX_TOWERS), share


def towers(config=None) -> int:
    """How many parts the training step splits each micro-batch into, run side by side: on a CPU whose pools
    thread_counts() set to fewer threads an op than the process has, one part per such group of threads (on 2
    cores: two towers of one core each, 1.10-1.30x the step of one tower on both cores, bench/README.md);
    1 with a GPU, with TensorFlow's default pools (0/0) or with the environment's."""
    config = config or import_tf().config
    intra, inter = (config.threading.get_intra_op_parallelism_threads(),
                    config.threading.get_inter_op_parallelism_threads())
    if config.list_physical_devices("GPU") or intra < 1 or inter <= intra:
        return 1
    return inter // intra


def compute_threads(config=None) -> int:
    """Threads this process's ops run on together (a CPU's measured matmul peak is timed on as many)."""
    config = config or import_tf().config
    intra = config.threading.get_intra_op_parallelism_threads()
    return intra * towers(config) if intra else len(os.sched_getaffinity(0))


def pool_sizes(config=None) -> list[int]:
    """TensorFlow's (intra-op, inter-op) thread pools as they run: where its config says 0 (its default), the
    TF_NUM_*_THREADS variable it reads, else the cores this process may run on (TensorFlow counts its affinity)."""
    config = config or import_tf().config
    have = (config.threading.get_intra_op_parallelism_threads(), config.threading.get_inter_op_parallelism_threads())
    cores = len(os.sched_getaffinity(0))
    return [n or int(os.environ.get(var) or cores)
            for n, var in zip(have, ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"))]


def pin_devices(local_rank: int = 0, local_size: int = 1, device_index: int | str | None = None, *,
                pin: bool = True, config=None, cores: int | None = None, env=None) -> dict:
    """The one place a process's devices are set up; call it before TensorFlow's first op (and before the
    first collective). Every path goes through it: one process (`set_threads`), each engine (`rank_main`,
    before hvd.init) and `Horovod()` (again: a no-op when the settings are already those).

    GPUs: `pin` (a Horovod rank) makes only GPU `device_index` (default: the local rank; nmtkit.cluster sets
    NMTKIT_DEVICE_INDEX, the index on the physical machine) visible; one process sees them all. Memory growth
    on every visible GPU, so processes sharing a machine do not each take all of its memory. Raises
    StackError when TensorFlow already initialised other devices (too late: the rank would use
    GPU 0 beside another), StackError when there are more local ranks than GPUs.
    Threads: thread_counts() for `local_size` ranks; if the pools already exist with other sizes they stay, and
    a warning says so (wrong speed, not wrong results).
    Returns {"gpus", "device", "threads"}.
    """
    config = config or import_tf().config
    gpus = config.list_physical_devices("GPU")
    out = {"gpus": len(gpus), "device": None, "threads": None}
    if gpus:
        index = int(local_rank if device_index in (None, "") else device_index)
        if pin and (index >= len(gpus) or local_size > len(gpus)):
            raise StackError(f"{max(local_size, index + 1)} ranks on this machine but {len(gpus)} GPU(s): one "
                            f"rank per GPU (NCCL refuses two ranks on one device); start at most {len(gpus)} "
                            "rank(s) per machine (cluster.slots / --hosts host:N)")
        visible = [gpus[index]] if pin else list(gpus)
        try:
            config.set_visible_devices(visible, "GPU")
            for gpu in visible:
                config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:
            have = [d.name for d in config.get_visible_devices("GPU")]
            if have != [d.name for d in visible]:
                raise StackError(
                    f"TensorFlow initialised its GPUs ({', '.join(have) or 'none'}) before this process could pin "
                    f"{', '.join(d.name for d in visible)}: something ran a TensorFlow op first (in a notebook: a "
                    "cell before the cluster's first job). Restart the engines/kernel and pin first") from None
        out["device"] = index if pin else None
    cores = cores or len(os.sched_getaffinity(0))
    counts = thread_counts(cores, local_size, env, gpu=bool(gpus))
    if counts is not None:
        try:
            config.threading.set_intra_op_parallelism_threads(counts[0])
            config.threading.set_inter_op_parallelism_threads(counts[1])
        except RuntimeError:
            have = (config.threading.get_intra_op_parallelism_threads(),
                    config.threading.get_inter_op_parallelism_threads())
            if have == (0, 0) and local_size == 1:  # TensorFlow's default, every core: one tower, no warning
                return out | {"threads": (cores, cores)}
            print(f"warning: TensorFlow's thread pools already run {have[0]}/{have[1]} threads in this process; "
                  f"{counts[0]}/{counts[1]} suit {local_size} rank(s) here (restart the process to apply)",
                  file=sys.stderr, flush=True)
            counts = have
    out["threads"] = counts
    return out


def set_threads(dist) -> tuple[int, int] | None:
    """pin_devices() for `dist` (one process: every GPU, memory growth; a rank: its own GPU); returns the thread
    counts in use, or None when the environment decides them."""
    pinned = pin_devices(getattr(dist, "local_rank", 0), getattr(dist, "local_size", 1),
                         os.environ.get("NMTKIT_DEVICE_INDEX"), pin=getattr(dist, "name", "") == "horovod")
    return pinned["threads"]


class Single:
    """One process, one (or no) GPU: every collective is the identity."""

    rank = 0
    size = 1
    local_rank = 0
    local_size = 1
    is_chief = True
    name = "single"

    def __init__(self):
        self.host = socket.gethostname()

    def mean_all(self, xs):
        return list(xs)

    def mean(self, x):
        return x

    def broadcast(self, variables) -> None:
        pass

    def any(self, flag: bool) -> bool:
        return bool(flag)

    def sum(self, x: float) -> float:
        return float(x)

    def gather(self, obj) -> list:
        return [obj]

    def describe(self) -> str:
        return "single process"


COMPRESSIONS = choices("train.compression")


def fuse_gradients(gpus: int, nccl_built: bool) -> bool:
    """One allreduce of all the step's gradients (flattened into one buffer) where the allreduce runs on CPUs
    (Gloo): Horovod's background thread then negotiates one tensor per step instead of one per variable (~90 in
    the tiny model), CPU time taken from training on a machine whose cores the ranks share. GPU ranks with NCCL
    keep one allreduce per gradient, which Horovod fuses itself and starts as each gradient is ready."""
    return not (gpus and nccl_built)


def compressor(hvd, name: str):
    """train.compression -> Horovod's compressor: fp16 halves the gradient bytes on the wire (values are cast to
    float16 for the allreduce and back), none sends float32."""
    if name not in COMPRESSIONS:
        raise StackError(f"train.compression={name!r}: choose one of {', '.join(COMPRESSIONS)}")
    # Horovod: the compressor casts each gradient on the wire (fp16) or leaves it float32
    return hvd.Compression.fp16 if name == "fp16" else hvd.Compression.none


class Horovod:
    """Horovod data parallelism; `hvd.init()` must be possible (horovodrun, or the env the cluster sets).

    Pins one GPU per local rank (before TensorFlow touches the GPUs) and records whether Horovod was built
    with NCCL GPU ops (`nccl_built`), so the loop can report what carries the allreduce.
    """

    name = "horovod"

    def __init__(self, compression: str = "none"):
        try:
            import horovod.tensorflow as hvd
        except ImportError as e:
            raise StackError(f"import horovod.tensorflow failed ({e}); build Horovod against this TensorFlow "
                            "(see scripts/setup.sh) or train with dist=Single()") from None
        # Horovod: initialise from the HOROVOD_* environment the launcher set
        hvd.init()
        self.hvd = hvd
        self.compression = compressor(hvd, compression)
        # Horovod: this process's place among all ranks, and among the ranks of its node (one GPU each)
        self.rank, self.size, self.local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
        self.local_size = hvd.local_size()  # Horovod: ranks on this node
        self.is_chief = self.rank == 0
        self.host = os.environ.get("HOROVOD_HOSTNAME") or socket.gethostname()
        # nmtkit.cluster pinned before hvd.init (rank_main); horovodrun and other launchers pin here
        self.pinned = pin_devices(self.local_rank, self.local_size, os.environ.get("NMTKIT_DEVICE_INDEX"))
        self.gpus = self.pinned["gpus"]
        # Horovod: what the build can carry the allreduce over (NCCL on GPUs, Gloo on CPUs)
        self.nccl_built = bool(hvd.nccl_built())
        self.gloo_built = bool(hvd.gloo_built())  # Horovod: the build's Gloo, for CPUs and host sums
        self.fused = fuse_gradients(self.gpus, self.nccl_built)

    def mean_all(self, xs):
        """Average a step's gradients over ranks: one allreduce per gradient (what hvd.DistributedGradientTape
        does), or, when `fused`, one allreduce of them all concatenated (dense; same-dtype gradients only)."""
        tf = import_tf()
        xs = list(xs)
        if not self.fused or len({x.dtype for x in xs}) > 1:
            return [self.mean(x) for x in xs]
        dense = [tf.convert_to_tensor(x) for x in xs]
        flat = self.mean(tf.concat([tf.reshape(x, [-1]) for x in dense], 0))
        # sizes as tensors: a gradient's static shape can be partly unknown inside the step's graph
        parts = tf.split(flat, tf.stack([tf.size(x) for x in dense]), num=len(dense))
        return [tf.reshape(p, tf.shape(x)) for p, x in zip(parts, dense)]

    def mean(self, x):
        # Horovod: average the gradient over ranks (NCCL on GPUs, Gloo on CPUs)
        return self.hvd.allreduce(x, op=self.hvd.Average, compression=self.compression)

    def broadcast(self, variables) -> None:
        self.synced = list(variables)  # kept so weights_checksum() can compare ranks after training
        # Horovod: rank 0's weights and optimizer state to every rank, after the first step built them
        self.hvd.broadcast_variables(self.synced, root_rank=0)

    def weights_checksum(self) -> float | None:
        """Sum of every variable last broadcast (weights, optimizer slots, step): equal on all ranks in sync."""
        synced = getattr(self, "synced", None)
        if not synced:
            return None
        return float(sum(float(import_tf().reduce_sum(import_tf().cast(v, "float64"))) for v in synced))

    def _host_sum(self, x: float, name: str) -> float:
        """Sum a Python number over ranks on the CPU (Gloo): reading the result waits for the other ranks'
        hosts, never for a GPU's queued work (a GPU tensor would make every step a host sync)."""
        tf = import_tf()
        with tf.device("/cpu:0"):
            # Horovod: a sum over ranks on the host
            return float(self.hvd.allreduce(tf.constant(float(x)), op=self.hvd.Sum, name=name))

    def any(self, flag: bool) -> bool:
        return self._host_sum(1.0 if flag else 0.0, "nmtkit_any") > 0.0

    def sum(self, x: float) -> float:
        return self._host_sum(x, "nmtkit_sum")

    def gather(self, obj) -> list:
        """Every rank's `obj` (pickled), in rank order, on every rank; on the host, like the sums."""
        with import_tf().device("/cpu:0"):
            # Horovod: allgather of the pickled objects (an evaluation's translations, its loss sums)
            return list(self.hvd.allgather_object(obj, name="nmtkit_gather"))

    def describe(self) -> str:
        ops = "NCCL" if (self.nccl_built and self.gpus) else ("Gloo" if self.gloo_built else "MPI")
        how = "one fused allreduce of all gradients" if self.fused else "an allreduce per gradient"
        return (f"Horovod rank {self.rank}/{self.size} (local rank {self.local_rank}) on {self.host}, {how} "
                f"via {ops}")
