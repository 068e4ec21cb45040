"""Evaluation never crashes on data: a dev line far longer than the model's positions is cut for decoding and
for the eval loss, and the eval line says how many were cut."""
import shutil

import pytest

from nmtkit.data.prepare import TEXT_FILES, Manifest, prepare
from nmtkit.training.loop import train

from conftest import small_config

pytestmark = pytest.mark.slow


def test_a_dev_line_of_140k_words_is_cut_and_training_finishes(nmt_data, tmp_path, capsys):
    d = tmp_path / "data"
    shutil.copytree(nmt_data, d)
    for lang in ("en", "de"):
        lines = (d / f"dev.{lang}").read_text().splitlines()
        words = lines[0].split()
        lines[0] = " ".join(words[i % len(words)] for i in range(140_000))
        (d / f"dev.{lang}").write_text("\n".join(lines) + "\n")
    man = Manifest(d)  # the corpus as given: re-encode it, keep the BPE model
    man.record("corpus", man.steps["corpus"]["params"], TEXT_FILES, info=man.steps["corpus"].get("info"))
    cfg = small_config(**{"train.steps": 2, "eval.every": 1, "eval.beam_size": 1})
    stats = prepare(cfg, data_dir=d, progress=True)
    assert stats.too_long == {"dev": 1, "test": 0} and stats.max_positions == cfg.model.max_positions
    assert "1 dev and 0 test sentences are longer than model.max_positions" in capsys.readouterr().out
    summary = train(cfg, tmp_path / "run", data_dir=d, progress=False)
    assert summary["status"] == "finished" and summary["step"] == 2
    evals = [x for x in capsys.readouterr().out.splitlines() if x.startswith("eval step")]
    assert len(evals) == 2 and all(x.endswith(f"| 1 cut to {cfg.model.max_positions} tokens") for x in evals), evals
