"""`nmtkit train --np 2` as the homework runs it under nohup: a lock on the run directory, no orphans when the
driving process dies (SIGKILL or SIGTERM), and a relaunch that resumes from the last checkpoint with nothing lost."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from nmtkit.files import read_jsonl

pytestmark = [pytest.mark.long, pytest.mark.slow]  # the long tier (tests/conftest.py): make test leaves it out

SMALL = ["data.train_size=2000", "data.dev_size=20", "data.test_size=20", "data.vocab_size=300",
         "data.batch_sentences=16", "model.d_model=32", "model.d_ff=64", "model.num_heads=2",
         "model.encoder_layers=1", "model.decoder_layers=1", "train.log_every=5", "train.ckpt_every=10",
         "eval.every=0", "eval.dev_sentences=5", "eval.test_sentences=5", "eval.beam_size=1",
         "eval.max_extra_len=3", "monitor.enabled=false"]


def sets(items):
    return [a for item in items for a in ("--set", item)]


def start(tag, *args, log):
    env = {**os.environ, "NMTKIT_PROFILE": "tiny", "NMTKIT_TEST_TAG": tag, "TF_NUM_INTRAOP_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "nmtkit.cli", *args], stdout=log, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)


def tagged(tag):
    """Every live process started (directly or not) by a driver carrying this tag: controller, engines, reaper."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("NMTKIT_TEST_TAG") == tag and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def wait_for(pred, timeout, what):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return time.time() - t0
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout} s")


def segments(steps):
    """Runs of strictly increasing steps: one per job that wrote the log (two jobs at once would interleave)."""
    segs = [[steps[0]]]
    for s in steps[1:]:
        (segs[-1].append(s) if s > segs[-1][-1] else segs.append([s]))
    return segs


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_cluster") / "data"
    r = subprocess.run([sys.executable, "-m", "nmtkit.cli", "prepare", "--data", str(d), *sets(SMALL)],
                       capture_output=True, text=True, env={**os.environ, "NMTKIT_PROFILE": "tiny"})
    assert r.returncode == 0, r.stderr[-2000:]
    return d


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)
def test_driver_death_leaves_no_orphans_and_the_relaunch_resumes(data, tmp_path, sig):
    """SIGKILL: the reaper ends the rest, the lock is taken over, the relaunch resumes. SIGTERM: a clean stop after a
    checkpoint (the relaunch after it is the SIGKILL case's, so it is not paid twice)."""
    run, tag = tmp_path / "run", uuid.uuid4().hex
    train = ["train", "--np", "2", "--data", str(data), "--logdir", str(run), *sets(SMALL + ["train.steps=100000"])]
    with open(tmp_path / "first.log", "wb") as log:
        first = start(tag, *train, log=log)
    try:
        wait_for(lambda: list((run / "checkpoints").glob("ckpt-20.index")), 240, "a second checkpoint")
        if sig == signal.SIGKILL:  # a second launch on the live run directory fails at once, naming the holder
            t0 = time.time()
            second = subprocess.run([sys.executable, "-m", "nmtkit.cli", *train], capture_output=True, text=True,
                                    timeout=60, env={**os.environ, "NMTKIT_PROFILE": "tiny"})
            assert second.returncode != 0 and time.time() - t0 < 30
            assert f"in use by pid {first.pid} on host" in second.stderr, second.stderr[-1000:]
        assert len(tagged(tag)) >= 3  # driver, controller, two engines (and the reaper)
        first.send_signal(sig)
        if sig == signal.SIGTERM:
            assert first.wait(timeout=120) == 0  # stopped after a checkpoint: a clean exit
        waited = wait_for(lambda: not tagged(tag), 60, f"every process of the run gone after {sig.name}")
        print(f"{sig.name}: no process left after {waited:.1f} s")
    finally:
        for p in tagged(tag):
            p.kill()
    before = sorted(int(p.stem.split("-")[1]) for p in (run / "checkpoints").glob("ckpt-*.index"))
    if sig == signal.SIGTERM:  # the stop checkpointed the step it stopped at, and run.json says "stopped"
        status = json.loads((run / "run.json").read_text())
        assert status["status"] == "stopped" and status["step"] == before[-1], (status, before)
        return
    with open(tmp_path / "again.log", "wb") as log:
        # no final evaluation: what is checked here is where the relaunch resumed and what it kept
        again = start(uuid.uuid4().hex, *train[:-2], *sets(SMALL + [f"train.steps={before[-1] + 10}",
                                                                    "eval.at_end=false"]), log=log)
        assert again.wait(timeout=400) == 0, (tmp_path / "again.log").read_text()[-3000:]
    text = (tmp_path / "again.log").read_text()
    assert f"resuming at step {before[-1]}" in text, text[-2000:]
    after = sorted(int(p.stem.split("-")[1]) for p in (run / "checkpoints").glob("ckpt-*.index"))
    assert after[-1] == before[-1] + 10 and before[-1] in after  # nothing deleted by a job that should be gone
    steps = [r["step"] for r in read_jsonl(run / "ranks" / "rank0.jsonl")]
    segs = segments(steps)
    # the first job, then the relaunch from its last checkpoint: never two jobs interleaved (at most one restart,
    # where the relaunch repeats the steps after the last checkpoint)
    assert len(segs) <= 2 and segs[-1][-1] == after[-1], [(s[0], s[-1]) for s in segs]
    assert before[-1] + 1 in segs[-1]
