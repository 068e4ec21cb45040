"""The model, its optimizer and the step functions. `nmtkit.training.loop.train()` drives a Trainer; the pieces
are public so the cluster code and tests wrap them rather than copy them.

Single process and Horovod differ only in `dist` (nmtkit.training.dist): it averages the step's gradients over
ranks and broadcasts rank 0's variables before the first step.
"""
from __future__ import annotations

import dataclasses
import json

from nmtkit.config import Config
from nmtkit.gpus import gpu_memory
from nmtkit.keras2 import import_tf
from nmtkit.model.decode import Searcher
from nmtkit.model.memory import fit
from nmtkit.model.transformer import build, smoothed_loss
from nmtkit.training.dist import Single, towers
from nmtkit.training.precision import decide_precision, use_xla
from nmtkit.training.schedule import make_optimizer, make_schedule

tf = import_tf()


def _optimizer_variables(opt) -> list:
    v = opt.variables
    return list(v() if callable(v) else v)


def _inner(opt):
    return getattr(opt, "inner_optimizer", opt)


def loss_scale_variables(opt) -> list:
    """The dynamic loss scale and its counter (mixed_float16): not in `opt.variables`, so named here for the
    broadcast; the checkpoint tracks them itself."""
    state = getattr(opt, "_loss_scale", None)
    return [state.current_loss_scale, state.counter] if hasattr(state, "current_loss_scale") else []


def gpu_capabilities(tf) -> list:
    """Each visible GPU's compute capability (major, minor), None where TensorFlow does not say."""
    return [tf.config.experimental.get_device_details(g).get("compute_capability")
            for g in tf.config.list_physical_devices("GPU")]


def job_gpus(per_rank: list) -> tuple[list, float | None]:
    """(every rank's GPUs' compute capabilities, the smallest GPU memory of any rank, None where no rank has a
    GPU) from each rank's (capabilities, memory bytes or None), as dist.gather returns them."""
    caps = [c for rank_caps, _ in per_rank for c in rank_caps]
    memories = [m for _, m in per_rank if m is not None]
    return caps, (min(memories) if memories else None)


