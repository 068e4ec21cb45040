"""prepare(): the steps, the manifest (skip when done, redo when broken), BPE round trip, stats, bad input."""
import json
import os

import numpy as np
import pytest

from nmtkit import config
from nmtkit.data import bpe
from nmtkit.data.clean import clean_pairs
from nmtkit.data.pipeline import load_encoded, make_dataset, read_split
from nmtkit.data.prepare import prepare
from nmtkit.data.stats import DataStats
from nmtkit.data.text import read_lines, read_parallel
from nmtkit.errors import DataError

SMALL = {"data.train_size": 2000, "data.dev_size": 100, "data.test_size": 100, "data.vocab_size": 400,
         "data.bpe_sample": 4000}


@pytest.fixture
def cfg():
    return config.load("tiny", SMALL)


@pytest.fixture
def prepared(tmp_path, cfg):
    d = tmp_path / "data"
    stats = prepare(cfg, data_dir=d, progress=False)
    return d, stats


def test_prepare_writes_the_documented_layout(prepared, cfg):
    d, stats = prepared
    for name in ("train.en", "train.de", "dev.en", "dev.de", "test.en", "test.de", "spm.model", "spm.vocab",
                 "data_stats.json", "manifest.json", "encoded.json"):
        assert (d / name).is_file(), name
    assert stats.train_lines == 2000
    assert stats.files["train.en"]["bytes"] == (d / "train.en").stat().st_size
    assert stats.train_mb == pytest.approx(((d / "train.en").stat().st_size + (d / "train.de").stat().st_size) / 1e6)
    assert stats.vocab_size == 400
    assert stats.cleaning["input"] == 2000 and stats.cleaning["kept"] == 2000
    assert sum(stats.length_hist["en"]) == 2000
    assert stats.tokens["train"]["en_bpe"] >= stats.tokens["train"]["en_words"]
    table = stats.table()
    assert "train" in table and "2,000" in table
    assert DataStats.load(d / "data_stats.json") == stats
    assert list(stats.frame().index) == ["train", "dev", "test"]
    assert "2,000 training pairs" in repr(stats)  # a readable line where a notebook cell shows it


def test_rerun_skips_and_force_redoes(prepared, cfg, capsys):
    d, _ = prepared
    mtime = (d / "spm.model").stat().st_mtime_ns
    prepare(cfg, data_dir=d)
    out = capsys.readouterr().out
    assert out.count("already done") == 4
    assert (d / "spm.model").stat().st_mtime_ns == mtime
    prepare(cfg, data_dir=d, force=True)
    out = capsys.readouterr().out
    assert "already done" not in out and out.count("prepare [") == 4


def test_outputs_are_deterministic(prepared, cfg, tmp_path):
    d, _ = prepared
    d2 = tmp_path / "again"
    prepare(cfg, data_dir=d2, progress=False)
    for name in ("train.en", "train.de", "test.de", "spm.model", "train.de.ids.npy"):
        assert (d / name).read_bytes() == (d2 / name).read_bytes(), name


def test_changed_setting_redoes_the_step_and_those_after(prepared, cfg, capsys):
    d, _ = prepared
    cfg2 = cfg.with_overrides({"data.vocab_size": 350})
    stats = prepare(cfg2, data_dir=d)
    out = capsys.readouterr().out
    assert "[1/4] corpus: already done" in out
    assert "[2/4] bpe: already done" not in out and "[3/4] encode: already done" not in out
    assert stats.vocab_size == 350 and bpe.Tokenizer.from_data_dir(d).vocab_size == 350


