"""A training step's peak memory per device, projected from the shape before anything runs (TensorFlow-free), and
the micro-batches that make the per-device batch fit.

    est = project(cfg, vocab, batch=256, length=57)   # Projection: bytes by part, per sentence, total
    plan = fit(cfg, vocab, device_bytes)              # MicroBatches: how many, why, or ConfigError with both figures

Parts: the float32 weights, their gradients and Adam's two slots (16 bytes a parameter); the activations a
backward pass keeps, per token and layer, after Korthikanti et al. 2022 ("Reducing Activation Recomputation in
Large Transformer Models", table 2: attention 11d + 5hL bytes, feed-forward 19d at 16 bits, here with the
feed-forward's own width: 3d + 4f, and 2d per layer norm), twice that in float32, times KEEP; the logits in the
compute precision and three float32 tensors of their size (the loss's backprop, the smoothed gradient, its product
with the upstream gradient: nmtkit.model.transformer.smoothed_loss). KEEP is measured, not derived: TensorFlow
keeps more than the paper's minimum (unfused attention; the float dropout masks and derived layer-norm gradients
it was fitted with, 2026-11-24, are now bool masks and a written gradient, which keep less, so the projection
errs on the safe side). Measured on CPU
(bench/memory.py, bench/README.md), this projection meets the slope of peak memory over the batch within 2% at
the small and base shapes; where a GPU keeps less, the projection errs on the safe side (more micro-batches).
"""
from __future__ import annotations

from dataclasses import dataclass

from nmtkit.errors import ConfigError

GIB = 2 ** 30
MARGIN = 0.10  # of a device's memory left for the allocator's fragmentation, cuDNN/NCCL workspaces, the context
KEEP = 2.4     # activations kept / the paper's count: fitted on CPU at two shapes (bench/memory.py, 2026-11-24)


def params_of(m, vocab: int) -> int:
    """Trainable parameters of the Transformer (tied embedding and output projection), as count_params counts."""
    d, f, b = m.d_model, m.d_ff, 1 if m.attention_bias else 0
    attn = 4 * d * d + 4 * d * b
    ffn = 2 * d * f + f + d
    norm = 2 * d
    enc = m.encoder_layers * (attn + ffn + 2 * norm) + norm
    dec = m.decoder_layers * (2 * attn + ffn + 3 * norm) + norm
    return vocab * d + enc + dec + vocab  # the output projection's bias


@dataclass
class Projection:
    """Bytes of one training step's peak, by part, for `batch` sentences of `length` tokens on one device."""

    batch: int
    length: int
    precision: str
    states: float        # weights, gradients, Adam's m and v
    activations: float   # what the backward pass keeps
    loss: float          # the logits and the loss's own peak
    per_sentence: float  # activations + loss of one sentence: the slope in the batch

    @property
    def total(self) -> float:
        return self.states + self.activations + self.loss

    def line(self) -> str:
        return (f"projected peak memory per device: {self.total / GIB:.1f} GiB at {self.batch} sentences x "
                f"{self.length} tokens, {self.precision} (weights+Adam {self.states / GIB:.2f}, activations "
                f"{self.activations / GIB:.2f}, logits+loss {self.loss / GIB:.2f} GiB; "
                f"{self.per_sentence / 2**20:.1f} MiB a sentence)")


def project(cfg, vocab: int, batch: int | None = None, length: int | None = None,
            precision: str | None = None) -> Projection:
    """The step's peak at `batch` sentences (default data.batch_sentences) of `length` tokens (default the
    longest a batch holds, data.max_tokens + 1 with EOS) in `precision` (default float32 unless mixed is set)."""
    m = cfg.model
    batch = batch or cfg.data.batch_sentences
    length = length or cfg.data.max_tokens + 1
    precision = precision or (cfg.train.precision if cfg.train.precision != "auto" else "float32")
    act = 2 if precision.startswith("mixed") else 4   # bytes of an activation
    d, f, h = m.d_model, m.d_ff, m.num_heads
    attn = 11 * d + 5 * h * length                    # per token, at 16 bits
    ffn = 3 * d + 4 * f
    enc_layer = attn + ffn + 2 * 2 * d
    dec_layer = 2 * attn + ffn + 3 * 2 * d
    tokens_bytes = (m.encoder_layers * enc_layer + m.decoder_layers * dec_layer) * act / 2 + 2 * d * act
    per_sentence_act = KEEP * length * tokens_bytes
    per_sentence_loss = length * vocab * (act + 3 * 4)  # the logits, then three float32 tensors of their size
    return Projection(batch, length, precision, states=16.0 * params_of(m, vocab),
                      activations=batch * per_sentence_act, loss=batch * per_sentence_loss,
                      per_sentence=per_sentence_act + per_sentence_loss)


