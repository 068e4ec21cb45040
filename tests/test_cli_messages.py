"""The CLI's last long messages, tried as a new user would: each is one line naming the file or option, the cause
and the fix, with a non-zero exit and nothing of the user's lost. Full disks are small tmpfs mounts (root only)."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import once_per_session

pytestmark = pytest.mark.long  # the long tier (tests/conftest.py): make test leaves it out

ROOT = os.geteuid() == 0
NEEDS_ROOT = pytest.mark.skipif(not ROOT, reason="needs root to mount a small tmpfs (a disk that fills up): run "
                                                 "the tests as root (`sudo make test`) or in CI")


def nmtkit(cwd, *args, timeout=300):
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", NMTKIT_PROFILE="tiny")
    return subprocess.run([sys.executable, "-m", "nmtkit.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def corpus(d: Path, train: list[tuple[str, str]]) -> list[str]:
    """Own-corpus files in d; the `nmtkit prepare` arguments that read them into d/data."""
    for name, lines in (("tr.en", [s for s, _ in train]), ("tr.de", [t for _, t in train]),
                        ("dv.en", ["a dog runs"]), ("dv.de", ["ein Hund rennt"])):
        (d / name).write_text("\n".join(lines) + "\n")
    return ["prepare", "--data", str(d / "data"), "--train-src", str(d / "tr.en"), "--train-tgt", str(d / "tr.de"),
            "--dev-src", str(d / "dv.en"), "--dev-tgt", str(d / "dv.de")]


def three_pairs(d):
    return corpus(d, [("a dog runs", "ein Hund rennt"), ("the cat sits", "die Katze sitzt"),
                      ("a bird flies", "ein Vogel fliegt")])


def one_long_pair(d):
    return corpus(d, [(" ".join(["word"] * 100), " ".join(["Wort"] * 100))])


CASES = {  # name -> (make the input in tmp dir d -> argv, words the one line holds, stdout must be empty too)
    "train --max-hours abc": (lambda d: ["train", "--max-hours", "abc"],
                              ["nmtkit train: argument --max-hours", "invalid float value: 'abc'", "give a number",
                               "nmtkit train --help"], True),
    "train --np x": (lambda d: ["train", "--np", "x"], ["--np", "invalid int value", "a whole number"], True),
    "an unknown command": (lambda d: ["trian"], ["invalid choice: 'trian'", "'train'", "nmtkit --help"], True),
    "a corpus too small for its vocabulary": (three_pairs, ["6 sentences", "holds at most", "data.vocab_size=1,000",
                                                            "lower it (--set data.vocab_size=", "larger corpus"],
                                              False),
    "a corpus whose only pair is over data.max_len": (
        one_long_pair, ["tr.en", "tr.de", "dropped all 1 training pair(s)", "1 for a side over data.max_len=80 words",
                        "--set data.max_len="], True),
}


def snapshot(d: Path) -> dict:
    return {p.relative_to(d): hashlib.sha256(p.read_bytes()).hexdigest() for p in d.rglob("*") if p.is_file()}


def one_line(r, words, alone: bool) -> str:
    err = r.stderr.strip().splitlines()
    assert r.returncode != 0, r.stdout[-1500:]
    assert len(err) == 1 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-2000:]
    assert not (alone and r.stdout.strip()), r.stdout[-1500:]
    for w in words:
        assert w in err[0], (w, err[0])
    assert "INTERNAL" not in err[0] and "?:" not in err[0], err[0]  # no library's internals, no unnamed path
    return err[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_long_message_is_now_one_line(tmp_path, case):
    make, words, alone = CASES[case]
    argv = make(tmp_path)
    before = snapshot(tmp_path)
    one_line(nmtkit(tmp_path, *argv), words, alone)
    after = snapshot(tmp_path)
    assert {p: h for p, h in after.items() if p in before} == before  # nothing the user had is gone or changed


def mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)


def fill(mnt: Path, leave: int) -> None:
    """Fill the tmpfs at mnt but `leave` bytes, with a file of the test's own."""
    free = shutil.disk_usage(mnt).free
    with open(mnt / "filler", "wb") as f:
        try:
            f.write(b"\0" * max(free - leave, 0))
        except OSError:
            pass


@NEEDS_ROOT
@pytest.mark.parametrize("size", ["64k", "400k"])  # full while copying the corpus; while writing the BPE model
def test_a_full_disk_during_prepare_names_the_file(tmp_path, size):
    argv = corpus(tmp_path, [(f"a dog {w} runs", f"ein Hund {w} rennt") for w in range(3000)])
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, size)
    try:
        argv[argv.index("--data") + 1] = str(mnt / "data")
        line = one_line(nmtkit(tmp_path, *argv, "--set", "data.vocab_size=64"), ["No space left on device",
                                                                                 "free disk space"], False)
        assert line.startswith(f"nmtkit: {mnt / 'data'}/"), line  # the file it was writing
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


SMALL = ["data.vocab_size=400", "model.d_model=64", "model.d_ff=128", "model.num_heads=4", "model.encoder_layers=1",
         "model.decoder_layers=1", "train.log_every=2", "train.ckpt_every=2", "eval.every=0", "eval.dev_sentences=5",
         "eval.test_sentences=5", "eval.beam_size=1", "monitor.enabled=false"]


def train_args(data, run, steps):
    return ["train", "--data", str(data), "--logdir", str(run),
            *[a for s in SMALL + [f"train.steps={steps}"] for a in ("--set", s)]]


@NEEDS_ROOT
@pytest.mark.slow
@pytest.mark.parametrize("leave", [0, 300_000])  # no byte for the lock; room for the lock but not a checkpoint
def test_resuming_on_a_full_disk_is_one_line_and_keeps_the_run(tmp_path_factory, tmp_path, nmt_data, leave):
    made = once_per_session(tmp_path_factory, "run-of-4-steps",
                            lambda d: nmtkit(d, *train_args(nmt_data, d / "run", 4)).check_returncode())
    mnt = tmp_path / "mnt"
    mount_tmpfs(mnt, "16m")
    try:
        shutil.copytree(made / "run", mnt / "run")
        fill(mnt, leave)
        before = snapshot(mnt / "run")
        line = one_line(nmtkit(tmp_path, *train_args(nmt_data, mnt / "run", 8)), [str(mnt / "run")], False)
        assert "No space left on device" in line or "not enough free disk" in line, line
        assert "free" in line and ("again" in line or "resume" in line), line
        after = snapshot(mnt / "run")
        # the model's checkpoints as they were (the input pipeline's position, checkpoints/data/, is read by step)
        kept = [p for p in before if p.parts[0] == "checkpoints" and p.parts[1] != "data"]
        assert kept and all(after.get(p) == before[p] for p in kept), [str(p) for p in kept
                                                                       if after.get(p) != before[p]]
        assert json.loads((mnt / "run" / "run.json").read_text())["status"] != "running"
        (mnt / "filler").unlink()  # the space freed, as the line says: the same command resumes and finishes
        r = nmtkit(tmp_path, *train_args(nmt_data, mnt / "run", 8))
        assert r.returncode == 0 and "resuming at step 4" in r.stdout, r.stdout[-1500:] + r.stderr[-1500:]
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
