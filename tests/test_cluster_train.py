"""2-rank Horovod training on two local engines posing as nodes: the loss falls with identical weights on both ranks,
stop() ends every rank cleanly after a checkpoint, and a rank killed with SIGKILL is named within 60 s, the others are
released and the run resumes from its last checkpoint with a different number of ranks; with the profile's dropout on,
a 2-rank run stopped (SIGTERM to the driver, stop()), cut short by a killed engine or by a SIGKILLed driver and
resumed ends with exactly the weights and Adam slots of the uninterrupted run."""
import importlib.util
import json
import os
import signal
import time
import uuid

import psutil
import pytest
from test_cli_cluster import start, tagged, wait_for
from test_train_resume import checkpoint_difference

from nmtkit import config
from nmtkit.cluster import Cluster
from nmtkit.errors import RankFailedError
from nmtkit.files import read_jsonl

pytestmark = [pytest.mark.long, pytest.mark.slow,
              pytest.mark.skipif(not importlib.util.find_spec("horovod"), reason="Horovod is not installed")]

TINY = {"data.train_size": 2000, "data.dev_size": 40, "data.test_size": 40, "data.vocab_size": 300,
        "model.d_model": 32, "model.encoder_layers": 1, "model.decoder_layers": 1, "model.num_heads": 2,
        "model.d_ff": 64, "train.warmup_steps": 5, "train.lr_scale": 1.0, "train.log_every": 5,
        "train.ckpt_every": 10, "eval.every": 0, "eval.dev_sentences": 10, "eval.test_sentences": 10,
        "eval.beam_size": 1, "eval.max_extra_len": 5, "monitor.enabled": False}


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    from nmtkit.data.prepare import prepare
    data = tmp_path_factory.mktemp("data") / "tiny"
    c = config.load("tiny", dict(TINY, **{"data.dir": str(data)}))
    prepare(c, progress=False)
    return c


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(engines=2, profile_dir=tmp_path_factory.mktemp("ipython") / "profile_nmtkit").start()
    yield c
    c.stop()


def _steps(run, rank):
    return [(r["step"], r["loss"]) for r in read_jsonl(run / "ranks" / f"rank{rank}.jsonl")]


def _alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_for_step(job, step, timeout=300):  # the first step traces: minutes on a busy machine
    deadline = time.time() + timeout
    while time.time() < deadline:
        job.check()
        steps = job.progress()["step"].dropna()
        if len(steps) == len(job.engines) and steps.min() >= step:
            return
        time.sleep(0.5)
    raise AssertionError(f"no rank reached step {step}:\n{job.progress().to_string()}")


def _cli_args(cfg, run, steps):
    # no final evaluation: the resume tests compare weights (test_two_ranks_lower_the_loss checks the evaluation)
    items = {**TINY, "train.steps": steps, "train.ckpt_every": 5, "eval.at_end": False,
             "model.dropout": cfg.model.dropout}
    sets = [a for k, v in items.items() for a in ("--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}")]
    return ["train", "--np", "2", "--data", cfg.data.dir, "--logdir", str(run), *sets]


def _cli_train(cfg, run, steps, log):
    with open(log, "ab") as out:
        proc = start(uuid.uuid4().hex, *_cli_args(cfg, run, steps), log=out)
        assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]


def _exact(reference, run):
    diff = checkpoint_difference(reference, run)
    print(f"{run.name}: max |difference| {max(diff.values())} over {len(diff)} variables")
    assert max(diff.values()) == 0.0, {n: d for n, d in diff.items() if d}


STEPS = 40  # the resume tests' runs: a checkpoint every 5, so a stop and a kill both land well before the end


@pytest.fixture(scope="module")
def straight(cfg, tmp_path_factory):
    """The uninterrupted 2-rank run both resume tests compare against, trained once by `nmtkit train --np 2` (a CLI
    run and a Cluster.launch of one config train the same weights, bit for bit: the engine test checks that too)."""
    run = tmp_path_factory.mktemp("straight") / "run"
    _cli_train(cfg, run, STEPS, run.parent / "straight.log")
    return run


def _ckpts(run):
    return sorted(int(p.stem.split("-")[1]) for p in (run / "checkpoints").glob("ckpt-*.index"))


