"""The training loop: run-directory contents, exact resume after a signal, clear errors for bad checkpoints,
gradient accumulation, and beam search against greedy on a trained model."""
import json
import os
import shutil
import signal

import numpy as np
import pytest

from nmtkit import runs
from nmtkit.errors import TrainError
from nmtkit.files import read_jsonl
from nmtkit.keras2 import import_tf
from nmtkit.training.checkpoints import checkpoint_files, load_model
from nmtkit.training.loop import train

from conftest import small_config

tf = import_tf()
pytestmark = pytest.mark.slow


def _losses(run):
    return {r["step"]: r["loss"] for r in read_jsonl(runs.rank_log(run, 0))}


def test_run_directory(trained_run):
    run, summary = trained_run
    assert summary["status"] == "finished" and summary["step"] == 400
    status = json.loads((run / runs.STATUS).read_text())
    assert status["status"] == "finished" and status["step"] == 400
    for name in (runs.CONFIG, runs.DATA_STATS, "spm.model"):
        assert (run / name).is_file(), name
    assert list(run.glob("events.out.tfevents.*")), "no TensorBoard events"
    tags = {r["tag"] for r in read_jsonl(run / runs.SCALARS)}
    assert {"train_loss", "eval_loss", "Eval_BLEU_Score", "eval_chrF", "learning_rate", "global_step/sec",
            "tokens_per_sec", "step_time"} <= tags
    recs = list(read_jsonl(runs.rank_log(run, 0)))
    assert [r["step"] for r in recs] == list(range(1, 401))
    # which hardware the step times had: the cores the rank could run on and TensorFlow's pools on them
    assert {tuple(r["affinity"]) for r in recs} == {tuple(sorted(os.sched_getaffinity(0)))}
    intra, inter = recs[-1]["threads"]
    assert 1 <= intra <= len(os.sched_getaffinity(0)) and inter >= 1
    losses = _losses(run)
    assert losses[400] < losses[1] - 2.0  # it learned
    assert (run / runs.TRANSLATIONS / "test.400.de").is_file()
    assert json.loads((run / runs.BEST / "best.json").read_text())["step"] in (200, 400)


def test_training_a_finished_run_again_changes_nothing(trained_run, nmt_data, capsys):
    run, summary = trained_run
    before = (run / runs.STATUS).read_text()
    cfg = small_config(**{"train.steps": 400, "model.dropout": 0.0})
    again = train(cfg, run, data_dir=nmt_data, progress=False)
    assert "already finished at step 400" in capsys.readouterr().out
    assert again["status"] == "finished" and again["test_bleu"] == pytest.approx(summary["test_bleu"])
    assert (run / runs.STATUS).read_text() == before  # not re-evaluated, record not overwritten


def test_checkpoint_is_weights_plus_adam_moments(trained_run):
    run, summary = trained_run
    files = checkpoint_files(run)
    names = [f["file"] for f in files]
    assert names == ["checkpoint", "ckpt-400.data-00000-of-00001", "ckpt-400.index"]
    weights_mb = summary["params"] * 4 / 2 ** 20
    data_mb = files[1]["MB"]
    assert 2.8 < data_mb / weights_mb < 3.3  # weights + Adam's m and v


def test_ranks_share_an_evaluation_batch_by_batch_with_one_process_translations(trained_run, nmt_data):
    """translate_shared on rank 0 and on rank 1 of two (rank 1's share decoded here as its gather would bring it):
    each decodes every 2nd length-sorted batch, and both get one process's translations, in order."""
    from nmtkit.data.pipeline import read_split
    from nmtkit.model.decode import Translator
    from nmtkit.training.evaluate import translate_shared
    r = load_model(trained_run[0])
    tr = Translator(r.model, r.tokenizer, beam_size=2, batch_size=4)
    src = read_split(nmt_data, "dev")[0][:18]  # 5 batches: 4, 4, 4, 4, 2 sentences
    shares = []

    class Rank:
        size = 2

        def __init__(self, rank):
            self.rank, self.is_chief = rank, rank == 0

        def gather(self, mine):
            other = tr.translate_ids(tr.encode(src), part=(1 - self.rank, 2))
            theirs = {i: x for i, x in enumerate(other) if x is not None}
            both = [mine, theirs] if self.rank == 0 else [theirs, mine]
            shares.append([sorted(s) for s in both])
            return both

    alone = tr.translate(src)
    assert translate_shared(tr, src, Rank(0)) == alone
    assert translate_shared(tr, src, Rank(1)) == alone
    first, second = shares[0]
    assert (len(first), len(second)) == (10, 8) and not set(first) & set(second)  # batches 0, 2, 4 and 1, 3
    assert shares[1] == shares[0]