def test_bpe_round_trip_and_special_ids(prepared):
    d, _ = prepared
    tok = bpe.Tokenizer.from_data_dir(d)
    assert (bpe.PAD, bpe.UNK, bpe.BOS, bpe.EOS) == (0, 1, 2, 3)
    assert tok.sp.id_to_piece(0) == "<pad>" and tok.sp.id_to_piece(3) == "</s>"
    src, ref = read_split(d, "test")
    for text in src[:50] + ref[:50]:
        ids = tok.encode(text)
        assert ids and min(ids) > 3
        assert tok.decode(ids) == text
        assert tok.decode([bpe.BOS] + ids + [bpe.EOS, 7, 8, bpe.PAD]) == text  # stops at EOS, drops BOS/PAD
    assert tok.decode_batch(np.array([[bpe.BOS] + tok.encode(src[0]) + [bpe.EOS]])) == [src[0]]


def test_encoded_ids_match_the_text(prepared):
    d, _ = prepared
    tok = bpe.Tokenizer.from_data_dir(d)
    enc = load_encoded(d, "dev")
    src, ref = read_split(d, "dev")
    ids, off = enc["de"]
    assert len(off) == len(ref) + 1
    assert tok.decode(ids[off[5]:off[6]]) == ref[5]


def test_cleaning_counts():
    pairs = [("a b", "x y"), ("", "x"), ("a", ""), ("a " * 81, "x"), ("a b c d", "x"), ("one", "eins"),
             ("a  b\t c", "x y z")]
    kept, counts = clean_pairs(pairs, min_len=1, max_len=80, max_ratio=3.0)
    assert counts == {"input": 7, "kept": 3, "empty": 2, "too_short": 0, "too_long": 1, "ratio": 1}
    assert kept[2] == ("a b c", "x y z")  # whitespace normalised
    _, counts = clean_pairs([("a", "x")], min_len=2)
    assert counts["too_short"] == 1


# --- bad input ---------------------------------------------------------------------------------------

def test_line_count_mismatch_names_both_files(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\nthree\n")
    (tmp_path / "a.de").write_text("eins\nzwei\n")
    with pytest.raises(DataError) as e:
        read_parallel(tmp_path / "a.en", tmp_path / "a.de")
    msg = str(e.value)
    assert "a.en" in msg and "a.de" in msg and "3" in msg and "2" in msg


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DataError, match="nope.en"):
        read_lines(tmp_path / "nope.en")
    (tmp_path / "empty.de").write_bytes(b"")
    with pytest.raises(DataError, match="empty.de"):
        read_lines(tmp_path / "empty.de")
    with pytest.raises(DataError, match="test.en"):
        read_split(tmp_path, "test")


def test_undecodable_utf8_names_file_and_line(tmp_path):
    (tmp_path / "bad.de").write_bytes("gut\nauch gut\n".encode() + b"schlecht \xff\xfe\n")
    with pytest.raises(DataError, match=r"bad.de: line 3"):
        read_lines(tmp_path / "bad.de")


def test_crlf_is_normalised_and_nul_bytes_refused(tmp_path):
    (tmp_path / "dev.en").write_bytes(b"Hello world .\r\nSecond line\r\nstray\rreturn\r\n")
    assert read_lines(tmp_path / "dev.en") == ["Hello world .", "Second line", "stray return"]
    (tmp_path / "nul.de").write_bytes(b"eins\nzwei\ndr\x00ei\n")
    with pytest.raises(DataError) as e:
        read_lines(tmp_path / "nul.de")
    assert str(e.value).startswith(f"{tmp_path / 'nul.de'}: line 3: contains a NUL byte") and "\n" not in str(e.value)
    (tmp_path / "utf16.en").write_bytes("Hello\n".encode("utf-16-le"))  # UTF-16 text is valid UTF-8 with NULs
    with pytest.raises(DataError, match=r"utf16.en: line 1: contains a NUL byte .*UTF-16"):
        read_lines(tmp_path / "utf16.en")


def test_data_directory_without_manifest_is_one_clear_line(prepared):
    d, _ = prepared
    (d / "manifest.json").rename(d / "manifest.json.moved")
    with pytest.raises(DataError) as e:
        load_encoded(d, "train")
    msg = str(e.value)
    assert msg.startswith(f"{d / 'manifest.json'}: no such file, so {d} is not a prepared data directory")
    assert "nmtkit prepare" in msg and "\n" not in msg