def _interrupt_driver(cfg, run, sig, after: int):
    """`nmtkit train --np 2` on `run`, sent `sig` once a checkpoint past step `after` exists; every process of the
    run gone after it. Returns the step the launch resumed at (0: a fresh run)."""
    tag, log = uuid.uuid4().hex, run.parent / f"{sig.name}.log"
    with open(log, "wb") as out:
        driver = start(tag, *_cli_args(cfg, run, STEPS), log=out)
    try:
        wait_for(lambda: [s for s in _ckpts(run) if s > after], 300, f"a checkpoint after step {after}")
        driver.send_signal(sig)
        code = driver.wait(timeout=120)
        assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL), log.read_text()[-3000:]
        wait_for(lambda: not tagged(tag), 60, f"every process of the run gone after {sig.name}")
    finally:
        for p in tagged(tag):
            p.kill()
    text = log.read_text()
    return int(text.split("resuming at step ")[1].split()[0]) if "resuming at step " in text else 0


# First in the file: it starts its own clusters (`nmtkit train --np 2`), before the module's engines exist.
def test_cli_two_ranks_with_dropout_resume_exactly_after_sigterm_or_a_sigkilled_driver(straight, cfg, tmp_path):
    """One run interrupted twice, SIGTERM to the driver (a clean stop after a checkpoint), then SIGKILL (the reaper
    ends the rest), each relaunch resuming from the last checkpoint; it ends with the uninterrupted run's weights
    and Adam slots exactly (an inexact resume at either interruption would leave them different)."""
    assert cfg.model.dropout == 0.1  # the profile's dropout, not 0.0
    run = tmp_path / "run"
    assert _interrupt_driver(cfg, run, signal.SIGTERM, after=5) == 0
    stopped = json.loads((run / "run.json").read_text())
    assert stopped["status"] == "stopped" and 10 <= stopped["step"] == _ckpts(run)[-1] < STEPS, stopped
    resumed = _interrupt_driver(cfg, run, signal.SIGKILL, after=stopped["step"])
    assert resumed == stopped["step"]  # the SIGTERM's relaunch resumed where the stop checkpointed
    killed_at = _ckpts(run)[-1]
    assert stopped["step"] < killed_at < STEPS
    log = tmp_path / "last.log"
    _cli_train(cfg, run, STEPS, log)
    resumed_at = int(log.read_text().split("resuming at step ")[1].split()[0])
    print(f"SIGTERM: stopped at step {stopped['step']}; SIGKILL after checkpoint {killed_at}: resumed at {resumed_at}")
    assert killed_at <= resumed_at < STEPS
    _exact(straight, run)


def test_two_ranks_lower_the_loss_with_identical_weights(cluster, cfg, tmp_path):
    run = tmp_path / "run"
    cfg = cfg.with_overrides({"train.steps": 30, "eval.every": 15})
    table = cluster.preflight(cfg.data.dir)
    assert table["data_ok"].all() and table["rendezvous_ok"].all()
    results = cluster.launch(cfg, run, preflight=False).wait(timeout=240)
    assert [r.rank for r in results] == [0, 1]
    summaries = [r.value for r in results]
    assert all(s["status"] == "finished" and s["step"] == 30 and s["ranks"] == 2 for s in summaries)
    assert summaries[0]["weights_checksum"] == summaries[1]["weights_checksum"]
    assert "test_bleu" in summaries[0] and "test_bleu" not in summaries[1]  # only rank 0 reports
    # the ranks shared the evaluations (each decodes every 2nd batch): the translations one process makes
    from nmtkit.data.pipeline import read_split
    from nmtkit.model.decode import Translator
    from nmtkit.training.checkpoints import load_model
    from nmtkit.training.evaluate import evaluate_translations
    last = load_model(run, "latest")
    src, ref = (x[:cfg.eval.test_sentences] for x in read_split(cfg.data.dir, "test"))
    alone = evaluate_translations(Translator(last.model, last.tokenizer, cfg.eval.beam_size, cfg.eval.length_penalty,
                                             cfg.eval.max_extra_len), src, ref)
    assert (run / "translations" / "test.30.de").read_text().splitlines() == alone["hypotheses"]
    assert summaries[0]["test_bleu"] == alone["bleu"]
    assert [r["step"] for r in read_jsonl(run / "scalars.jsonl") if r["tag"] == "eval_loss"] == [15, 30]
    for rank in (0, 1):  # every rank logs its own steps; the data differ per rank, so do the losses
        losses = [loss for _, loss in _steps(run, rank)]
        assert len(losses) == 30
        assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5
    assert _steps(run, 0) != _steps(run, 1)
    assert (run / "checkpoints" / "checkpoint").exists()
    assert json.loads((run / "run.json").read_text())["status"] == "finished"