def test_beam_search_vs_greedy_on_trained_model(trained_run, nmt_data):
    from nmtkit.data.pipeline import read_split
    from nmtkit.model.decode import Translator
    from nmtkit.training.evaluate import evaluate_translations
    run, _ = trained_run
    model, tok, _cfg, _ = (r := load_model(run)).model, r.tokenizer, r.config, r.checkpoint
    src, ref = read_split(nmt_data, "test")
    greedy = evaluate_translations(Translator(model, tok, beam_size=1), src, ref)
    beam = evaluate_translations(Translator(model, tok, beam_size=4, length_penalty=0.6), src, ref)
    print(f"greedy BLEU {greedy['bleu']:.1f}, beam-4 BLEU {beam['bleu']:.1f}")
    assert greedy["bleu"] > 10, "the shared model should have learned to translate (an untrained one scores ~0)"
    assert beam["bleu"] >= greedy["bleu"] - 2.0
    # with no length penalty, beam search mostly finds hypotheses at least as probable as greedy's (not always:
    # the greedy prefix can fall out of the beam)
    from nmtkit.model.decode import search
    ids = [s + [3] for s in (tok.encode(x) for x in src[:16])]
    width = max(map(len, ids))
    batch = tf.constant([s + [0] * (width - len(s)) for s in ids])
    _, g = search(model, batch, tf.constant(width + 6), beam_size=1, alpha=0.0)
    _, b = search(model, batch, tf.constant(width + 6), beam_size=4, alpha=0.0)
    better = b.numpy() >= g.numpy() - 1e-4
    assert better.mean() >= 0.75 and b.numpy().mean() >= g.numpy().mean()


def test_stop_by_signal_then_resume_is_exact(nmt_data, tmp_path):
    cfg = small_config(**{"train.steps": 5, "train.log_every": 1})
    straight = train(cfg, tmp_path / "straight", data_dir=nmt_data, progress=False)
    assert straight["status"] == "finished"

    def term_at_2(rec):
        if rec["step"] == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler only sets a flag; the loop stops at the next step
    before = signal.getsignal(signal.SIGTERM)
    stopped = train(cfg, tmp_path / "resumed", data_dir=nmt_data, progress=False, on_log=term_at_2)
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored
    assert stopped["status"] == "stopped" and stopped["step"] == 2
    assert json.loads((tmp_path / "resumed" / runs.STATUS).read_text())["status"] == "stopped"
    assert checkpoint_files(tmp_path / "resumed")[1]["file"] == "ckpt-2.data-00000-of-00001"

    resumed = train(cfg, tmp_path / "resumed", data_dir=nmt_data, progress=False)
    assert resumed["status"] == "finished" and resumed["step"] == 5
    a, b = _losses(tmp_path / "straight"), _losses(tmp_path / "resumed")
    assert sorted(b) == [1, 2, 3, 4, 5]
    for step in (3, 4, 5):  # same next-step losses as the uninterrupted run
        assert b[step] == pytest.approx(a[step], rel=1e-4, abs=1e-5)
    # same weights and optimizer slots at the end
    ra = tf.train.load_checkpoint(str(tmp_path / "straight" / runs.CHECKPOINTS))
    rb = tf.train.load_checkpoint(str(tmp_path / "resumed" / runs.CHECKPOINTS))
    names = [n for n in ra.get_variable_to_shape_map() if "OPTIMIZER_SLOT" in n or "model/" in n]
    assert any("OPTIMIZER_SLOT" in n for n in names) or any("optimizer" in n for n in ra.get_variable_to_shape_map())
    for name in ra.get_variable_to_shape_map():
        if name.startswith(("_CHECKPOINTABLE", "save_counter")) or name.endswith("OBJECT_GRAPH"):
            continue
        np.testing.assert_allclose(ra.get_tensor(name), rb.get_tensor(name), rtol=1e-4, atol=1e-6, err_msg=name)


def _files(d):
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_corrupt_newest_checkpoint_falls_back_to_the_previous(trained_run, tmp_path, nmt_data, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained_run[0], run)
    data = run / runs.CHECKPOINTS / "ckpt-400.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # a copy cut short
    cfg = small_config(**{"train.steps": 203, "train.warmup_steps": 100, "train.lr_scale": 0.3,
                          "model.dropout": 0.0, "train.log_every": 1})
    summary = train(cfg, run, data_dir=nmt_data, progress=False)
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "does not restore" in x)
    assert "ckpt-400" in line and "resuming from ckpt-200" in line
    assert "resuming at step 200" in out
    assert summary["status"] == "finished" and summary["step"] == 203
    assert [r["step"] for r in read_jsonl(runs.rank_log(run, 0))][-3:] == [201, 202, 203]


