"""The `nmtkit` command end to end, as someone running the homework under nohup would use it."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

SMALL = ["data.train_size=2000", "data.dev_size=20", "data.test_size=20", "data.vocab_size=300",
         "data.batch_sentences=16", "model.d_model=32", "model.d_ff=64", "model.num_heads=2",
         "model.encoder_layers=1", "model.decoder_layers=1", "train.log_every=2", "train.ckpt_every=0",
         "eval.every=0", "eval.max_extra_len=4", "monitor.interval=0.2"]


def nmtkit(*args, timeout=300):
    r = subprocess.run([sys.executable, "-m", "nmtkit.cli", *args], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "NMTKIT_PROFILE": "tiny"})
    return r


def sets(items):
    return [a for item in items for a in ("--set", item)]


def test_prepare_train_report_export(tmp_path):
    data, run = tmp_path / "data", tmp_path / "run"
    r = nmtkit("prepare", "--data", str(data), *sets(SMALL))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "lines" in r.stdout and (data / "spm.model").exists() and (data / "data_stats.json").exists()

    r = nmtkit("train", "--data", str(data), "--logdir", str(run), *sets(SMALL + ["train.steps=6"]))
    assert r.returncode == 0, r.stderr[-3000:]
    # nanoGPT-style log line: step, loss, lr, ms/step, tokens/s, MFU
    line = next(printed for printed in r.stdout.splitlines() if printed.startswith("step 6/6"))
    for part in ("loss", "lr", "ms/step", "tok/s", "MFU"):
        assert part in line, line
    assert "test BLEU" in r.stdout and "run finished at step 6" in r.stdout
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["train"]["steps"] == 6 and cfg["model"]["d_model"] == 32

    r = nmtkit("train", "--data", str(data), "--logdir", str(run), "--fresh", *sets(SMALL + ["train.steps=8"]))
    assert r.returncode == 1 and "--fresh" in r.stderr and "Traceback" not in r.stderr

    r = nmtkit("report", "--run", str(run))
    assert r.returncode == 0, r.stderr[-3000:]
    assert (run / "report.md").exists() and "Q10" in (run / "report.md").read_text() or "10" in r.stdout

    r = nmtkit("export", "--run", str(run), "--out", str(tmp_path / "saved"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "saved" / "saved_model.pb").exists()


def test_bad_data_dir_is_one_clear_line(tmp_path):
    r = nmtkit("train", "--data", str(tmp_path / "nowhere"), "--logdir", str(tmp_path / "run"))
    assert r.returncode == 1
    assert "spm.model" in r.stderr and "nmtkit prepare" in r.stderr and "Traceback" not in r.stderr
