"""Model FLOPs of a training step, the count behind the MFU a run logs: the log line and run.json's summary
(TensorFlow-free).

    flops = train_flops(cfg.model, vocab, src_tokens, tgt_tokens, src_len, tgt_len)
"""
from __future__ import annotations

from nmtkit.config import ModelConfig

SKIP_STEPS = 3  # each rank's first steps trace the graph: no guide to the steady state (nmtkit.analysis skips them too)


def train_flops(cfg: ModelConfig, vocab_size: int, src_tokens: float, tgt_tokens: float,
                src_len: float = 32.0, tgt_len: float = 32.0) -> float:
    """Model FLOPs of one training step of this model on a batch of these tokens (forward + backward = 3x
    forward), for the MFU the run logs: the matmuls' and the attention's; embedding lookups and element-wise ops are
    not counted (as in PaLM's and nanoGPT's MFU)."""
    d, f = cfg.d_model, cfg.d_ff
    enc_layer = 4 * d * d + 2 * d * f
    dec_layer = 8 * d * d + 2 * d * f
    fwd = 2 * (cfg.encoder_layers * enc_layer * src_tokens + cfg.decoder_layers * dec_layer * tgt_tokens
               + vocab_size * d * tgt_tokens)
    # attention: QK^T and AV, 2 matmuls of 2*len*d FLOPs per token per attention block
    fwd += 2 * 2 * d * (cfg.encoder_layers * src_tokens * src_len
                        + cfg.decoder_layers * tgt_tokens * (tgt_len + src_len))
    return 3.0 * fwd