def test_no_checkpoint_restores_refuses_and_keeps_them(trained_run, tmp_path, nmt_data):
    run = tmp_path / "run"
    shutil.copytree(trained_run[0], run)
    for index in (run / runs.CHECKPOINTS).glob("ckpt-*.index"):
        index.write_bytes(b"not a checkpoint index")
    before = _files(run / runs.CHECKPOINTS)
    cfg = small_config(**{"train.steps": 410, "train.warmup_steps": 100, "model.dropout": 0.0})
    with pytest.raises(TrainError, match=r"none of its checkpoints restores \(ckpt-400, ckpt-200") as e:
        train(cfg, run, data_dir=nmt_data, progress=False)
    assert "\n" not in str(e.value) and "delete" not in str(e.value)
    assert _files(run / runs.CHECKPOINTS) == before  # untouched, and not started fresh over them


def test_interrupted_saves_cleaned_and_free_disk_checked(nmt_data, tmp_path, monkeypatch):
    run = tmp_path / "run"
    for name in ("ckpt-30_temp", "best/best-20_temp", "mine_temp"):
        (run / runs.CHECKPOINTS / name).mkdir(parents=True)
        (run / runs.CHECKPOINTS / name / "part-00000-of-00001").write_bytes(b"x")
    from nmtkit.training import (
        checkpoints as ck,  # not `import nmtkit.training.checkpoints`: nk.train, once used, is the function
    )
    monkeypatch.setattr(ck.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10 ** 9, 10 ** 9 - 1000, 1000))
    cfg = small_config(**{"train.steps": 3, "train.ckpt_every": 1})
    with pytest.raises(TrainError, match=r"checkpoints: not enough free disk .*bytes needed, 1,000 free"):
        train(cfg, run, data_dir=nmt_data, progress=False)
    assert not (run / runs.CHECKPOINTS / "ckpt-30_temp").exists()
    assert not (run / runs.BEST / "best-20_temp").exists()
    assert (run / runs.CHECKPOINTS / "mine_temp" / "part-00000-of-00001").exists()  # not the kit's: kept
    assert runs.read_status(run)["status"] == "failed"


def test_incompatible_model_is_refused(trained_run, tmp_path, nmt_data):
    run = tmp_path / "run"
    shutil.copytree(trained_run[0], run)
    cfg = small_config(**{"train.steps": 410, "model.d_model": 32})
    with pytest.raises(TrainError, match=r"config.json.*d_model"):
        train(cfg, run, data_dir=nmt_data, progress=False)
    with pytest.raises(TrainError, match="--fresh"):
        train(small_config(**{"train.steps": 410}), run, data_dir=nmt_data, progress=False, resume=False)


def test_gradient_accumulation(nmt_data, tmp_path):
    cfg = small_config(**{"train.steps": 3, "train.log_every": 1, "train.grad_accum": 2})
    summary = train(cfg, tmp_path / "accum", data_dir=nmt_data, progress=False)
    assert summary["step"] == 3
    recs = list(read_jsonl(runs.rank_log(tmp_path / "accum", 0)))
    assert [r["step"] for r in recs] == [1, 2, 3]
    ckpt = tf.train.load_checkpoint(str(tmp_path / "accum" / runs.CHECKPOINTS))
    assert ckpt.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == 3  # one update per 2 micro-batches
    # each step's batch was split in two micro-batches: about the tokens of one whole batch, not twice them
    single = small_config(**{"train.steps": 1, "train.log_every": 1})
    train(single, tmp_path / "one", data_dir=nmt_data, progress=False)
    one = next(read_jsonl(runs.rank_log(tmp_path / "one", 0)))["tokens"]
    assert 0.6 * one < recs[0]["tokens"] < 1.4 * one
    status = json.loads((tmp_path / "accum" / "run.json").read_text())
    assert status["micro_batches"] == 2 and status["micro_batch_sentences"] == -(-cfg.data.batch_sentences // 2)


def test_eval_at_end_off_ends_at_the_last_checkpoint_without_evaluating(nmt_data, tmp_path):
    """What compression trials set: the run finishes and checkpoints, and no dev or test translation is made."""
    cfg = small_config(**{"train.steps": 2, "train.log_every": 1, "eval.every": 0, "eval.at_end": False})
    summary = train(cfg, tmp_path / "run", data_dir=nmt_data, progress=False)
    assert summary["status"] == "finished" and summary["step"] == 2
    assert "test_bleu" not in summary
    assert not list((tmp_path / "run").glob(f"{runs.TRANSLATIONS}/*.de"))  # neither dev.2.de nor test.2.de
    assert (tmp_path / "run" / runs.CHECKPOINTS / "ckpt-2.index").exists()
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "finished"
