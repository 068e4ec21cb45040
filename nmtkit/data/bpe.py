"""Joint English+German BPE with sentencepiece, and the Tokenizer every layer uses.

Special ids are fixed here and shared by the data files and the model: PAD=0, UNK=1, BOS=2, EOS=3.
"""
from __future__ import annotations

import io
import os
import random
import re
from pathlib import Path
from typing import Sequence

from nmtkit.errors import DataError
from nmtkit.files import atomic_write_bytes, atomic_write_text, sha256_file

PAD, UNK, BOS, EOS = 0, 1, 2, 3
MODEL = "spm.model"
VOCAB = "spm.vocab"


def sample_sentences(sides: Sequence[Sequence[str]], n: int, seed: int) -> list[str]:
    """n sentences drawn evenly from each side (all of them if there are fewer), in a seeded order."""
    rng = random.Random(seed)
    per_side = max(1, n // len(sides))
    out: list[str] = []
    for lines in sides:
        out.extend(lines if len(lines) <= per_side else rng.sample(list(lines), per_side))
    rng.shuffle(out)
    return out


def train_bpe(sentences: Sequence[str], out_dir: str | os.PathLike, vocab_size: int, *,
              character_coverage: float = 1.0, threads: int = 2) -> Path:
    """Learn a BPE model on `sentences`; writes spm.model and spm.vocab atomically into out_dir."""
    import sentencepiece as spm
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sentences = [s for s in sentences if s.strip()]
    if not sentences:
        raise DataError(f"{out_dir}: no sentences to learn the BPE from; check the training corpus")
    # The model is written to memory (model_writer) so that no temp path ends up inside it: the same corpus
    # and settings give a byte-identical spm.model wherever it is trained.
    buf = io.BytesIO()
    kwargs = dict(model_writer=buf, model_type="bpe", vocab_size=vocab_size,
                  pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS,
                  character_coverage=character_coverage, num_threads=threads,
                  input_sentence_size=0, shuffle_input_sentence=False, minloglevel=2,
                  max_sentence_length=16384)
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), **kwargs)
    except RuntimeError as e:
        # A small corpus cannot fill a large vocabulary; sentencepiece's own words say the largest it can hold.
        if "Vocabulary size" not in str(e) and "vocab_size" not in str(e):
            raise
        most = re.search(r"<= *(\d+)", str(e))
        holds = f"holds at most {int(most.group(1)):,} BPE pieces" if most else "holds too few distinct pieces"
        fix = f"--set data.vocab_size={int(most.group(1))}" if most else "--set data.vocab_size=<fewer>"
        raise DataError(f"{out_dir}: the training corpus ({len(sentences):,} sentences) {holds}, not data.vocab_size="
                        f"{vocab_size:,}: lower it ({fix}) or give a larger corpus") from None
    proto = buf.getvalue()
    sp = spm.SentencePieceProcessor(model_proto=proto)
    vocab = "".join(f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}\n" for i in range(sp.get_piece_size()))
    atomic_write_text(out_dir / VOCAB, vocab)
    atomic_write_bytes(out_dir / MODEL, proto)
    return out_dir / MODEL


class Tokenizer:
    """Text <-> BPE ids. encode() adds no BOS/EOS; decode() stops at EOS and drops PAD/BOS.

    Introduced in notebook 01_data_prep_bpe."""

    def __init__(self, model_path: str | os.PathLike):
        import sentencepiece as spm
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise DataError(f"{self.model_path}: no sentencepiece model; run `nmtkit prepare` (or prepare(cfg))")
        self.sp = spm.SentencePieceProcessor(model_file=str(self.model_path))
        ids = (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id())
        if ids != (PAD, UNK, BOS, EOS):
            raise DataError(f"{self.model_path}: special ids pad/unk/bos/eos are {ids}, nmtkit needs "
                            f"{(PAD, UNK, BOS, EOS)}; rerun prepare with force=True")

    @classmethod
    def from_data_dir(cls, data_dir: str | os.PathLike) -> "Tokenizer":
        return cls(Path(data_dir) / MODEL)

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    @property
    def sha256(self) -> str:
        return sha256_file(self.model_path)

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text, out_type=int)

    def encode_batch(self, texts: Sequence[str], threads: int = 2) -> list[list[int]]:
        return self.sp.encode(list(texts), out_type=int, num_threads=threads)

    def pieces(self, text: str) -> list[str]:
        return self.sp.encode(text, out_type=str)

    def decode(self, ids: Sequence[int]) -> str:
        out = []
        for i in (int(x) for x in ids):
            if i == EOS:
                break
            if i not in (PAD, BOS):
                out.append(i)
        return self.sp.decode(out)

    def decode_batch(self, batch) -> list[str]:
        return [self.decode(ids) for ids in batch]

    def __repr__(self) -> str:
        return f"Tokenizer({str(self.model_path)!r}, vocab_size={self.vocab_size})"
