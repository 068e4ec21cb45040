"""Cleaning a parallel corpus in the spirit of Moses' clean-corpus-n.perl."""
from __future__ import annotations

from typing import Iterable


def clean_pairs(pairs: Iterable[tuple[str, str]], min_len: int = 1, max_len: int = 80,
                max_ratio: float = 3.0) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Keep pairs whose sides both have min_len..max_len whitespace tokens and a token ratio <= max_ratio.

    Whitespace is normalised (runs of spaces/tabs become one space) as clean-corpus-n does. Returns the kept
    pairs and the counts of what was dropped and why (each pair counted once, for the first reason).
    """
    kept: list[tuple[str, str]] = []
    counts = {"input": 0, "kept": 0, "empty": 0, "too_short": 0, "too_long": 0, "ratio": 0}
    for src, tgt in pairs:
        counts["input"] += 1
        s, t = src.split(), tgt.split()
        if not s or not t:
            counts["empty"] += 1
        elif len(s) < min_len or len(t) < min_len:
            counts["too_short"] += 1
        elif len(s) > max_len or len(t) > max_len:
            counts["too_long"] += 1
        elif max(len(s), len(t)) / min(len(s), len(t)) > max_ratio:
            counts["ratio"] += 1
        else:
            kept.append((" ".join(s), " ".join(t)))
    counts["kept"] = len(kept)
    return kept, counts
