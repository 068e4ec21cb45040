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
    slots, so checkpoints are unchanged; sparse gradients keep Keras's path.

    Correct under jit_compile=True too (tf-keras's default where a GPU is listed; the kit turns it off, see
    `make_optimizer`): each variable's update is then its own XLA-compiled trace, and a step scalar is shared only
    between updates traced in one graph."""

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
        # keyed by the graph being traced as well: under jit_compile each variable's update is traced in its own
        # graph (_update_step_xla), and a tensor of one variable's trace is out of scope in the next one's
        key = (dt, tf.compat.v1.get_default_graph())
        if self._scalars is not None and key in self._scalars:
            return self._scalars[key]
        c = lambda x: tf.cast(x, dt)  # noqa: E731
        power = tf.cast(self.iterations + 1, dt)
        out = {"beta1_power": tf.pow(c(self.beta_1), power), "beta2_power": tf.pow(c(self.beta_2), power),
               "lr": c(self.learning_rate), "beta1": c(self.beta_1), "beta2": c(self.beta_2),
               "epsilon": c(self.epsilon)}
        if self._scalars is not None:
            self._scalars[key] = out
        return out

    def update_step(self, gradient, variable):
        if isinstance(gradient, tf.IndexedSlices) or self.amsgrad:
            return super().update_step(gradient, variable)
        slot = self._index_dict[self._var_key(variable)]
        tf.raw_ops.ResourceApplyAdam(var=variable.handle, m=self._momentums[slot].handle,
                                     v=self._velocities[slot].handle, grad=gradient,
                                     **self._step_scalars(variable.dtype))


# The optimizer's own XLA (tf-keras's jit_compile, True by default wherever a GPU is listed): off, on GPUs too. Not
# for Horovod's sake, as train.xla is refused for Horovod jobs (nmtkit.training.precision.use_xla): the update
# holds no Horovod op, the allreduce happens before it. Off because FusedAdam's update is already one fused kernel
# a variable, so XLA has nothing to fuse, and would instead compile one program per variable at the first step
# and launch each through XLA at every step (the tiny profile's 47 variables, GPU-shaped on a 2-core CPU: first
# step 5.7 s against 2.4 s, then 84 against 75 ms a step); and so a GPU's update is the one every CPU run and test
# runs. With train.xla the whole step, the update inside it, is compiled anyway.
OPTIMIZER_JIT = False


def make_optimizer(schedule, train_cfg, precision: str):
    """Adam (fused) with the config's betas/epsilon, without its own XLA (OPTIMIZER_JIT); wrapped in dynamic loss
    scaling under mixed precision."""
    opt = FusedAdam(learning_rate=schedule, beta_1=train_cfg.beta1, beta_2=train_cfg.beta2,
                    epsilon=train_cfg.epsilon, jit_compile=OPTIMIZER_JIT)
    if precision == "mixed_float16":
        opt = tf.keras.mixed_precision.LossScaleOptimizer(opt, initial_scale=train_cfg.loss_scale_start,
                                                          dynamic_growth_steps=train_cfg.loss_scale_growth)
    return opt
