"""Question 9's three sizes from the seeds (the homework's real submissions reported 695, 744 and 830 MB for its
checkpoint), each read as bytes per parameter of the homework's model against the kit's measured checkpoint.
The verdict quotes it; notebook 05's Q9 cell does the same sums in the open. TensorFlow-free.
"""
from __future__ import annotations

from nmtkit.config import profile
from nmtkit.model.size import count_params

HOMEWORK = "wmt16-base"
# the size a seed reported (MB) -> what accounts for it beside the 12 B of fp32 weights and Adam's m and v
SEEDS_MB = {695: "the same 12 B a parameter read in MiB (2^20 bytes) and labelled MB",
            744: "12 B a parameter plus TF1's .meta graph file beside the .data (TensorFlow 2 writes none: Q8)",
            830: "more than 12 B a parameter: mixed precision keeps an fp16 copy beside each fp32 master weight "
                 "(2 B more, 14 B at most)"}


def homework_params() -> int:
    hw = profile(HOMEWORK)
    return count_params(hw.model, hw.data.vocab_size)


def reconciled(measured_bytes: int, params: int) -> dict:
    """The kit's measured bytes per parameter, the homework's checkpoint at that rate (MB and MiB), and each seed's
    size as bytes per parameter of the homework's model."""
    per_param, hw = measured_bytes / params, homework_params()
    return {"bytes_per_param": per_param, "homework_params": hw, "homework_mb": hw * per_param / 1e6,
            "homework_mib": hw * per_param / 2 ** 20,
            "seeds": {mb: {"bytes_per_param": mb * 1e6 / hw, "reading": why} for mb, why in SEEDS_MB.items()}}


def seeds_text(measured_bytes: int, params: int) -> str:
    r = reconciled(measured_bytes, params)
    seeds = "; ".join(f"{mb} MB is {s['bytes_per_param']:.1f} B a parameter, {s['reading']}"
                      for mb, s in r["seeds"].items())
    return (f"The kit's checkpoint measures {r['bytes_per_param']:.2f} B a parameter. At that rate the homework's "
            f"{r['homework_params']:,} parameters make {r['homework_mb']:.1f} MB, which is "
            f"{r['homework_mib']:.1f} MiB. The class's three sizes are all about 3x the weights: {seeds}. ")