def test_spm_model_from_another_run_is_refused(prepared, cfg):
    d, _ = prepared
    src, ref = read_split(d, "train")
    bpe.train_bpe(src + ref, d, 300)  # a different model over the encoded data
    with pytest.raises(DataError, match="different sentencepiece model"):
        make_dataset(d, "train", cfg.data)
    prepare(cfg, data_dir=d, progress=False)  # the rerun notices and redoes bpe, encode, stats
    assert load_encoded(d, "train")["en"][0].size > 0


def test_half_written_directory_is_detected_and_repaired(prepared, cfg, capsys):
    d, _ = prepared
    good = (d / "train.en.ids.npy").read_bytes()
    # A crash mid-write: a truncated array, a temp file, and a manifest that lost its last steps.
    (d / "train.en.ids.npy").write_bytes(good[: len(good) // 2])
    (d / ".train.en.ids.npy.tmp").write_bytes(b"junk")
    with pytest.raises(DataError):
        load_encoded(d, "train")
    prepare(cfg, data_dir=d)
    out = capsys.readouterr().out
    assert "[3/4] encode: already done" not in out and "[2/4] bpe: already done" in out
    assert (d / "train.en.ids.npy").read_bytes() == good
    assert not list(d.glob(".*.tmp"))
    # A manifest torn by a crash: everything is redone, nothing is trusted.
    (d / "manifest.json").write_text('{"version": 1, "steps": {"corp')
    with pytest.raises(DataError, match="not completely prepared"):
        load_encoded(d, "train")
    prepare(cfg, data_dir=d)
    assert "already done" not in capsys.readouterr().out
    assert load_encoded(d, "train")["en"][0].size > 0


def test_crash_inside_a_step_leaves_it_undone(prepared, cfg, monkeypatch):
    d, _ = prepared
    from nmtkit.data import prepare as prep_mod

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(prep_mod, "_step_bpe", boom)
    with pytest.raises(KeyboardInterrupt):
        prepare(cfg, data_dir=d, force=True, progress=False)
    steps = json.loads((d / "manifest.json").read_text())["steps"]
    assert "corpus" in steps and "bpe" not in steps and "encode" not in steps
    with pytest.raises(DataError):
        make_dataset(d, "train", cfg.data)
    monkeypatch.undo()
    prepare(cfg, data_dir=d, progress=False)
    assert make_dataset(d, "dev", cfg.data, repeat=False) is not None
    assert not any(p.name.startswith(".") for p in d.iterdir() if p.is_file())


def test_unknown_source(tmp_path, cfg):
    from nmtkit.errors import ConfigError, DataError
    with pytest.raises(ConfigError, match="data.source='nope': choose one of synthetic, wmt16"):
        cfg.with_overrides({"data.source": "nope"})
    bad = cfg.with_overrides({})
    bad.data.source = "nope"  # set by hand, past the config's check
    with pytest.raises(DataError, match="data.source"):
        prepare(bad, data_dir=tmp_path, progress=False)
    assert os.listdir(tmp_path) == []  # refused before writing anything


def _prepare_quietly(d, overrides):
    prepare(config.load("tiny", overrides), data_dir=d, progress=True)


def test_two_processes_preparing_one_directory_take_turns(tmp_path, capfd):
    # notebooks graded side by side (and two kernels of one student) call prepare() on one data directory at once:
    # the second must wait and find the steps done, not remove the first's temp files halfway
    import multiprocessing as mp
    d = tmp_path / "data"
    procs = [mp.get_context("spawn").Process(target=_prepare_quietly, args=(d, SMALL)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    out = capfd.readouterr().out
    assert out.count("already done") == 4, out  # one process made each step, the other found it made
    assert not [p.name for p in d.iterdir() if p.name.startswith(".")]  # no lock file or temp file left
    assert prepare(config.load("tiny", SMALL), data_dir=d, progress=False).train_lines == 2000
