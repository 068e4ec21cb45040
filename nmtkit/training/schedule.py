"""The Keras side of the learning-rate policy (nmtkit.lr holds the formula and the multi-rank factor) and the
optimizer (the precision and XLA decisions: nmtkit.training.precision).

With N ranks the effective batch is N times larger; train.lr_scaling chooses what the learning rate does about
it: "none" (the homework: unchanged), "sqrt" (x sqrt(N)) or "linear" (x N). See nmtkit.lr.
"""
from __future__ import annotations

from nmtkit import lr
from nmtkit.errors import ConfigError
from nmtkit.keras2 import import_tf
from nmtkit.lr import transformer_lr

tf = import_tf()


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


class FusedAdam(tf.keras.optimizers.Adam):
    """Keras Adam whose dense update is TensorFlow's fused ResourceApplyAdam kernel (one pass over each variable
    and its two slots, as nanoGPT's `fused=True` AdamW) instead of ~8 elementwise ops (the update's time, measured:
    bench/README.md). Same math (epsilon outside the bias-corrected sqrt), same
    slots, so checkpoints are unchanged; sparse gradients keep Keras's path."""

    _scalars: dict | None = None

    def apply_gradients(self, *args, **kwargs):
        # the step's scalars (rate, powers) built once per dtype, not once per variable: ~90 variables made the
        # tiny traced step ~1,000 ops larger (4,633 against 3,665), ~0.8 s of tracing at every run's start
        self._hold_scalars({})
        try:
            return super().apply_gradients(*args, **kwargs)
        finally:
            self._hold_scalars(None)

    @tf.__internal__.tracking.no_automatic_dependency_tracking
    def _hold_scalars(self, scalars: dict | None) -> None:
        self._scalars = scalars  # a cache of tensors, not state: kept out of checkpoints

    def _step_scalars(self, dt) -> dict:
        if self._scalars is not None and dt in self._scalars:
            return self._scalars[dt]
        c = lambda x: tf.cast(x, dt)  # noqa: E731
        power = tf.cast(self.iterations + 1, dt)
        out = {"beta1_power": tf.pow(c(self.beta_1), power), "beta2_power": tf.pow(c(self.beta_2), power),
               "lr": c(self.learning_rate), "beta1": c(self.beta_1), "beta2": c(self.beta_2),
               "epsilon": c(self.epsilon)}
        if self._scalars is not None:
            self._scalars[dt] = out
        return out

    def update_step(self, gradient, variable):
        if isinstance(gradient, tf.IndexedSlices) or self.amsgrad:
            return super().update_step(gradient, variable)
        slot = self._index_dict[self._var_key(variable)]
        tf.raw_ops.ResourceApplyAdam(var=variable.handle, m=self._momentums[slot].handle,
                                     v=self._velocities[slot].handle, grad=gradient,
                                     **self._step_scalars(variable.dtype))


def make_optimizer(schedule, train_cfg, precision: str):
    """Adam (fused) with the config's betas/epsilon; wrapped in dynamic loss scaling under mixed precision."""
    opt = FusedAdam(learning_rate=schedule, beta_1=train_cfg.beta1, beta_2=train_cfg.beta2,
                    epsilon=train_cfg.epsilon)
    if precision == "mixed_float16":
        opt = tf.keras.mixed_precision.LossScaleOptimizer(opt)
    return opt
