"""The SavedModel export: strings in, strings out, identical to the Python translator and after a reload in a
fresh process; unknown words do not break it."""
import json

import pytest

from nmtkit.data.pipeline import read_split
from nmtkit.export import MARKER, ExportError, _check_out, export, latency, load, translate_in_fresh_process
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
    model, tok, cfg, _ = (r := load_model(run)).model, r.tokenizer, r.config, r.checkpoint
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


def _tree(path):
    return sorted((str(p.relative_to(path)), p.stat().st_size) for p in path.rglob("*") if p.is_file())


def test_export_refuses_a_foreign_directory_and_leaves_it_untouched(trained_run, nmt_data, tmp_path):
    run, _ = trained_run
    mine = tmp_path / "my_results"
    mine.mkdir()
    (mine / "notes.txt").write_text("a week of work")
    with pytest.raises(ExportError, match=r"my_results: exists and is not a previous nmtkit export .*nothing was changed"):
        export(run, mine, data_dir=nmt_data)
    assert _tree(mine) == [("notes.txt", 14)]
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ExportError, match="not a previous nmtkit export"):
        export(run, tmp_path / "a_file", data_dir=nmt_data)
    empty = tmp_path / "empty"
    empty.mkdir()
    _check_out(run, empty)  # an empty directory holds nothing to lose: allowed


def test_export_refuses_the_run_directory_and_places_inside_it(trained_run, nmt_data):
    run, _ = trained_run
    before = _tree(run)
    assert any(name.startswith("checkpoints/") for name, _ in before)
    for out in (run, run / "checkpoints", run / "new_dir", run.parent):
        with pytest.raises(ExportError, match="run directory"):
            export(run, out, data_dir=nmt_data)
    assert _tree(run) == before  # checkpoints, config and logs intact


def test_a_second_export_replaces_the_first(exported, trained_run, nmt_data):
    """Last in this file: it replaces the shared export (rename aside, rename into place, delete the old)."""
    run, _ = trained_run
    assert (exported / MARKER).is_file()
    (exported / "stale.txt").write_text("from the first export")
    out = export(run, exported, data_dir=nmt_data, max_words=40)
    assert out == exported and (out / MARKER).is_file() and not (out / "stale.txt").exists()
    assert json.loads((out / "nmtkit_export.json").read_text())["words_in_table"] == 40
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temp or old copy left beside it
    assert len(load(out)(["The cat sees the dog ."])) == 1
