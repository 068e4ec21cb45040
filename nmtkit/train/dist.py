"""Single process vs Horovod: the only place the training code touches Horovod.

The loop in `nmtkit.train.loop` calls these and nothing else, so one step function serves both:

    rank, size, local_rank, local_size, is_chief   who am I
    mean_all(grads)                    average a step's gradients over ranks
    mean(x)                            average one tensor over ranks
    broadcast(variables)               copy rank 0's values into every rank's variables
    any(flag) -> bool                  True on every rank if it is True on any (agree to stop)
    sum(x) -> float                    sum a Python number over ranks (tokens per step)

`set_threads(dist)` sizes TensorFlow's thread pools for the ranks sharing this machine.
"""
from __future__ import annotations

import os
import socket

from nmtkit.keras2 import import_tf


class DistError(RuntimeError):
    """Horovod is missing or not initialised the way training needs."""


def thread_counts(cores: int, local_ranks: int, env=None) -> tuple[int, int] | None:
    """(intra-op, inter-op) threads for one of `local_ranks` ranks on `cores` cores: the cores split evenly,
    at least one each (TensorFlow's default gives every rank all the cores, and N ranks then fight over them).
    None when TF_NUM_INTRAOP_THREADS or TF_NUM_INTEROP_THREADS is set: TensorFlow reads those itself."""
    env = os.environ if env is None else env
    if env.get("TF_NUM_INTRAOP_THREADS") or env.get("TF_NUM_INTEROP_THREADS"):
        return None
    share = max(1, cores // max(1, local_ranks))
    return share, share


def set_threads(dist) -> tuple[int, int] | None:
    """Apply thread_counts() to this process's cores (its CPU affinity); returns what was set, or None when
    the environment decides or TensorFlow already started its pools (then they stay as they are)."""
    counts = thread_counts(len(os.sched_getaffinity(0)), getattr(dist, "local_size", 1))
    if counts is None:
        return None
    tf = import_tf()
    try:
        tf.config.threading.set_intra_op_parallelism_threads(counts[0])
        tf.config.threading.set_inter_op_parallelism_threads(counts[1])
    except RuntimeError:  # TensorFlow has run an op in this process already: the pools exist
        return None
    return counts


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

    def describe(self) -> str:
        return "single process"


COMPRESSIONS = ("none", "fp16")


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
        raise DistError(f"train.compression={name!r}: choose one of {', '.join(COMPRESSIONS)}")
    return hvd.Compression.fp16 if name == "fp16" else hvd.Compression.none


class Horovod:
    """Horovod data parallelism; `hvd.init()` must be possible (horovodrun, or the env the cluster sets).

    Pins one GPU per local rank (before TensorFlow touches the GPUs) and records whether Horovod was built
    with NCCL GPU ops (`nccl_built`), so the loop can report what carries the allreduce.
    """

    name = "horovod"

    def __init__(self, compression: str = "none"):
        tf = import_tf()
        try:
            import horovod.tensorflow as hvd
        except ImportError as e:
            raise DistError(f"import horovod.tensorflow failed ({e}); build Horovod against this TensorFlow "
                            "(see scripts/setup.sh) or train with dist=Single()") from None
        hvd.init()
        self.hvd = hvd
        self.compression = compressor(hvd, compression)
        self.rank, self.size, self.local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
        self.local_size = hvd.local_size()
        self.is_chief = self.rank == 0
        self.host = os.environ.get("HOROVOD_HOSTNAME") or socket.gethostname()
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            # NMTKIT_DEVICE_INDEX (set by nmtkit.cluster): the rank's index on its physical machine, which differs
            # from the local rank when local engines pose as separate nodes.
            gpu = gpus[int(os.environ.get("NMTKIT_DEVICE_INDEX", self.local_rank)) % len(gpus)]
            try:
                tf.config.experimental.set_memory_growth(gpu, True)
                tf.config.set_visible_devices(gpu, "GPU")
            except RuntimeError:  # GPUs already initialised in this process: keep what it has
                pass
        self.gpus = len(gpus)
        self.nccl_built = bool(hvd.nccl_built())
        self.gloo_built = bool(hvd.gloo_built())
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
        return self.hvd.allreduce(x, op=self.hvd.Average, compression=self.compression)

    def broadcast(self, variables) -> None:
        self.synced = list(variables)  # kept so weights_checksum() can compare ranks after training
        self.hvd.broadcast_variables(self.synced, root_rank=0)

    def weights_checksum(self) -> float | None:
        """Sum of every variable last broadcast (weights, optimizer slots, step): equal on all ranks in sync."""
        synced = getattr(self, "synced", None)
        if not synced:
            return None
        return float(sum(float(import_tf().reduce_sum(import_tf().cast(v, "float64"))) for v in synced))

    def any(self, flag: bool) -> bool:
        tf = import_tf()
        total = self.hvd.allreduce(tf.constant(1.0 if flag else 0.0), op=self.hvd.Sum, name="nmtkit_any")
        return float(total) > 0.0

    def sum(self, x: float) -> float:
        tf = import_tf()
        return float(self.hvd.allreduce(tf.constant(float(x)), op=self.hvd.Sum, name="nmtkit_sum"))

    def describe(self) -> str:
        ops = "NCCL" if (self.nccl_built and self.gpus) else ("Gloo" if self.gloo_built else "MPI")
        how = "one fused allreduce of all gradients" if self.fused else "an allreduce per gradient"
        return (f"Horovod rank {self.rank}/{self.size} (local rank {self.local_rank}) on {self.host}, {how} "
                f"via {ops}")
