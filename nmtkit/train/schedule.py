"""The Keras side of the learning-rate policy (nmtkit.lr holds the formula and the multi-rank factor), the
precision decision and the optimizer.

With N ranks the effective batch is N times larger; train.lr_scaling chooses what the learning rate does about
it: "none" (the homework: unchanged), "sqrt" (x sqrt(N)) or "linear" (x N). See nmtkit.lr.
"""
from __future__ import annotations

import json
from pathlib import Path

from nmtkit import lr
from nmtkit.config import choices
from nmtkit.keras2 import import_tf
from nmtkit.lr import SCALINGS, transformer_lr  # noqa: F401  (re-exported for tests and notebooks)
from nmtkit.errors import ConfigError

tf = import_tf()

PRECISIONS = choices("train.precision")


# Test BLEU of fp32 and mixed_bfloat16 at the small shape (bench/quality.py), written when measured; bf16 is
# chosen on CPUs only while this record says it costs at most BF16_MAX_BLEU_LOSS.
BF16_RECORD = Path(__file__).with_name("bf16_quality.json")
BF16_MAX_BLEU_LOSS = 1.0
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def rank_factor(lr_scaling: str, size: int) -> float:
    """How much N ranks multiply the learning rate (nmtkit.lr.rank_factor, with this module's error)."""
    try:
        return lr.rank_factor(lr_scaling, size)
    except ValueError as e:
        raise ConfigError(str(e)) from None


@tf.keras.utils.register_keras_serializable("nmtkit")
class TransformerSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    """Keras schedule of `transformer_lr`: schedule(s) == transformer_lr(s) * factor. The optimizer passes its
    update count, which is 0 at the first update; that one uses step 1's rate (the formula is 0 at step 0).
    `factor` is the multi-rank factor (see `rank_factor`)."""

    def __init__(self, d_model: int, warmup_steps: int, scale: float = 2.0, factor: float = 1.0):
        self.d_model, self.warmup_steps, self.scale, self.factor = d_model, warmup_steps, scale, factor

    def __call__(self, step):
        step = tf.maximum(tf.cast(step, tf.float32), 1.0)
        return transformer_lr(step, self.d_model, self.warmup_steps, self.scale, self.factor, minimum=tf.minimum)

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale,
                "factor": self.factor}


def make_schedule(model_cfg, train_cfg, size: int = 1) -> TransformerSchedule:
    return TransformerSchedule(model_cfg.d_model, train_cfg.warmup_steps, train_cfg.lr_scale,
                               rank_factor(train_cfg.lr_scaling, size))


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags (the first processor's), empty where /proc/cpuinfo is missing."""
    try:
        with open(path) as f:
            return set(next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), []))
    except OSError:
        return set()


def bf16_quality(path: Path | None = None) -> tuple[bool, str]:
    """(bf16 is good enough, why) from the recorded fp32-vs-bf16 test BLEU (BF16_RECORD)."""
    path = path or BF16_RECORD
    try:
        rec = json.loads(Path(path).read_text())
        fp32, bf16 = float(rec["fp32_bleu"]), float(rec["bf16_bleu"])
    except (OSError, ValueError, KeyError, TypeError):
        return False, "no recorded bf16 quality measurement"
    ok = bf16 >= fp32 - BF16_MAX_BLEU_LOSS
    return ok, (f"bf16 test BLEU {bf16:.1f} vs fp32 {fp32:.1f} at the {rec.get('shape', '?')} shape "
                f"({rec.get('measured', '?')}): {'within' if ok else 'more than'} {BF16_MAX_BLEU_LOSS:g} point")


def decide_precision(setting: str, gpus, flags=None, record: Path | None = None) -> tuple[str, str]:
    """(precision, reason). `gpus`: a count, or the GPUs' compute capabilities ((major, minor) or None each).

    auto: mixed_float16 on GPUs with tensor cores (compute capability 7.0 and up); float32 on older GPUs;
    on CPUs mixed_bfloat16 where the flags show avx512_bf16 or amx_bf16 (faster there, slower without) and the
    recorded quality measurement allows it, else float32. `flags`: the CPU flags (default: this machine's).
    """
    if setting not in PRECISIONS:
        raise ConfigError(f"train.precision={setting!r}: choose one of {', '.join(PRECISIONS)}")
    if setting != "auto":
        return setting, "set in the config"
    caps = [None] * gpus if isinstance(gpus, int) else list(gpus)
    if caps:
        known = [tuple(c) for c in caps if c]
        if known and min(known) < (7, 0):
            return "float32", f"auto: GPU compute capability {'.'.join(map(str, min(known)))} has no tensor cores"
        return "mixed_float16", ("auto: GPU with tensor cores (compute capability "
                                 f"{'.'.join(map(str, min(known))) if known else 'unknown'})")
    flags = cpu_flags() if flags is None else set(flags)
    native = [f for f in BF16_CPU_FLAGS if f in flags]
    if not native:
        return "float32", "auto: CPU without avx512_bf16/amx_bf16 (bf16 is emulated there, slower)"
    ok, why = bf16_quality(record)
    if ok:
        return "mixed_bfloat16", f"auto: CPU with {'/'.join(native)}; {why}"
    return "float32", f"auto: CPU with {'/'.join(native)}, but {why}"


def choose_precision(setting: str, gpus, flags=None, record: Path | None = None) -> str:
    """decide_precision() without the reason."""
    return decide_precision(setting, gpus, flags, record)[0]


def use_xla(setting: bool, size: int, horovod: bool = False) -> bool:
    """train.xla -> whether the step is compiled with XLA (jit_compile). Never in a Horovod job, one rank
    included: Horovod's allreduce is a custom op with no XLA kernel (its XLA ops exist only for GPUs built with
    HOROVOD_ENABLE_XLA_OPS), so the step stays a plain tf.function."""
    return bool(setting) and size == 1 and not horovod


class FusedAdam(tf.keras.optimizers.Adam):
    """Keras Adam whose dense update is TensorFlow's fused ResourceApplyAdam kernel (one pass over each variable
    and its two slots, as nanoGPT's `fused=True` AdamW) instead of ~8 elementwise ops (the update's time, measured:
    bench/README.md). Same math (epsilon outside the bias-corrected sqrt), same
    slots, so checkpoints are unchanged; sparse gradients keep Keras's path."""

    def update_step(self, gradient, variable):
        if isinstance(gradient, tf.IndexedSlices) or self.amsgrad:
            return super().update_step(gradient, variable)
        dt = variable.dtype
        slot = self._index_dict[self._var_key(variable)]
        power = tf.cast(self.iterations + 1, dt)
        c = lambda x: tf.cast(x, dt)  # noqa: E731
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=self._momentums[slot].handle, v=self._velocities[slot].handle,
            beta1_power=tf.pow(c(self.beta_1), power), beta2_power=tf.pow(c(self.beta_2), power),
            lr=c(self.learning_rate), beta1=c(self.beta_1), beta2=c(self.beta_2), epsilon=c(self.epsilon),
            grad=gradient)


def make_optimizer(schedule, train_cfg, precision: str):
    """Adam (fused) with the config's betas/epsilon; wrapped in dynamic loss scaling under mixed precision."""
    opt = FusedAdam(learning_rate=schedule, beta_1=train_cfg.beta1, beta_2=train_cfg.beta2,
                    epsilon=train_cfg.epsilon)
    if precision == "mixed_float16":
        opt = tf.keras.mixed_precision.LossScaleOptimizer(opt)
    return opt