class Trainer:
    """Model, optimizer, checkpoint and the step functions. `train()` drives it; the pieces are public so the
    cluster code and tests wrap them rather than copy them."""

    def __init__(self, cfg: Config, vocab_size: int, dist=None):
        self.cfg, self.dist = cfg, dist or Single()
        gpus = gpu_capabilities(tf)
        # one plan for the whole job: ranks on nodes with different GPUs that each decided from their own would
        # trace different steps (precision, micro-batch count), whose allreduces never meet: Horovod hangs
        caps, device = job_gpus(self.dist.gather((gpus, gpu_memory() if gpus else None)))
        self.precision, self.precision_reason = decide_precision(cfg.train.precision, caps, d_model=cfg.model.d_model)
        self.mixed = self.precision == "mixed_float16"
        tf.keras.utils.set_random_seed(cfg.train.seed)  # Python, NumPy and TF: same init on every run/rank
        self.model = build(cfg.model, vocab_size, dtype=self.precision)
        self.schedule = make_schedule(cfg.model, cfg.train, self.dist.size)
        self.optimizer = make_optimizer(self.schedule, cfg.train, self.precision)
        self.variables = self.model.trainable_variables
        _inner(self.optimizer).build(self.variables)  # slots exist now: restore and broadcast see them
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, step=self.step)
        # micro-batches: the per-device batch split so a step's projected peak fits the GPU (nmtkit.model.memory),
        # the job's smallest
        self.micro = fit(cfg, vocab_size, device, self.precision)
        self.accum = self.micro.count
        self.xla = use_xla(cfg.train.xla, self.dist.size, horovod=self.dist.name == "horovod", gpu=bool(gpus))
        self.towers = 1 if self.xla else towers(tf.config)  # parts of a micro-batch run side by side (CPU cores)
        pair = (tf.TensorSpec([None, None], tf.int32),) * 2
        # the whole optimizer step (every micro-batch, the allreduce, the update, step += 1) is one graph call
        self.train_step = tf.function(self._train_step, input_signature=[(pair,) * self.accum], jit_compile=self.xla,
                                      autograph=False)
        self.eval_step = tf.function(self._eval_step, input_signature=list(pair), autograph=False)
        self.searchers: dict[tuple, Searcher] = {}  # traced beam searches on this model, by (beam, alpha)

    def searcher(self, beam_size: int, alpha: float) -> Searcher:
        key = (beam_size, alpha)
        if key not in self.searchers:
            self.searchers[key] = Searcher(self.model, beam_size, alpha)
        return self.searchers[key]

    def _dropout_seed(self, micro: int):
        """The seed of this micro-batch's dropout masks, from (train.seed, rank, step, micro-batch) alone: a resumed
        run draws the uninterrupted run's masks with no random state in the checkpoint; each rank draws its own."""
        base = tf.constant([self.cfg.train.seed, self.dist.rank], tf.int64)
        return tf.random.experimental.stateless_fold_in(base, self.step * self.accum + micro)

    def _forward(self, src, tgt, seed, ntok=None):
        """Forward under a tape -> (tape, loss, scaled loss, target tokens); the loss is the token mean over
        `ntok` tokens when given (a tower's share of its micro-batch's mean), else over this batch's own."""
        with tf.GradientTape() as tape:
            logits = self.model((src, tgt[:, :-1]), training=True, seed=seed)
            loss_sum, own = smoothed_loss(logits, tgt[:, 1:], self.cfg.model.label_smoothing)
            ntok = own if ntok is None else ntok
            loss = loss_sum / tf.maximum(ntok, 1.0)
            scaled = self.optimizer.get_scaled_loss(loss) if self.mixed else loss
        return tape, loss, scaled, ntok

    def _gradients(self, tape, scaled):
        """Local gradients; under mixed_float16 still multiplied by the loss scale, so they cross the wire (cast
        to fp16 by train.compression=fp16) before they are unscaled and small values stay representable."""
        return tape.gradient(scaled, self.variables)

    def _micro_step(self, src, tgt, seed):
        """One micro-batch's (gradients, loss, target tokens). With towers its sentences are cut into as many
        parts, independent in the graph, so TensorFlow runs them side by side; each part's loss is its token sum
        over the whole micro-batch's tokens, so the parts add up to the micro-batch's mean and its gradient."""
        if self.towers == 1:
            tape, loss, scaled, ntok = self._forward(src, tgt, seed)
            return self._gradients(tape, scaled), loss, ntok
        ntok = tf.reduce_sum(tf.cast(tf.not_equal(tgt[:, 1:], 0), tf.float32))
        n, grads, loss = tf.shape(src)[0], None, 0.0
        for i in range(self.towers):
            part = slice(n * i // self.towers, n * (i + 1) // self.towers)
            tape, tower_loss, scaled, _ = self._forward(src[part], tgt[part],
                                                        tf.random.experimental.stateless_fold_in(seed, i), ntok)
            g = [tf.convert_to_tensor(x) for x in self._gradients(tape, scaled)]
            grads, loss = (g if grads is None else [a + b for a, b in zip(grads, g)]), loss + tower_loss
        return grads, loss, ntok

    def _train_step(self, batches):
        """One optimizer step over `grad_accum` micro-batches -> [mean loss, source tokens, target tokens] (a
        float32 tensor: the caller reads it when it logs, so nothing here waits for the device); under
        mixed_float16 also the loss scale the step used and the one it left (lower: the step overflowed).

        Each micro-batch: forward and local gradients (summed / grad_accum when there are several); then the
        gradients averaged over ranks (dist.mean_all) and one Adam update.
        """
        losses, src_tok, tgt_tok, total = [], 0.0, 0.0, None
        for micro, (src, tgt) in enumerate(batches):
            # one after the other: nothing else orders the micro-batches, and TensorFlow's executor runs independent
            # branches at once, which would hold every micro-batch's activations together (the memory projection
            # counts one); so each micro-batch's ops wait for the previous one's gradients
            with tf.control_dependencies(total or []):
                grads, loss, ntok = self._micro_step(src, tgt, self._dropout_seed(micro))
            if self.accum > 1:
                local = [tf.convert_to_tensor(g) / self.accum for g in grads]
                grads = local if total is None else [a + g for a, g in zip(total, local)]
            total = grads
            losses.append(loss)
            src_tok += tf.reduce_sum(tf.cast(tf.not_equal(src, 0), tf.float32))
            tgt_tok += ntok
        grads = self.dist.mean_all(total)
        stats = [tf.add_n(losses) / len(losses), src_tok, tgt_tok]
        if self.mixed:  # every rank unscales the same averaged values: all skip an overflowing step together
            stats.append(tf.identity(self.optimizer.loss_scale))  # the scale this step's loss was multiplied by
            grads = self.optimizer.get_unscaled_gradients(grads)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        self.step.assign_add(1)
        if self.mixed:  # the scale after the update: halved when this step's gradients overflowed (step skipped)
            stats.append(tf.identity(self.optimizer.loss_scale))
        return tf.stack(stats)

    def _eval_step(self, src, tgt):
        logits = self.model((src, tgt[:, :-1]), training=False)
        return smoothed_loss(logits, tgt[:, 1:], self.cfg.model.label_smoothing)

    def run_step(self, batches):
        """One optimizer step over `grad_accum` (src, tgt) micro-batches -> a float32 tensor [mean loss, source
        tokens, target tokens] (+ the loss scale before and after, mixed_float16), not read here (see Reporter: one
        host sync per log interval)."""
        return self.train_step(tuple((src, tgt) for src, tgt in batches))

    def learning_rate(self) -> float:
        return float(self.schedule(_inner(self.optimizer).iterations))

    def sync_variables(self) -> None:
        """Every rank starts from rank 0's weights, optimizer slots and step (restored or fresh)."""
        self.dist.broadcast(self.model.variables + _optimizer_variables(self.optimizer) + [self.step]
                            + loss_scale_variables(self.optimizer))

    def state_bytes(self) -> int:
        """Bytes of what a checkpoint holds: weights, optimizer slots, step."""
        variables = self.model.variables + _optimizer_variables(self.optimizer) + [self.step]
        return sum(v.shape.num_elements() * v.dtype.size for v in variables)

    def eval_loss(self, dataset) -> float:
        total, count = self.eval_sums(dataset)
        return total / max(count, 1.0)

    def eval_sums(self, dataset) -> tuple[float, float]:
        """(summed token loss, tokens) over `dataset`: what ranks sharing an evaluation add up."""
        total, count = 0.0, 0.0
        for src, tgt in dataset:
            s, n = self.eval_step(src, tgt)
            total, count = total + float(s), count + float(n)
        return total, count


# A run of the same graph as the process's last one (a notebook's second run, a resume in the same process) reuses
# that Trainer: its traced step, evaluation and searches (seconds per run on a small model, bench/README.md), with
# every variable put back to its first value. Fields a run may change without changing the graph:
_RUN_ONLY = {"train": {"steps", "ckpt_every", "log_every", "keep_checkpoints", "max_hours", "max_cost"},
             "data": {"dir"}}
KEEP_MAX_PARAMS = 5_000_000  # the kept first values are a host copy of the weights and Adam's slots: small models
_kept: list[Trainer] = []


def graph_key(cfg: Config, vocab_size: int, dist) -> str | None:
    """What the traced functions depend on, as a string; None where a Trainer is not reused. A Horovod rank's
    step holds Horovod ops, not Horovod's state: the next launch's hvd.init() serves them as it would a new trace
    (tests/test_cluster_train.py trains the same weights either way)."""
    if dist.name not in ("single", "horovod"):
        return None
    parts = {"vocab": vocab_size, "dist": [dist.name, dist.rank, dist.size]}  # the rank seeds the dropout masks
    for section in ("model", "train", "data"):
        values = dataclasses.asdict(getattr(cfg, section))
        parts[section] = {k: v for k, v in values.items() if k not in _RUN_ONLY.get(section, ())}
    return json.dumps(parts, sort_keys=True)


def _state(trainer: Trainer) -> list:
    return (trainer.model.variables + _optimizer_variables(trainer.optimizer) + [trainer.step]
            + loss_scale_variables(trainer.optimizer) + [trainer.checkpoint.save_counter])


def trainer_for(cfg: Config, vocab_size: int, dist=None) -> Trainer:
    """The Trainer for a run starting fresh (a checkpoint restores into it as into a new one): the process's last
    one with every variable at its first value when `graph_key` matches, else a new one (kept when small)."""
    dist = dist or Single()
    key = graph_key(cfg, vocab_size, dist)
    if key is not None and _kept and _kept[0].key == key:
        trainer = _kept[0]
        for v, first in zip(_state(trainer), trainer.first):
            v.assign(first)
        tf.keras.utils.set_random_seed(cfg.train.seed)  # as a new Trainer leaves Python's, NumPy's and TF's seeds
        trainer.cfg, trainer.dist = cfg, dist  # the same graph; the run's own length, budget and Horovod launch
        trainer.reused = True
        return trainer
    _kept.clear()
    trainer = Trainer(cfg, vocab_size, dist)
    trainer.key, trainer.reused = key, False
    if key is not None and sum(v.shape.num_elements() for v in trainer.variables) <= KEEP_MAX_PARAMS:
        trainer.first = [v.numpy() for v in _state(trainer)]
        _kept.append(trainer)
    return trainer