def test_one_rank_then_two_with_accumulated_gradients_fused_or_per_gradient_allreduce_same_weights(cluster, cfg,
                                                                                                   tmp_path):
    cfg = cfg.with_overrides({"train.steps": 3, "train.grad_accum": 2, "eval.every": 0, "eval.at_end": False})
    # Horovod re-initialised at another size on an engine (a grouped allreduce tried here killed the engine)
    one = cluster.launch(cfg, tmp_path / "one", preflight=False, ranks=1).wait(timeout=240)
    assert one[0].value["status"] == "finished"
    results = cluster.launch(cfg, tmp_path / "run", preflight=False).wait(timeout=240)
    summaries = [r.value for r in results]
    assert all(s["status"] == "finished" and s["step"] == 3 for s in summaries)
    assert summaries[0]["weights_checksum"] == summaries[1]["weights_checksum"]
    # CPU ranks average all gradients in one flattened allreduce; GPU ranks (NCCL) one allreduce per gradient.
    # Run the per-gradient path here too: with 2 ranks both sum a+b per element, so the weights are bit-identical.
    def fused(on):  # on every engine: Horovod() asks dist.fuse_gradients (Horovod's decision: auto or never)
        cluster.client[:].execute("import nmtkit.training.dist as d\n"
                                  "d._auto = d.__dict__.get('_auto', d.fuse_gradients)\n"
                                  f"d.fuse_gradients = d._auto if {on} else (lambda gpus, nccl: False)", block=True)
    fused(False)
    try:
        again = cluster.launch(cfg, tmp_path / "per-gradient", preflight=False).wait(timeout=240)
        assert {r.value["fused_allreduce"] for r in again} == {False}
    finally:
        fused(True)
    assert {s["fused_allreduce"] for s in summaries} == {True}
    assert again[0].value["weights_checksum"] == summaries[0]["weights_checksum"]
    assert _steps(tmp_path / "per-gradient", 1) == _steps(tmp_path / "run", 1)


def test_stop_relaunch_sigkill_and_resume_on_fewer_ranks(cluster, cfg, tmp_path):
    run = tmp_path / "run"
    long = cfg.with_overrides({"train.steps": 10_000, "train.ckpt_every": 5})
    # 1. stop(): every rank stops at the same step and rank 0 checkpoints it
    job = cluster.launch(long, run, preflight=False)
    _wait_for_step(job, 3)
    assert not job.done and list(job.progress()["state"]) == ["running", "running"]
    from nmtkit.notebook import panel_html
    page = panel_html(job)  # what nmtkit.notebook.panel(job) shows
    assert page.startswith("<p>2 ranks, ") and page.count("<tr>") >= 3 and "running" in page
    summaries = [r.value for r in job.stop(timeout=120)]
    assert [s["status"] for s in summaries] == ["stopped", "stopped"]
    stopped = summaries[0]["step"]
    assert summaries[1]["step"] == stopped >= 3
    assert f"ckpt-{stopped}" in (run / "checkpoints" / "checkpoint").read_text()
    # 2. launch again on the same engines (they ran hvd.init() already): it resumes where it stopped
    job = cluster.launch(long, run, preflight=False)
    _wait_for_step(job, stopped + 6)  # at least one more checkpoint
    assert _steps(run, 0)[stopped][0] == stopped + 1
    # 3. SIGKILL rank 0 (the one that writes run.json): the driver names it within 60 s, releases the other and
    # marks the run failed with the reason
    victim = job.engines[0]
    os.kill(victim.pid, signal.SIGKILL)
    t0 = time.time()
    with pytest.raises(RankFailedError) as err:
        job.wait(timeout=60)  # a hang would raise TimeoutError instead
    print(f"SIGKILL -> RankFailedError in {time.time() - t0:.1f} s")
    msg = str(err.value)
    assert job.done and "rank 0 on host" in panel_html(job)  # the failure, under the table
    assert "rank 0" in msg and victim.host in msg and "node0" in msg and str(victim.pid) in msg
    status = json.loads((run / "run.json").read_text())
    assert status["status"] == "failed" and "rank 0" in status["error"]
    assert time.time() - t0 < 60 and cluster.ids == []  # the error first; the job's engines ended, not yet replaced
    other = job.engines[1].pid  # released: killed through its nanny, not left waiting in a Gloo collective
    deadline = time.time() + 30
    while _alive(other) and time.time() < deadline:
        time.sleep(0.2)
    assert not _alive(other)
    ckpt = int((run / "checkpoints" / "checkpoint").read_text().split('"')[1].rsplit("-", 1)[1])
    assert ckpt > stopped  # a checkpoint of the relaunch (every 5 steps; it ran 6)
    # 4. resume on ONE rank (a different count) for a few more steps
    resumed = cluster.launch(long.with_overrides({"train.steps": ckpt + 3, "eval.at_end": False}), run, preflight=False,
                             ranks=1)
    (result,) = resumed.wait(timeout=400)
    assert result.value["status"] == "finished" and result.value["ranks"] == 1
    assert len(cluster.ids) == 2 and victim.id not in cluster.ids  # the relaunch started two fresh engines
    assert set(cluster.client[cluster.ids].apply_sync(os.getpid)).isdisjoint(e.pid for e in job.engines)
    assert [s for s, _ in _steps(run, 0)][-3:] == [ckpt + 1, ckpt + 2, ckpt + 3]  # from the checkpoint on


