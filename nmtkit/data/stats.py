"""What the prepared data looks like, in numbers: answers "How big was your training set (MB, lines)?"."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nmtkit.files import atomic_write_json, read_json

FILE = "data_stats.json"


@dataclass(repr=False)
class DataStats:
    source: str = ""                                    # "synthetic" or "wmt16"
    files: dict = field(default_factory=dict)           # "train.en" -> {"bytes": int, "lines": int}
    tokens: dict = field(default_factory=dict)          # "train" -> {"en_words", "de_words", "en_bpe", "de_bpe"}
    cleaning: dict = field(default_factory=dict)        # clean_pairs() counts for the training corpus
    vocab_size: int = 0
    spm_sha256: str = ""
    max_tokens: int = 0                                 # training examples longer than this are left out
    train_examples: int = 0                             # training pairs within max_tokens
    hist_bin: int = 4                                   # width of the length-histogram bins (BPE tokens)
    length_hist: dict = field(default_factory=dict)     # "en"/"de" -> counts of train lengths per bin
    max_positions: int = 0                              # the model's longest sequence when this was counted
    too_long: dict = field(default_factory=dict)        # "dev"/"test" -> sources longer than that (evaluation cuts)

    # --- the homework's questions -------------------------------------------------------------------
    @property
    def train_bytes(self) -> int:
        return sum(self.files.get(f"train.{lang}", {}).get("bytes", 0) for lang in ("en", "de"))

    @property
    def train_mb(self) -> float:
        return self.train_bytes / 1e6

    @property
    def train_lines(self) -> int:
        return self.files.get("train.en", {}).get("lines", 0)

    # --- display -------------------------------------------------------------------------------------
    def __repr__(self) -> str:  # what a notebook shows when a cell ends with nk.prepare(...)
        return (f"DataStats: {self.source or 'unknown'} corpus, {self.train_lines:,} training pairs, "
                f"{self.train_examples:,} within {self.max_tokens} BPE tokens, a {self.vocab_size:,}-piece BPE "
                f"vocabulary (.table() for every split)")

    def rows(self) -> list[dict]:
        rows = []
        for split in ("train", "dev", "test"):
            en, de = self.files.get(f"{split}.en", {}), self.files.get(f"{split}.de", {})
            tok = self.tokens.get(split, {})
            rows.append({"split": split, "lines": en.get("lines", 0),
                         "MB (en+de)": round((en.get("bytes", 0) + de.get("bytes", 0)) / 1e6, 2),
                         "en words": tok.get("en_words", 0), "de words": tok.get("de_words", 0),
                         "en BPE": tok.get("en_bpe", 0), "de BPE": tok.get("de_bpe", 0)})
        return rows

    def table(self) -> str:
        rows = self.rows()
        cols = list(rows[0])
        cells = [[str(r[c]) if isinstance(r[c], str) else f"{r[c]:,}" for c in cols] for r in rows]
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]

        def line(vals):
            return "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(vals, widths)))
        out = [line(cols), line(["-" * w for w in widths])] + [line(r) for r in cells]
        c = self.cleaning
        if c:
            out.append(f"cleaning (train): {c.get('input', 0):,} pairs in, {c.get('kept', 0):,} kept; dropped "
                       f"{c.get('empty', 0):,} empty, {c.get('too_short', 0):,} too short, "
                       f"{c.get('too_long', 0):,} too long, {c.get('ratio', 0):,} length ratio")
        out.append(f"joint BPE vocabulary: {self.vocab_size:,} pieces; "
                   f"training pairs <= {self.max_tokens} BPE tokens: {self.train_examples:,}")
        return "\n".join(out)

    def frame(self):
        """The table as a pandas DataFrame (for notebooks)."""
        import pandas as pd
        return pd.DataFrame(self.rows()).set_index("split")

    def hist_frame(self):
        """Length histogram of the training set (BPE tokens per sentence) as a DataFrame: bin start -> en, de."""
        import pandas as pd
        n = max((len(v) for v in self.length_hist.values()), default=0)
        return pd.DataFrame({lang: list(v) + [0] * (n - len(v)) for lang, v in self.length_hist.items()},
                            index=pd.Index([i * self.hist_bin for i in range(n)], name="length"))

    # --- files ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return asdict(self)

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        if path.is_dir():
            path = path / FILE
        return atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "DataStats":
        from nmtkit.errors import DataError
        path = Path(path)
        if path.is_dir():
            path = path / FILE
        if not path.exists():
            raise DataError(f"{path}: no such file; run `nmtkit prepare` (or prepare(cfg))")
        d = read_json(path, DataError, hint="rerun `nmtkit prepare` (or prepare(cfg))")
        if not isinstance(d, dict):
            raise DataError(f"{path}: expected a JSON object; rerun `nmtkit prepare` (or prepare(cfg))")
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})
