"""The SavedModel export: strings in, strings out, tokenised in-graph by sentencepiece itself (tensorflow-text):
the same ids as the kit's Tokenizer on words training never saw, the same translations as the Python translator,
and the same after a reload in a fresh process that imports only TensorFlow and tensorflow_text."""
import json
import subprocess
import sys
import unicodedata

import pytest

from nmtkit.data.pipeline import read_split
from nmtkit.errors import ExportError
from nmtkit.model.decode import Translator
from nmtkit.serving import MARKER, _check_out, export, latency, load, translate_in_fresh_process
from nmtkit.training.checkpoints import load_model

pytestmark = pytest.mark.slow

# Held-out sentences full of what the synthetic training text lacks: names, digits, accented letters, typos,
# and characters sentencepiece's NFKC normalisation rewrites (full-width letters, ligatures, circled digits).
HELD_OUT = [
    "The teacher met Zoë in Zürich on 2024-03-15.",
    "My friend bought 42 ﬁsh for 3.50 €.",
    "ＴＨＥ ｔｅａｃｈｅｒ has seen a small dog.",
    "Mr. O'Brien's café sold naïve crêpes.",
    "Why did Ångström write 1,000 stories?",
    "The xylophonist sees the queen at 7 p.m.",
    "Two mothers visited São Paulo and Kraków.",
    "The painter's ﬀ ﬃ ligatures: ① and Ⅻ.",
    "Tomorrow Björn will not sleep in Reykjavík.",
    "ｗｈｏ has built lamps without a queen？",
    "The teachr hass bougth a bleu dgo.",
    "Hello, World!  Nice   spaces\tand a tab.",
]


@pytest.fixture(scope="module")
def exported(trained_run, tmp_path_factory):
    run, _ = trained_run
    return export(run, tmp_path_factory.mktemp("export") / "saved_model")


@pytest.fixture(scope="module")
def translator(trained_run):
    r = load_model(trained_run[0])
    return Translator(r.model, r.tokenizer, r.config.eval.beam_size, r.config.eval.length_penalty,
                      r.config.eval.max_extra_len)


def test_saved_model_round_trip(exported, translator, nmt_data):
    src, _ = read_split(nmt_data, "test")
    src = src[:12]
    python = translator.translate(src)
    assert load(exported)(src) == python
    assert translate_in_fresh_process(exported, src) == python
    meta = json.loads((exported / "nmtkit_export.json").read_text())
    assert meta["checkpoint"].startswith("checkpoints/best/")
    assert meta["spm_sha256"] == translator.tokenizer.sha256  # the run's own spm.model
    lat = latency(load(exported), src, batch_size=4)
    assert lat["sentences"] == 12 and lat["ms_per_sentence"] > 0


def test_held_out_sentences_are_really_out_of_training(nmt_data, translator):
    """The exactness test below means something only if these words are new and NFKC has work to do."""
    train_words = set((nmt_data / "train.en").read_text(encoding="utf-8").split())
    assert all(set(s.split()) - train_words for s in HELD_OUT)
    rewritten = [s for s in HELD_OUT if unicodedata.normalize("NFKC", s) != s]
    assert len(rewritten) >= 4
    tok = translator.tokenizer
    assert tok.encode("ＴＨＥ ｔｅａｃｈｅｒ") == tok.encode("THE teacher")  # sentencepiece normalises full-width


def test_exported_ids_equal_the_tokenizer_on_unseen_words(exported, translator):
    """Pieces, NFKC normalisation, unknown characters (UNK=1) and the appended EOS, as training feeds the encoder."""
    ids = load(exported).ids(HELD_OUT)
    want = translator.encode(HELD_OUT)  # Tokenizer.encode (no BOS/EOS) + [EOS], cut to max_positions
    assert ids == want
    assert all(row[-1] == 3 and 3 not in row[:-1] and 0 not in row and 2 not in row for row in ids)
    assert any(1 in row for row in ids), "some characters are outside the 400-piece vocabulary: UNK"
    long = ["the dog " * 200]  # more pieces than the model has positions: cut to max_positions - 1, then EOS
    assert load(exported).ids(long) == translator.encode(long)
    assert len(translator.encode(long)[0]) == translator.model.cfg.max_positions


def test_exported_translations_equal_the_translator_on_unseen_words(exported, translator):
    python = translator.translate(HELD_OUT)
    assert load(exported)(HELD_OUT) == python
    assert translate_in_fresh_process(exported, HELD_OUT[:4]) == python[:4]


def test_export_module_imports_tensorflow_text_lazily():
    code = "import sys, nmtkit.serving; sys.exit('tensorflow_text' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_without_tensorflow_text_export_says_so_in_one_line(trained_run, tmp_path, monkeypatch):
    run, _ = trained_run
    monkeypatch.setitem(sys.modules, "tensorflow_text", None)  # import fails, as on a platform without the wheel
    with pytest.raises(ExportError, match=r"tensorflow-text.*pip install tensorflow-text==2\.18\.1") as e:
        export(run, tmp_path / "out")
    assert "\n" not in str(e.value)
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []


def test_export_needs_a_run(tmp_path):
    with pytest.raises(ExportError, match="config.json"):
        export(tmp_path)


def test_load_names_a_directory_without_a_saved_model(tmp_path):
    with pytest.raises(ExportError, match="no saved_model.pb"):
        load(tmp_path)


def _tree(path):
    return sorted((str(p.relative_to(path)), p.stat().st_size) for p in path.rglob("*") if p.is_file())


def test_export_refuses_a_foreign_directory_and_leaves_it_untouched(trained_run, tmp_path):
    run, _ = trained_run
    mine = tmp_path / "my_results"
    mine.mkdir()
    (mine / "notes.txt").write_text("a week of work")
    with pytest.raises(ExportError,
                       match=r"my_results: exists and is not a previous nmtkit export .*nothing was changed"):
        export(run, mine)
    assert _tree(mine) == [("notes.txt", 14)]
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ExportError, match="not a previous nmtkit export"):
        export(run, tmp_path / "a_file")
    empty = tmp_path / "empty"
    empty.mkdir()
    _check_out(run, empty)  # an empty directory holds nothing to lose: allowed


def test_export_refuses_the_run_directory_and_places_inside_it(trained_run):
    run, _ = trained_run
    before = _tree(run)
    assert any(name.startswith("checkpoints/") for name, _ in before)
    for out in (run, run / "checkpoints", run / "new_dir", run.parent):
        with pytest.raises(ExportError, match="run directory"):
            export(run, out)
    assert _tree(run) == before  # checkpoints, config and logs intact


def test_a_second_export_replaces_the_first(exported, trained_run):
    """Last in this file: it replaces the shared export (rename aside, rename into place, delete the old)."""
    run, _ = trained_run
    assert (exported / MARKER).is_file()
    (exported / "stale.txt").write_text("from the first export")
    out = export(run, exported, which="latest")
    assert out == exported and (out / MARKER).is_file() and not (out / "stale.txt").exists()
    assert json.loads((out / "nmtkit_export.json").read_text())["checkpoint"].startswith("checkpoints/ckpt")
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temp or old copy left beside it
    assert len(load(out)(["The cat sees the dog ."])) == 1
