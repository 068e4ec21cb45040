"""What float16 does to a model's own gradients (nmtkit.training.fp16, notebook 02's mixed-precision section): the
loss scale moves small gradients out of float16's subnormal range, too large a scale overflows, and a mixed_float16
model keeps float32 weights and hands float32 gradients to the allreduce."""
import numpy as np
import pytest

from nmtkit.data.bpe import Tokenizer
from nmtkit.data.pipeline import make_dataset
from nmtkit.model.transformer import build
from nmtkit.training.checkpoints import Restored
from nmtkit.training.fp16 import FP16_MAX, FP16_MIN_NORMAL

from conftest import small_config


@pytest.fixture(scope="module")
def restored_and_batch(nmt_data):
    cfg = small_config()
    tok = Tokenizer.from_data_dir(nmt_data)
    batch = next(iter(make_dataset(nmt_data, "train", cfg.data, seed=0)))
    return Restored(build(cfg.model, tok.vocab_size), tok, cfg, ""), batch


def test_the_loss_scale_lifts_small_gradients_out_of_the_subnormal_range(restored_and_batch):
    best, batch = restored_and_batch
    table = best.fp16_gradients(batch)
    raw, scaled = table.iloc[0], table.iloc[1]
    assert "32,768" in table.index[1]
    assert raw["subnormal (%)"] > 1.0, "a fresh model's gradients have values below 2^-14"
    assert scaled["subnormal (%)"] < raw["subnormal (%)"] / 10
    assert scaled["lose digits (%)"] < raw["lose digits (%)"] and scaled["become 0 (%)"] <= raw["become 0 (%)"]
    assert scaled["largest"] == pytest.approx(raw["largest"] * 2**15)
    assert raw["largest"] < FP16_MAX and FP16_MIN_NORMAL == 2.0**-14
    assert (table.drop(columns="largest") >= 0).all().all() and (table.drop(columns="largest") <= 100).all().all()


def test_too_large_a_scale_overflows(restored_and_batch):
    best, batch = restored_and_batch
    scale = 4 * FP16_MAX / best.fp16_gradients(batch).iloc[0]["largest"]  # the largest value lands on 4 x the max
    over = best.fp16_gradients(batch, scale=scale).iloc[1]
    assert 0 < over["overflow (%)"] < 100 and np.isfinite(over["largest"])


def test_mixed_float16_keeps_float32_weights_and_sends_float32_gradients(restored_and_batch):
    best, batch = restored_and_batch
    assert best.mixed_dtypes(batch) == {"weights": ["float32"], "compute (matmuls, activations)": "float16",
                                        "gradients (what the allreduce gets)": ["float32"]}


def test_notebook_02_shows_the_loss_scale_before_its_code_and_leaves_q8_q9_to_notebook_05():
    """The loss scale's displayed equation, its symbols named, comes before the cells that scale gradients and plot
    the run's trace; the checkpoint section lists files without stating the homework's Q8/Q9 answers."""
    import json
    import re
    from pathlib import Path
    nb = Path(__file__).resolve().parents[1] / "notebooks" / "02_single_gpu_baseline.ipynb"
    cells = json.loads(nb.read_text())["cells"]
    src = ["".join(c["source"]) for c in cells]
    kinds = [c["cell_type"] for c in cells]
    [eq] = [i for i, s in enumerate(src) if kinds[i] == "markdown" and re.search(r"\$\$.*\\nabla_w.*\$\$", s)]
    assert "where $L$" in src[eq].split("$$")[-1]
    uses = [i for i, s in enumerate(src) if kinds[i] == "code" and ("fp16_gradients(" in s or "loss_scale" in s)]
    assert len(uses) >= 2 and eq < min(uses)  # the gradients table, the run, its trace and figure
    prose = " ".join(" ".join(s.split()) for k, s in zip(kinds, src) if k == "markdown")
    assert "train.compression=fp16" in prose and "fp32 master" in prose
    for answer in ("three times", "moving averages", "data file / weights", "ckpt-N.index", "weights alone"):
        assert not any(answer in s for s in src), f"notebook 02 states {answer!r}: Q8/Q9 ask it in notebook 05"