@dataclass
class MicroBatches:
    count: int            # micro-batches an optimizer step is split into (the same sentences per step)
    projection: Projection  # one micro-batch's peak
    device_bytes: float | None
    reason: str

    @property
    def size(self) -> int:
        return self.projection.batch

    def line(self) -> str:
        dev = f" of a {self.device_bytes / GIB:.1f} GiB device" if self.device_bytes else ""
        return (f"{self.projection.line()}{dev}; {self.count} micro-batch(es) of {self.size} sentences a step "
                f"({self.reason})")

    def fields(self) -> dict:
        """For run.json: what the first log line says, as numbers."""
        return {"memory_projected_gib": round(self.projection.total / GIB, 2), "micro_batches": self.count,
                "micro_batch_sentences": self.size, "micro_batch_reason": self.reason,
                "device_memory_gib": round(self.device_bytes / GIB, 1) if self.device_bytes else None}


def fit(cfg, vocab: int, device_bytes: float | None, precision: str | None = None) -> MicroBatches:
    """How many micro-batches the per-device batch needs to fit `device_bytes` (less MARGIN).

    train.grad_accum = 0 (auto): the fewest that fit (1 where the device is unknown, e.g. a CPU's RAM is not
    budgeted); N >= 1: N, or ConfigError naming both figures when N micro-batches cannot fit."""
    batch, asked = cfg.data.batch_sentences, cfg.train.grad_accum
    whole = project(cfg, vocab, batch, precision=precision)
    if device_bytes is None:
        n = max(asked, 1)
        return MicroBatches(n, project(cfg, vocab, -(-batch // n), precision=precision), None,
                            "CPU: no GPU memory to fit")
    budget = device_bytes * (1 - MARGIN)
    if asked:
        one = project(cfg, vocab, -(-batch // asked), precision=precision)
        if one.total > budget:
            raise ConfigError(
                f"train.grad_accum={asked}: {batch} sentences per device in {asked} micro-batch(es) need "
                f"{one.total / GIB:.1f} GiB a step, over the device's {device_bytes / GIB:.1f} GiB less "
                f"{MARGIN:.0%}: raise train.grad_accum, or set it to 0 (auto), or lower data.batch_sentences")
        return MicroBatches(asked, one, device_bytes, "set in the config")
    if whole.states >= budget:
        raise ConfigError(f"the model's weights and Adam's slots alone need {whole.states / GIB:.1f} GiB, over the "
                          f"device's {device_bytes / GIB:.1f} GiB less {MARGIN:.0%}: a smaller model.d_model")
    for n in range(1, batch + 1):
        one = project(cfg, vocab, -(-batch // n), precision=precision)
        if one.total <= budget:
            size = -(-batch // n)
            step = (f"the same {batch} sentences a step" if n * size == batch else
                    f"{n * size} sentences a step, {n * size - batch} more than data.batch_sentences (equal "
                    "micro-batches)")
            why = ("the whole batch fits" if n == 1 else
                   f"{batch} sentences need {whole.total / GIB:.1f} GiB, over {budget / GIB:.1f} GiB usable: "
                   f"{n} micro-batches of {size}, {step}")
            return MicroBatches(n, one, device_bytes, f"auto: {why}")
    raise ConfigError(f"even one sentence per micro-batch needs more than the device's {device_bytes / GIB:.1f} GiB")
