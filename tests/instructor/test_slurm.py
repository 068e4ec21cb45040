"""`--launcher slurm` against a real Slurm on this machine: munge, slurmctld, and two slurmd, each inside one of the
rehearsal's two network namespaces (tools.rehearsal.netns.TwoHosts) with its own UTS host name and 1 CPU, so a
2-task job spans two "nodes". The CLI trains across them with equal weights on both ranks (squeue shows the job
while it runs, nothing after); one Ctrl-C while the job is queued leaves and cancels it; a killed driver leaves no
job; inside an allocation the engines are one srun step that ends with the driver; `scancel` mid-run, and a node
lost mid-run (every process in its namespace killed), each end the driver with one line naming the job within
60 s, and a relaunch resumes to the uninterrupted run's weights (dropout on); a 1-minute allocation stops at a
checkpoint before its limit with reason "time limit". The one-minute job runs beside the others (the partition
lets jobs share a node's CPU), so the module costs about two minutes, not three.

Skipped, with the reason and the install command, without root, network namespaces, Slurm, munge or Horovod.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nmtkit import config
from tools.rehearsal.slurm import Output, SlurmLab

INSTALL = ("apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
           "slurm-wlm munge")
DAEMONS = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged")


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (slurmd, munged and network namespaces); run the tests as root"
    missing = [p for p in DAEMONS if not os.access(p, os.X_OK)] + [
        t for t in ("sbatch", "squeue", "scancel", "scontrol", "nsenter") if shutil.which(t) is None]
    if missing:
        return f"Slurm or munge is not installed ({', '.join(missing)} missing): {INSTALL}"
    if not importlib.util.find_spec("horovod"):
        return "Horovod is not installed (make setup)"
    from tools.rehearsal.netns import unavailable
    return unavailable()


_why = _unavailable()
pytestmark = [pytest.mark.long, pytest.mark.slow, pytest.mark.netns,
              pytest.mark.skipif(_why is not None, reason=_why or "")]

SMALL = {"data.train_size": 2000, "data.dev_size": 20, "data.test_size": 20, "data.vocab_size": 300,
         "model.d_model": 32, "model.encoder_layers": 1, "model.decoder_layers": 1, "model.num_heads": 2,
         "model.d_ff": 64, "train.warmup_steps": 5, "train.lr_scale": 1.0, "train.log_every": 5,
         "train.ckpt_every": 10, "eval.every": 0, "eval.dev_sentences": 5, "eval.test_sentences": 5,
         "eval.beam_size": 1, "eval.max_extra_len": 3, "monitor.enabled": False}
STEPS = 60
FOREGROUND = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
              "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


@pytest.fixture(scope="module")
def slurm():
    from tools.rehearsal.netns import TwoHosts
    with TwoHosts(rate=None, prefix="sn") as net:
        lab = SlurmLab(net)
        try:
            yield lab.up()
        finally:
            lab.down()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from nmtkit.data.prepare import prepare
    d = tmp_path_factory.mktemp("slurm-data") / "tiny"
    prepare(config.load("tiny", dict(SMALL, **{"data.dir": str(d)})), progress=False)
    return d


def _train(slurm, data, run, *extra: str, steps: int = STEPS, np: int = 2, wrap=lambda cmd: cmd) -> subprocess.Popen:
    sets = [a for k, v in {**SMALL, "train.steps": steps}.items()
            for a in ("--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}")]
    env = dict(slurm.env, TF_USE_LEGACY_KERAS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1",
               PYTHONUNBUFFERED="1")
    # with SIGINT at its default, as in a terminal: a test run from a background job (`make test &`, nohup) passes
    # SIGINT ignored on to its children, and Python then never raises KeyboardInterrupt (what Ctrl-C tests)
    cmd = [sys.executable, "-c", FOREGROUND, "-m", "nmtkit.cli", "train", "--np", str(np), "--launcher", "slurm",
           "--profile", "tiny", "--data", str(data), "--logdir", str(run), *sets, *extra]
    return subprocess.Popen(wrap(cmd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=str(run.parent))


def _squeue_empty(slurm, job: str, timeout: float = 40) -> None:
    """Job `job` leaves the queue (other tests' jobs may share the nodes meanwhile)."""
    deadline = time.time() + timeout
    while job in slurm.queue() and time.time() < deadline:
        time.sleep(0.5)
    assert job not in slurm.queue(), slurm.run("squeue").stdout


def _checksum(out: Output) -> str:
    return out.wait_for(r"weights checksum (\S+) on all 2 ranks", timeout=5).group(1)


def _job(out: Output, where: str = "submitted by sbatch", timeout: float = 120) -> str:
    return out.wait_for(rf"Slurm job (\d+) \({where}\): RUNNING", timeout=timeout).group(1)


@pytest.fixture(scope="module")
def started(slurm, data, tmp_path_factory):
    """Three runs started at once, beside the short tests that follow (the partition lets jobs share the nodes'
    CPUs): the uninterrupted run; the one-minute allocation (one rank, half the CPU), whose minute passes meanwhile;
    and the run that is scancel'ed as soon as it passes step 15 (a thread watches for it). Each: its run directory
    and output."""
    import threading
    made = {k: tmp_path_factory.mktemp(k) / "run" for k in ("straight", "limited", "cancelled")}
    runs = {"limited": Output(_train(slurm, data, made["limited"], "--set", "cluster.slurm_minutes=1", steps=100_000,
                                     np=1))}
    runs["limited"].wait_for(r"^Horovod rank 0/1", timeout=120)  # its rank started: its minute's first steps come
    runs |= {k: Output(_train(slurm, data, made[k])) for k in ("straight", "cancelled")}
    cancel = {}

    def scancel_past_step_15():
        out = runs["cancelled"]
        cancel["job"] = _job(out, timeout=240)
        out.wait_for(r"^step 15/", timeout=240)  # past the first checkpoint (every 10 steps)
        cancel["t0"] = time.time()
        slurm.run("scancel", cancel["job"])

    seen: set[str] = set()  # every job id squeue showed while the uninterrupted run's driver ran

    def watch_queue():
        while runs["straight"].proc.poll() is None:
            try:
                seen.update(slurm.queue())
            except AssertionError:  # the lab went down (a -k selection left the run going)
                return
            time.sleep(0.5)

    watcher = threading.Thread(target=scancel_past_step_15, daemon=True)
    watcher.start()
    threading.Thread(target=watch_queue, daemon=True).start()
    yield {k: (made[k], out) for k, out in runs.items()} | {"watcher": watcher, "cancel": cancel, "seen": seen}
    for out in runs.values():  # the tests end these; a run left by a deselected or failed test must not outlive us
        if out.proc.poll() is None:
            out.proc.kill()  # its lifeline's reaper then ends its controller and cancels its job


@pytest.fixture(scope="module")
def straight(slurm, started):
    """The uninterrupted run: (run dir, its weights checksum, the job id, the job ids squeue showed while it ran,
    its nodes, its output)."""
    run, out = started["straight"]
    m = out.wait_for(r"Slurm job (\d+) \(submitted by sbatch\): RUNNING on (\S+?)(?:, \d+ min left)?;", timeout=240)
    code = out.end()
    assert code == 0, out.text
    return run, _checksum(out), m.group(1), started["seen"], m.group(2), out.text


def test_ctrl_c_while_the_job_is_queued_leaves_at_once_and_cancels_it(slurm, data, started, tmp_path):
    out = Output(_train(slurm, data, tmp_path / "run", "--set", "cluster.slurm_sbatch=--begin=now+1hour"))
    job = out.wait_for(r"Slurm job (\d+) is queued \(BeginTime\)", timeout=120).group(1)
    assert job in slurm.queue()
    t0 = time.time()
    out.proc.send_signal(signal.SIGINT)  # one Ctrl-C
    assert out.end(timeout=30, stacks=True) == 130, out.text
    assert time.time() - t0 < 15, out.text
    assert f"interrupted before training began: Slurm job {job} cancelled" in out.text, out.text
    _squeue_empty(slurm, job, timeout=10)


def test_a_killed_driver_leaves_no_job(slurm, data, started, tmp_path):
    out = Output(_train(slurm, data, tmp_path / "run", steps=100_000))
    job = _job(out, timeout=180)
    assert job in slurm.queue()
    out.proc.send_signal(signal.SIGKILL)
    out.end(timeout=10)
    _squeue_empty(slurm, job, timeout=45)  # the lifeline's reaper ran `scancel <job>`


def test_inside_an_allocation_the_engines_are_one_srun_step_that_ends_with_the_driver(slurm, data, started, tmp_path):
    import psutil
    # salloc runs the driver, then holds the allocation a while: the step must go when the driver dies, not the job
    def hold(cmd):
        return ["salloc", "-N2", "-n2", "sh", "-c", '"$@"; sleep 60', "sh", *cmd]
    out = Output(_train(slurm, data, tmp_path / "run", steps=100_000, wrap=hold))
    m = out.wait_for(r"Slurm job (\d+) \(inside your allocation\): RUNNING on (\S+?)(?:, \d+ min left)?;", timeout=180)
    job, nodes = m.groups()
    assert set(nodes.split(",")) == {h.name for h in slurm.net.hosts}, out.text
    steps = lambda: [s for s in slurm.run("squeue", "-h", "-s", "-o", "%i").stdout.split()  # noqa: E731
                     if s.startswith(f"{job}.") and s.split(".")[1].isdigit()]
    assert steps(), slurm.run("squeue", "-s").stdout  # the engines: a step of the user's allocation
    # the python process itself: salloc's and sh's command lines name nmtkit.cli too, and killing either ends the job
    tree = psutil.Process(out.proc.pid).children(recursive=True)
    driver = next(p for p in tree if p.cmdline()[:1] and "python" in Path(p.cmdline()[0]).name
                  and "nmtkit.cli" in p.cmdline())
    driver.kill()
    deadline = time.time() + 30
    while steps() and time.time() < deadline:
        time.sleep(0.5)
    assert not steps() and job in slurm.queue(), slurm.run("squeue", "-s").stdout  # step gone, allocation kept
    slurm.run("scancel", job)
    _squeue_empty(slurm, job)
    for p in [psutil.Process(out.proc.pid), *tree]:  # salloc's `sleep 60` may outlive its allocation a while
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    out.end(timeout=30)


def test_two_nodes_train_with_equal_weights_and_the_job_leaves_the_queue(slurm, straight):
    run, checksum, job, seen, nodes, text = straight
    assert job in seen  # squeue showed the job while the driver ran
    status = json.loads((run / "run.json").read_text())
    assert status["status"] == "finished" and status["step"] == STEPS, text
    assert json.loads((run / "config.json").read_text())["model"]["dropout"] == 0.1  # dropout on, for the resume
    assert set(nodes.split(",")) == {h.name for h in slurm.net.hosts}, text  # one task on each namespace host
    assert float(checksum) != 0.0  # and the same on both ranks (_checksum matched "on all 2 ranks")
    _squeue_empty(slurm, job)  # nothing left once the driver returned
    assert not list(run.parent.glob("slurm-*.out"))  # the job's output went to the cluster's profile, not the cwd


def test_a_one_minute_allocation_stops_at_a_checkpoint_before_its_limit(slurm, started):
    run, out = started["limited"]
    job = _job(out)
    code = out.end(timeout=180)
    status = json.loads((run / "run.json").read_text())
    log = run / "nmtkit-error.log"
    if code != 0:  # the whole output in the report (an assertion's message is cut short)
        print(out.text, json.dumps(status, indent=1), log.read_text()[-3000:] if log.exists() else "", sep="\n")
    assert code == 0, status.get("error")
    assert status["status"] == "stopped" and status["reason"] == "time limit", status
    assert "test_bleu" not in status["summary"], status  # no final evaluation near the limit: the next job resumes
    assert (run / "checkpoints" / f"ckpt-{status['step']}.index").exists(), status  # stopped at a checkpoint
    assert status["step"] >= 1, status  # it trained first
    assert f"Slurm job {job}'s time limit was near" in out.text
    # before the limit: the job was still running when the ranks stopped, not ended by Slurm (TIMEOUT)
    assert "TIMEOUT" not in out.text and "allocation_end" not in status, out.text
    print(f"time-limit run: stopped at step {status['step']} (limit 60 s)")
    _squeue_empty(slurm, job)


@pytest.fixture(scope="module")
def relaunched(slurm, data, started):
    """The scancel'ed run launched again (it resumes): its output, running on."""
    started["watcher"].join(timeout=300)
    run, out = started["cancelled"]
    out.end(timeout=180)
    _squeue_empty(slurm, started["cancel"]["job"])
    out = Output(_train(slurm, data, run))
    yield out
    if out.proc.poll() is None:  # the lost-node test ends it; not if that test was deselected or failed early
        out.proc.kill()


def test_scancel_names_the_job_within_60s_and_a_relaunch_resumes(slurm, started, relaunched):
    run, out = started["cancelled"]
    job, t0 = started["cancel"]["job"], started["cancel"]["t0"]
    last = out.lines[-1]
    print(f"scancel -> the driver's last line in {last[0] - t0:.1f} s: {last[1]}")
    assert out.proc.returncode == 1 and last[0] - t0 < 60, out.text
    assert f"Slurm job {job} was cancelled" in last[1] and "resume" in last[1], out.text
    resumed = int(relaunched.wait_for(r"resuming at step (\d+)", timeout=180).group(1))
    assert 10 <= resumed < STEPS, relaunched.text  # lost less than one checkpoint interval (10 steps)


def test_a_lost_node_is_named_within_60s_and_the_relaunch_ends_with_the_uninterrupted_weights(slurm, data, started,
                                                                                              straight, relaunched):
    """The scancel'ed run's relaunch loses a node past step 35; the next relaunch resumes and ends, after both
    interruptions, with the uninterrupted run's weights (dropout on: the profile's 0.1)."""
    run, out = started["cancelled"][0], relaunched
    started["limited"][1].end(timeout=180)  # alone on the nodes, so that losing one ends only this job
    job = _job(out)
    out.wait_for(r"^step 3[5-9]/", timeout=180)  # past step 30's checkpoint
    lost, t0 = slurm.net.hosts[1].name, time.time()
    slurm.lose(1)
    try:
        code = out.end(timeout=120)
        last = out.lines[-1]
        print(f"node lost -> the driver's last line in {last[0] - t0:.1f} s: {last[1]}")
        assert code == 1 and last[0] - t0 < 60, out.text
        assert f"Slurm job {job} " in last[1] and f"node(s) lost: {lost}" in last[1] and "resume" in last[1], out.text
        done = sorted(int(c.stem.split("-")[1]) for c in (run / "checkpoints").glob("ckpt-*.index"))
        assert done and done[-1] >= 30, done  # at most one checkpoint interval lost
    finally:
        slurm.restore(1)
    _squeue_empty(slurm, job)
    again = Output(_train(slurm, data, run))
    assert again.end() == 0, again.text
    assert int(again.wait_for(r"resuming at step (\d+)", timeout=1).group(1)) >= 30
    assert _checksum(again) == straight[1]
