"""Your own corpus (data.source=files): Moses-tokenized files in, detokenized prepared text, training and report."""
import contextlib
import io
import json

import pytest

pytest.importorskip("sacremoses", reason="the own-corpus path needs sacremoses: pip install sacremoses")
from sacremoses import MosesTokenizer

from nmtkit import cli, config, runs
from nmtkit.data import owncorpus, synthetic
from nmtkit.data.prepare import prepare
from nmtkit.errors import DataError

ESCAPES = ("&apos;", "&quot;", "&amp;", "&#124;", "&#91;", "&#93;")


def moses_corpus(d, n_train=2400, n_dev=40, seed=7, test=False):
    """The synthetic grammar's pairs (a learnable mapping), every third one quoted with a tag question, plus a few
    lines with |, [ ] and &, Moses-tokenized and escaped the way the homework's files are."""
    s = synthetic.generate(n_train, n_dev, n_dev if test else 0, seed=seed)
    tok = {"en": MosesTokenizer(lang="en"), "de": MosesTokenizer(lang="de")}
    d.mkdir(parents=True, exist_ok=True)
    for split, pairs in s.items():
        if not pairs:
            continue
        en, de = [], []
        for i, (a, b) in enumerate(pairs):
            if i % 3 == 0:
                a, b = f'He said "{a}" isn\'t it?', f'Er sagte "{b}" nicht wahr?'
            elif i % 50 == 1:
                a, b = f"[A|B] {a} & more", f"[A|B] {b} & mehr"
            en.append(tok["en"].tokenize(a, return_str=True, escape=True))
            de.append(tok["de"].tokenize(b, return_str=True, escape=True))
        (d / f"{split}.en").write_text("\n".join(en) + "\n", encoding="utf-8")
        (d / f"{split}.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    return d


def own_args(src, data, test=False):
    args = ["prepare", "--data", str(data), "--set", "data.vocab_size=500"]
    for split in ("train", "dev") + (("test",) if test else ()):
        args += [f"--{split}-src", str(src / f"{split}.en"), f"--{split}-tgt", str(src / f"{split}.de")]
    return args


def run_cli(args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(args)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The homework's situation: Moses-tokenized train and dev, no test split, prepared through the CLI."""
    root = tmp_path_factory.mktemp("own")
    src = moses_corpus(root / "src")
    rc, out, err = run_cli(own_args(src, root / "data"))
    assert rc == 0, err
    return src, root / "data", out


def own_cfg(src, **kw):
    return config.load("tiny", {"data.source": "files", "data.vocab_size": 300, "data.train_src": str(src / "train.en"),
                                "data.train_tgt": str(src / "train.de"), "data.dev_src": str(src / "dev.en"),
                                "data.dev_tgt": str(src / "dev.de"), **kw})


def test_detection_rule_and_detokenizer():
    tokenized = ["He said &quot; it isn &apos;t &#91; so &#93; &quot; , then left .", "A dog , a cat .",
                 "Where is it ?"] * 10
    plain = ['He said "it isn\'t [so]", then left.', "A dog, a cat.", "Where is it?"] * 10
    det = owncorpus.detect(tokenized)
    assert det.tokenized and det.split_share == pytest.approx(2 / 3) and det.escape_share == pytest.approx(1 / 3)
    assert "67%" in det.why() and "rule" in det.why()
    det = owncorpus.detect(plain)
    assert not det.tokenized and det.split_share == 0 and det.escape_share == 0
    assert owncorpus.detokenize(tokenized[:1], "en") == ['He said "it isn\'t [so]", then left.']


def test_cli_prepares_detokenized_text_and_uses_dev_as_test(prepared):
    src, data, out = prepared
    assert "&apos;" in (src / "train.en").read_text() and " ," in (src / "train.de").read_text()
    for name in ("train.en", "train.de", "dev.en", "dev.de", "test.en", "test.de"):
        text = (data / name).read_text(encoding="utf-8")
        assert not any(e in text for e in ESCAPES), name
        assert " ," not in text and " ." not in text, name
    assert "isn't it?" in (data / "train.en").read_text() and '"' in (data / "dev.de").read_text()
    assert "[A | B]" in (data / "train.en").read_text() and "& mehr" in (data / "train.de").read_text()
    # the joint BPE was learned on detokenized text: no piece of an escape for the model to emit
    vocab = [line.split("\t")[0] for line in (data / "spm.vocab").read_text(encoding="utf-8").splitlines()]
    assert not [p for p in vocab if "apos" in p or "quot" in p or "&#" in p], vocab
    # said what it detected and why, and that dev is the test set
    assert out.count("Moses-tokenized, detokenizing") == 4 and "rule: >= 20%" in out
    assert "no test split" in out and "test BLEU is measured on dev" in out
    assert (data / "test.en").read_bytes() == (data / "dev.en").read_bytes()
    assert (data / "test.de").read_bytes() == (data / "dev.de").read_bytes()
    man = json.loads((data / "manifest.json").read_text())["steps"]["corpus"]
    assert man["params"]["source"] == "files"
    assert man["params"]["inputs"]["train_src"]["path"] == str((src / "train.en").resolve())
    assert len(man["params"]["inputs"]["dev_tgt"]["sha256"]) == 64
    assert man["info"]["own"]["test_is_dev"] is True
    assert man["info"]["own"]["detokenized"]["train_tgt"]["tokenized"] is True
    stats = json.loads((data / "data_stats.json").read_text())
    assert stats["source"] == "files" and stats["files"]["train.en"]["lines"] == 2400 and stats["vocab_size"] == 500


def test_python_path_changed_input_redoes_and_forced_no_keeps_escapes(tmp_path, capsys):
    src = moses_corpus(tmp_path / "src", n_train=600, n_dev=20)
    cfg = own_cfg(src)
    prepare(cfg, data_dir=tmp_path / "data")
    capsys.readouterr()
    prepare(cfg, data_dir=tmp_path / "data")
    assert capsys.readouterr().out.count("already done") == 4
    with open(src / "train.de", "a", encoding="utf-8") as f, open(src / "train.en", "a", encoding="utf-8") as g:
        f.write("Ein neuer Satz .\n")
        g.write("A new sentence .\n")
    prepare(cfg, data_dir=tmp_path / "data")
    out = capsys.readouterr().out
    assert "already done" not in out and "601 training pairs" in out
    assert "A new sentence." in (tmp_path / "data" / "train.en").read_text()
    stats = prepare(cfg.with_overrides({"data.tokenized": "no"}), data_dir=tmp_path / "data")
    out = capsys.readouterr().out
    assert "data.tokenized=no" in out and "Moses-detokenized: nothing" in out
    assert "&apos;" in (tmp_path / "data" / "train.en").read_text() and stats.train_lines == 601


def test_given_test_split_and_untokenized_files(tmp_path):
    src = moses_corpus(tmp_path / "src", n_train=600, n_dev=20, test=True)
    plain = ["The dog sleeps.", "A cat, a dog."] * 10
    (src / "test.en").write_text("\n".join(plain) + "\n")
    rc, out, err = run_cli(own_args(src, tmp_path / "data", test=True) + ["--set", "data.vocab_size=300"])
    assert rc == 0, err
    assert "no test split" not in out and f"{(src / 'test.en').resolve()}: not tokenized, kept as is" in out
    assert (tmp_path / "data" / "test.en").read_text().splitlines() == plain
    assert "Wir" in (tmp_path / "data" / "test.de").read_text() or "Der" in (tmp_path / "data" / "test.de").read_text()


def test_misaligned_missing_and_clobbering_inputs_are_one_line_errors(tmp_path):
    src = moses_corpus(tmp_path / "src", n_train=300, n_dev=20)
    (src / "dev.de").write_text("".join(line + "\n" for line in (src / "dev.de").read_text().splitlines()[:-3]))
    rc, out, err = run_cli(own_args(src, tmp_path / "data"))
    assert rc == 1 and f"{src / 'dev.en'} (--dev-src) has 20 lines but {src / 'dev.de'} (--dev-tgt) has 17" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    with pytest.raises(DataError, match="dev.de"):
        prepare(own_cfg(src), data_dir=tmp_path / "data", progress=False)

    with pytest.raises(DataError, match=r"nowhere\.en: no such file; check --train-src"):
        prepare(own_cfg(src, **{"data.train_src": str(tmp_path / "nowhere.en")}), data_dir=tmp_path / "d2")
    (tmp_path / "empty.de").write_text("")
    with pytest.raises(DataError, match=r"empty\.de: the file is empty; check --dev-tgt"):
        prepare(own_cfg(src, **{"data.dev_tgt": str(tmp_path / "empty.de")}), data_dir=tmp_path / "d2")
    latin1 = (src / "train.en").read_bytes().replace(b"man", "Mann\u00e9".encode("latin1"), 1)
    (tmp_path / "latin1.en").write_bytes(latin1)
    with pytest.raises(DataError, match=r"latin1\.en: line \d+: not valid UTF-8"):
        prepare(own_cfg(src, **{"data.train_src": str(tmp_path / "latin1.en")}), data_dir=tmp_path / "d2")
    with pytest.raises(DataError, match="needs data.dev_tgt"):
        prepare(own_cfg(src, **{"data.dev_tgt": ""}), data_dir=tmp_path / "d2")
    with pytest.raises(DataError, match="both data.test_src and data.test_tgt"):
        prepare(own_cfg(src, **{"data.test_src": str(src / "dev.en")}), data_dir=tmp_path / "d2")
    # the corpus lives in the data directory: prepare would overwrite the user's train.en, so it refuses
    before = {p.name: p.read_bytes() for p in src.iterdir()}
    with pytest.raises(DataError, match="choose another data directory"):
        prepare(own_cfg(src), data_dir=src)
    assert {p.name: p.read_bytes() for p in src.iterdir() if p.name in before} == before

    rc, _, err = run_cli(["prepare", "--train-src", str(src / "train.en")])
    assert rc == 2 and "--data" in err


@pytest.mark.slow
def test_train_and_report_on_detokenized_text(prepared, tmp_path):
    _, data, _ = prepared
    run = tmp_path / "run"
    small = ["data.batch_sentences=32", "model.d_model=32", "model.d_ff=64", "model.num_heads=2",
             "model.encoder_layers=1", "model.decoder_layers=1", "train.steps=6", "train.log_every=2",
             "train.ckpt_every=0", "eval.every=0", "eval.beam_size=1", "eval.max_extra_len=4",
             "eval.dev_sentences=20", "eval.test_sentences=20", "monitor.enabled=false"]
    rc, out, err = run_cli(["train", "--data", str(data), "--logdir", str(run)] + [a for s in small
                                                                                  for a in ("--set", s)])
    assert rc == 0, err[-3000:]
    hyps = sorted((run / runs.TRANSLATIONS).glob("*.de"))
    assert any(p.name.startswith("test.") for p in hyps), hyps
    for p in hyps:
        text = p.read_text(encoding="utf-8")
        assert len(text.splitlines()) == 20 and not any(e in text for e in ESCAPES), p
    status = runs.read_status(run)
    sig = status.get("summary", {}).get("bleu_signature") or status.get("bleu_signature")
    assert sig and "tok:13a" in sig, status
    rc, out, err = run_cli(["report", "--run", str(run)])
    assert rc == 0, err[-3000:]
    assert (run / "report.md").is_file()
