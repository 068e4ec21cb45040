"""The SavedModel export: strings in, strings out, identical to the Python translator and after a reload in a
fresh process; unknown words do not break it."""
import json

import pytest

from nmtkit.data.pipeline import read_split
from nmtkit.export import ExportError, export, latency, load, translate_in_fresh_process
from nmtkit.model.decode import Translator
from nmtkit.train.checkpoints import load_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def exported(trained_run, nmt_data, tmp_path_factory):
    run, _ = trained_run
    return export(run, tmp_path_factory.mktemp("export") / "saved_model", data_dir=nmt_data)


def test_saved_model_round_trip(exported, trained_run, nmt_data):
    run, _ = trained_run
    src, _ = read_split(nmt_data, "test")
    src = src[:12]
    model, tok, cfg, _ = load_model(run)
    python = Translator(model, tok, cfg.eval.beam_size, cfg.eval.length_penalty, cfg.eval.max_extra_len).translate(src)
    in_process = load(exported)(src)
    assert in_process == python
    assert translate_in_fresh_process(exported, src) == python
    meta = json.loads((exported / "nmtkit_export.json").read_text())
    assert meta["words_in_table"] > 50 and meta["checkpoint"].startswith("checkpoints/best/")
    lat = latency(load(exported), src, batch_size=4)
    assert lat["sentences"] == 12 and lat["ms_per_sentence"] > 0


def test_unknown_words_fall_back_to_characters(exported):
    out = load(exported)(["The xylophonist sees Zürich.", ""])
    assert len(out) == 2 and all(isinstance(s, str) for s in out)


def test_export_needs_a_run(tmp_path):
    with pytest.raises(ExportError, match="config.json"):
        export(tmp_path)