def test_two_ranks_with_dropout_resume_exactly_after_stop_or_a_killed_engine(straight, cluster, cfg, tmp_path):
    """One run stopped (stop()) and resumed, then cut short by a SIGKILLed engine and resumed: it ends with the
    uninterrupted run's weights exactly (that run trained through the CLI: the same weights either way)."""
    cfg = cfg.with_overrides({"train.steps": STEPS, "train.ckpt_every": 5, "eval.at_end": False})
    assert cfg.model.dropout == 0.1
    run = tmp_path / "run"
    # stop(): every rank stops after a checkpoint of the step it reached
    job = cluster.launch(cfg, run, preflight=False)
    _wait_for_step(job, 7)
    stopped = job.stop(timeout=120)[0].value
    assert stopped["status"] == "stopped" and stopped["step"] < STEPS
    # rank 1's engine SIGKILLed after a checkpoint of the relaunch: the next resumes from rank 0's last checkpoint
    job = cluster.launch(cfg, run, preflight=False)
    wait_for(lambda: [s for s in _ckpts(run) if s > stopped["step"]], 300, "a checkpoint of the relaunch")
    # the relaunch on the same engines trained on the Trainers the first launch built and traced (trainer_for)
    assert "reusing this process's traced step" in job.output_of_rank(0).stdout
    os.kill(job.engines[1].pid, signal.SIGKILL)
    with pytest.raises(RankFailedError):
        job.wait(timeout=60)
    assert json.loads((run / "run.json").read_text())["resumed_from"] == stopped["step"]
    job = cluster.launch(cfg, run, preflight=False)
    results = job.wait(timeout=400)
    assert all(r.value["status"] == "finished" and r.value["step"] == STEPS for r in results)
    assert stopped["step"] < json.loads((run / "run.json").read_text())["resumed_from"] < STEPS
    _exact(straight, run)  # the relaunch's reused Trainers and the fresh engines' new ones: the straight run's weights
    assert "reusing" not in job.output_of_rank(0).stdout  # the kill restarted both engines: new Trainers


def test_no_rank_holds_the_session_token_in_its_environment(cluster, cfg, tmp_path):
    job = cluster.launch(cfg.with_overrides({"train.steps": 4}), tmp_path / "run", preflight=False)
    token = job.run.token
    assert token and job.run.holds  # the driver's session: the lock here, the token handed to the ranks as an argument
    view = cluster.client[cluster.ids]
    during = view.execute("import os as _os; _env = dict(_os.environ)", block=False)  # queued behind the training
    results = job.wait(timeout=240)
    assert [r.value["status"] for r in results] == ["finished", "finished"]
    during.get(timeout=60)
    envs = view.pull("_env", block=True)
    assert len(envs) == 2 and not [k for env in envs for k, v in env.items() if token in v or "RUN_LOCK" in k]
    assert not job.run.holds  # the job released the session launch took for it
