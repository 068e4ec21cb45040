"""Bad input, tried as a new user would: one line (at most 3) naming the path or key and its real cause, exit
status non-zero, never "internal error", and nothing lost."""
import errno
import json
import os

import pytest
from bad_input import assert_one_line

from nmtkit import cli


def _corpus_that_cleans_to_nothing(d):
    (d / "tr.en").write_text("word " * 200_000 + "\n")  # one ~1 MB line against a one-word line
    (d / "tr.de").write_text("Wort\n")
    (d / "dv.en").write_text("a dog\n")
    (d / "dv.de").write_text("ein Hund\n")
    return ["prepare", "--profile", "tiny", "--data", str(d / "data"), "--train-src", str(d / "tr.en"),
            "--train-tgt", str(d / "tr.de"), "--dev-src", str(d / "dv.en"), "--dev-tgt", str(d / "dv.de")]


CASES = {  # name -> (make the input in tmp dir d -> argv, words the one line must hold)
    "prepare --data FILE": (lambda d: (d / "f").write_text("x") and ["prepare", "--profile", "tiny", "--data",
                                                                     str(d / "f")],
                            ["a file where the data directory belongs"]),
    "prepare --data FILE/sub": (lambda d: (d / "f").write_text("x") and ["prepare", "--profile", "tiny", "--data",
                                                                          str(d / "f" / "sub")],
                                ["a file where a directory belongs"]),
    "report --run FILE": (lambda d: (d / "f").write_text("x") and ["report", "--run", str(d / "f")], ["f"]),
    "train --logdir FILE": (lambda d: (d / "f").write_text("x") and ["train", "--profile", "tiny", "--logdir",
                                                                     str(d / "f")], ["f"]),
    "a corpus that cleans to nothing": (_corpus_that_cleans_to_nothing,
                                        ["cleaning dropped all 1 training pair(s)", "1 for a side over data.max_len"]),
    "a NIC that does not exist": (lambda d: ["train", "--profile", "tiny", "--np", "2", "--data", str(d / "data"),
                                             "--logdir", str(d / "run"), "--set", "cluster.iface=nope0"],
                                  ["cluster.iface='nope0'", "no network interface of that name"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_gets_one_line_naming_its_real_cause(tmp_path, case):
    assert_one_line(tmp_path, *CASES[case])


def test_a_full_disk_names_the_file_and_the_fix(tmp_path, monkeypatch, capsys):
    import nmtkit.files as files
    real = files.atomic_write_bytes

    def full(path, data):
        if str(path).endswith("spm.model") or "train" in str(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, data)
    monkeypatch.setattr(files, "atomic_write_bytes", full)
    rc = cli.main(["prepare", "--profile", "tiny", "--data", str(tmp_path / "data")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and "internal error" not in err[0], err
    assert "No space left on device" in err[0] and "free disk space" in err[0] and str(tmp_path / "data") in err[0]


def test_the_clean_counts_say_why_each_pair_went(tmp_path):
    from nmtkit import config
    from nmtkit.data.clean import clean_pairs
    from nmtkit.data.owncorpus import dropped_all
    dc = config.profile("tiny").data
    _, counts = clean_pairs([("a " * 500, "b"), ("", "x"), ("a b c d e f g h", "a")], dc.min_len, dc.max_len,
                            dc.max_len_ratio)
    line = dropped_all({"train_src": "tr.en", "train_tgt": "tr.de"}, counts, dc)
    assert "dropped all 3" in line and "1 for an empty side" in line and "1 for a side over" in line
    assert "1 for a length ratio" in line and "\n" not in line
    json.dumps(counts)
