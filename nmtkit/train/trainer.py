"""The model, its optimizer and the step functions. `nmtkit.train.loop.train()` drives a Trainer; the pieces
are public so the cluster code and tests wrap them rather than copy them.

Single process and Horovod differ only in `dist` (nmtkit.train.dist): it wraps the gradient tape, averages
accumulated gradients and broadcasts rank 0's variables before the first step.
"""
from __future__ import annotations

import numpy as np

from nmtkit.config import Config
from nmtkit.keras2 import import_tf
from nmtkit.model.transformer import build, smoothed_loss
from nmtkit.train.dist import Single
from nmtkit.train.schedule import choose_precision, make_optimizer, make_schedule

tf = import_tf()


def _optimizer_variables(opt) -> list:
    v = opt.variables
    return list(v() if callable(v) else v)


def _inner(opt):
    return getattr(opt, "inner_optimizer", opt)


class Trainer:
    """Model, optimizer, checkpoint and the step functions. `train()` drives it; the pieces are public so the
    cluster code and tests wrap them rather than copy them."""

    def __init__(self, cfg: Config, vocab_size: int, dist=None):
        self.cfg, self.dist = cfg, dist or Single()
        self.precision = choose_precision(cfg.train.precision, len(tf.config.list_physical_devices("GPU")))
        self.mixed = self.precision == "mixed_float16"
        tf.keras.utils.set_random_seed(cfg.train.seed)  # Python, NumPy and TF: same init on every run/rank
        self.model = build(cfg.model, vocab_size, dtype=self.precision)
        self.schedule = make_schedule(cfg.model, cfg.train, self.dist.size)
        self.optimizer = make_optimizer(self.schedule, cfg.train, self.precision)
        self.variables = self.model.trainable_variables
        _inner(self.optimizer).build(self.variables)  # slots exist now: restore and broadcast see them
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, step=self.step)
        self.accum = max(1, cfg.train.grad_accum)
        if self.accum > 1:
            self.accumulators = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self.variables]
        spec = [tf.TensorSpec([None, None], tf.int32)] * 2
        jit = bool(cfg.train.xla)
        self.train_step = tf.function(self._train_step, input_signature=spec, jit_compile=jit)
        self.accumulate = tf.function(self._accumulate, input_signature=spec, jit_compile=jit)
        self.apply_accumulated = tf.function(self._apply_accumulated)
        self.eval_step = tf.function(self._eval_step, input_signature=spec)

    def _forward(self, src, tgt):
        with tf.GradientTape() as tape:
            logits = self.model((src, tgt[:, :-1]), training=True)
            loss_sum, ntok = smoothed_loss(logits, tgt[:, 1:], self.cfg.model.label_smoothing)
            loss = loss_sum / tf.maximum(ntok, 1.0)
            scaled = self.optimizer.get_scaled_loss(loss) if self.mixed else loss
        return tape, loss, scaled, ntok

    def _gradients(self, tape, scaled):
        grads = tape.gradient(scaled, self.variables)
        return self.optimizer.get_unscaled_gradients(grads) if self.mixed else grads

    def _train_step(self, src, tgt):
        """One optimizer step on one batch: forward, all-reduced gradients (dist.tape), Adam update."""
        tape, loss, scaled, ntok = self._forward(src, tgt)
        grads = self._gradients(self.dist.tape(tape), scaled)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return loss, ntok

    def _accumulate(self, src, tgt):
        """Gradient accumulation, part 1: add this micro-batch's local gradients / grad_accum."""
        tape, loss, scaled, ntok = self._forward(src, tgt)
        for acc, g in zip(self.accumulators, self._gradients(tape, scaled)):
            acc.assign_add(tf.convert_to_tensor(g) / self.accum)
        return loss, ntok

    def _apply_accumulated(self):
        """Part 2: average the accumulated gradients over ranks (dist.mean), update, reset."""
        grads = [self.dist.mean(acc.read_value()) for acc in self.accumulators]
        self.optimizer.apply_gradients(zip(grads, self.variables))
        for acc in self.accumulators:
            acc.assign(tf.zeros_like(acc))

    def _eval_step(self, src, tgt):
        logits = self.model((src, tgt[:, :-1]), training=False)
        return smoothed_loss(logits, tgt[:, 1:], self.cfg.model.label_smoothing)

    def run_step(self, batches) -> tuple[float, int, int]:
        """One optimizer step over `grad_accum` (src, tgt) micro-batches -> (mean loss, src tokens, tgt tokens)."""
        losses, src_tok, tgt_tok = [], 0, 0
        for src, tgt in batches:
            fn = self.train_step if self.accum == 1 else self.accumulate
            loss, ntok = fn(src, tgt)
            losses.append(loss)
            src_tok += int(tf.math.count_nonzero(src))
            tgt_tok += int(ntok)
        if self.accum > 1:
            self.apply_accumulated()
        self.step.assign_add(1)
        return float(np.mean([float(l) for l in losses])), src_tok, tgt_tok

    def learning_rate(self) -> float:
        return float(self.schedule(_inner(self.optimizer).iterations))

    def sync_variables(self) -> None:
        """Every rank starts from rank 0's weights, optimizer slots and step (restored or fresh)."""
        self.dist.broadcast(self.model.variables + _optimizer_variables(self.optimizer) + [self.step])

    def state_bytes(self) -> int:
        """Bytes of what a checkpoint holds: weights, optimizer slots, step."""
        variables = self.model.variables + _optimizer_variables(self.optimizer) + [self.step]
        return sum(v.shape.num_elements() * v.dtype.size for v in variables)

    def eval_loss(self, dataset) -> float:
        total, count = 0.0, 0.0
        for src, tgt in dataset:
            s, n = self.eval_step(src, tgt)
            total, count = total + float(s), count + float(n)
        return total / max(count, 1.0)
