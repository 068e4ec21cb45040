"""The training loop: one step function, evaluation, checkpoints and logs (nanoGPT's train.py, in TensorFlow).

    summary = train(cfg, "runs/baseline")                          # one process
    summary = train(cfg, run, dist=Horovod(), on_log=publish)     # every Horovod rank (nmtkit.cluster)

Single process and Horovod differ only in `dist` (nmtkit.train.dist): it wraps the gradient tape, averages
accumulated gradients, broadcasts rank 0's variables before the first step and lets ranks agree to stop.
Rank 0 ("chief") writes checkpoints, TensorBoard events, scalars.jsonl, translations and evaluates BLEU;
every rank writes its own ranks/rank<R>.jsonl step times. The files are described in nmtkit/runs.py.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from nmtkit import runs
from nmtkit.config import Config
from nmtkit.files import append_jsonl, atomic_write_json, write_lines_atomic
from nmtkit.model.decode import Translator
from nmtkit.model.transformer import build, count_params, smoothed_loss, train_flops
from nmtkit.keras2 import import_tf
from nmtkit.train.dist import Single
from nmtkit.train.schedule import choose_precision, make_optimizer, make_schedule

tf = import_tf()

SPM_FILES = ("spm.model", "spm.vocab")


class TrainError(RuntimeError):
    """Training cannot start or continue as asked; the message says why and what to do."""


class CheckpointError(TrainError):
    """A checkpoint is corrupted or does not fit this model; the message names the file."""


# --- small helpers ------------------------------------------------------------------------------------

def _optimizer_variables(opt) -> list:
    v = opt.variables
    return list(v() if callable(v) else v)


def _inner(opt):
    return getattr(opt, "inner_optimizer", opt)


def _interactive() -> bool:
    return sys.stdout.isatty() or "ipykernel" in sys.modules


_PEAK: dict = {}


def peak_flops(precision: str = "float32") -> tuple[float, str]:
    """(peak FLOP/s, where the figure comes from) for MFU, cached per process.

    GPU: the vendor's dense peak for the device name (tensor cores for mixed precision). CPU: measured here
    with a short fp32 matmul, which is what this machine can really do (nanoGPT uses a spec sheet; a laptop
    has none we can trust).
    """
    key = precision
    if key in _PEAK:
        return _PEAK[key]
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "")
        table = {  # (fp32, fp16 tensor core) TFLOP/s, dense
            "H100": (67, 989), "A100": (19.5, 312), "V100": (15.7, 125), "A10": (31.2, 125), "L4": (30.3, 121),
            "T4": (8.1, 65), "A40": (37.4, 150), "RTX 3090": (35.6, 71), "RTX 4090": (82.6, 165), "L40": (90.5, 181),
        }
        for k, (fp32, fp16) in table.items():
            if k in name:
                _PEAK[key] = ((fp16 if precision == "mixed_float16" else fp32) * 1e12, f"{name} spec sheet")
                return _PEAK[key]
    n = 1024
    a = tf.random.normal([n, n])
    b = tf.random.normal([n, n])
    mm = tf.function(lambda a, b: tf.reduce_sum(tf.matmul(a, b)))
    mm(a, b).numpy()  # trace and warm up
    best = 0.0
    for _ in range(5):  # best of a few short trials: the machine may be busy with other work
        t0 = time.perf_counter()
        for _ in range(3):
            mm(a, b).numpy()
        best = max(best, 3 * 2 * n ** 3 / (time.perf_counter() - t0))
    _PEAK[key] = (best, "measured fp32 matmul")
    return _PEAK[key]


class _StopFlag:
    """Set by SIGINT/SIGTERM; the loop checks it every step and all ranks agree via dist.any()."""

    def __init__(self):
        self.requested = False
        self.signal = None


@contextlib.contextmanager
def _stop_on_signals(flag: _StopFlag):
    """Install SIGINT/SIGTERM handlers (main thread only) for the duration, then restore the old ones.

    A second Ctrl-C raises KeyboardInterrupt: the way out if a step hangs.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGINT, signal.SIGTERM)
    old = {s: signal.getsignal(s) for s in sigs}

    def handler(signum, frame):
        if flag.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        flag.requested, flag.signal = True, signal.Signals(signum).name

    for s in sigs:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class _Scalars:
    """TensorBoard event file + scalars.jsonl mirror (rank 0); a no-op on other ranks."""

    def __init__(self, run: Path, enabled: bool):
        self.enabled = enabled
        self.path = run / runs.SCALARS
        self.writer = tf.summary.create_file_writer(str(run)) if enabled else None

    def write(self, step: int, values: dict) -> None:
        if not self.enabled:
            return
        now = time.time()
        with self.writer.as_default():
            for tag, value in values.items():
                if value is None:
                    continue
                tf.summary.scalar(tag, float(value), step=step)
                append_jsonl(self.path, {"step": step, "wall_time": now, "tag": tag, "value": float(value)})
        self.writer.flush()

    def close(self):
        if self.writer is not None:
            self.writer.close()


# --- the pieces a notebook or the cluster may use directly ----------------------------------------------

def checkpoint_files(run: str | os.PathLike, best: bool = False) -> list[dict]:
    """The files that make up the latest checkpoint of a run (or the best one): name and size in MB.

    A TF checkpoint is `checkpoint` (a text index naming the latest), `<prefix>.index` (which tensor is
    where) and `<prefix>.data-00000-of-00001` (the values). The data file holds the weights plus Adam's two
    moment estimates per weight, so it is about 3x the size of the weights alone.
    """
    d = Path(run) / (runs.BEST if best else runs.CHECKPOINTS)
    latest = tf.train.latest_checkpoint(str(d))
    if latest is None:
        raise TrainError(f"{d}: no checkpoint here (train first, or check the run directory)")
    prefix = Path(latest).name
    files = [d / "checkpoint"] + sorted(p for p in d.iterdir() if p.name.startswith(prefix + "."))
    return [{"file": p.name, "MB": round(p.stat().st_size / 2 ** 20, 3)} for p in files]


def load_config(run: str | os.PathLike) -> Config:
    return Config.load_json(Path(run) / runs.CONFIG)


def tokenizer_for(run: str | os.PathLike, data_dir: str | os.PathLike | None = None):
    """The run's own copy of the BPE model (copied at the start of training), else the data directory's."""
    from nmtkit.data.bpe import Tokenizer
    own = Path(run) / "spm.model"
    if own.exists():
        return Tokenizer(own)
    data_dir = Path(data_dir or load_config(run).data.dir)
    return Tokenizer.from_data_dir(data_dir)


def restore(ckpt, path: str, expect_partial: bool = False):
    """Restore `ckpt` from `path` or raise CheckpointError naming the file."""
    try:
        status = ckpt.restore(path)
        if expect_partial:
            status.expect_partial()
        else:
            status.assert_existing_objects_matched()
    except (tf.errors.OpError, ValueError, AssertionError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"{path}.index: cannot restore this checkpoint ({msg[:300]}). It is corrupted (e.g. a copy cut short) "
            "or was written by a different model configuration; delete it (and the 'checkpoint' file beside "
            "it) to fall back to an older one, or train into a new --logdir.") from None
    return status


def load_model(run: str | os.PathLike, which: str = "best"):
    """(model, tokenizer, cfg, checkpoint path) from a run: `which` is "best" (falls back to latest) or "latest"."""
    run = Path(run)
    cfg = load_config(run)
    tok = tokenizer_for(run)
    model = build(cfg.model, tok.vocab_size)
    dirs = [run / runs.BEST, run / runs.CHECKPOINTS] if which == "best" else [run / runs.CHECKPOINTS]
    for d in dirs:
        latest = tf.train.latest_checkpoint(str(d)) if d.is_dir() else None
        if latest:
            restore(tf.train.Checkpoint(model=model), latest, expect_partial=True)
            return model, tok, cfg, latest
    raise TrainError(f"{run}: no checkpoint in {runs.BEST}/ or {runs.CHECKPOINTS}/ (train first)")


def evaluate_translations(translator: Translator, sources: list[str], references: list[str]) -> dict:
    """Decode `sources` and score them against `references` with sacrebleu (detokenised BLEU and chrF)."""
    import sacrebleu
    t0 = time.perf_counter()
    hyps = translator.translate(sources)
    seconds = time.perf_counter() - t0
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    b, c = bleu.corpus_score(hyps, [references]), chrf.corpus_score(hyps, [references])
    return {"bleu": b.score, "chrf": c.score, "hypotheses": hyps, "seconds": seconds,
            "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature())}


class Trainer:
    """Model, optimizer, checkpoint and the step functions. `train()` drives it; the pieces are public so the
    cluster code and tests wrap them rather than copy them."""

    def __init__(self, cfg: Config, vocab_size: int, dist=None):
        self.cfg, self.dist = cfg, dist or Single()
        self.precision = choose_precision(cfg.train.precision, len(tf.config.list_physical_devices("GPU")))
        self.mixed = self.precision == "mixed_float16"
        tf.keras.utils.set_random_seed(cfg.train.seed)  # Python, NumPy and TF: same init on every run/rank
        self.model = build(cfg.model, vocab_size, dtype=self.precision)
        self.schedule = make_schedule(cfg.model, cfg.train, self.dist.size)
        self.optimizer = make_optimizer(self.schedule, cfg.train, self.precision)
        self.variables = self.model.trainable_variables
        _inner(self.optimizer).build(self.variables)  # slots exist now: restore and broadcast see them
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, step=self.step)
        self.accum = max(1, cfg.train.grad_accum)
        if self.accum > 1:
            self.accumulators = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self.variables]
        spec = [tf.TensorSpec([None, None], tf.int32)] * 2
        jit = bool(cfg.train.xla)
        self.train_step = tf.function(self._train_step, input_signature=spec, jit_compile=jit)
        self.accumulate = tf.function(self._accumulate, input_signature=spec, jit_compile=jit)
        self.apply_accumulated = tf.function(self._apply_accumulated)
        self.eval_step = tf.function(self._eval_step, input_signature=spec)

    def _forward(self, src, tgt):
        with tf.GradientTape() as tape:
            logits = self.model((src, tgt[:, :-1]), training=True)
            loss_sum, ntok = smoothed_loss(logits, tgt[:, 1:], self.cfg.model.label_smoothing)
            loss = loss_sum / tf.maximum(ntok, 1.0)
            scaled = self.optimizer.get_scaled_loss(loss) if self.mixed else loss
        return tape, loss, scaled, ntok

    def _gradients(self, tape, scaled):
        grads = tape.gradient(scaled, self.variables)
        return self.optimizer.get_unscaled_gradients(grads) if self.mixed else grads

    def _train_step(self, src, tgt):
        """One optimizer step on one batch: forward, all-reduced gradients (dist.tape), Adam update."""
        tape, loss, scaled, ntok = self._forward(src, tgt)
        grads = self._gradients(self.dist.tape(tape), scaled)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return loss, ntok

    def _accumulate(self, src, tgt):
        """Gradient accumulation, part 1: add this micro-batch's local gradients / grad_accum."""
        tape, loss, scaled, ntok = self._forward(src, tgt)
        for acc, g in zip(self.accumulators, self._gradients(tape, scaled)):
            acc.assign_add(tf.convert_to_tensor(g) / self.accum)
        return loss, ntok

    def _apply_accumulated(self):
        """Part 2: average the accumulated gradients over ranks (dist.mean), update, reset."""
        grads = [self.dist.mean(acc.read_value()) for acc in self.accumulators]
        self.optimizer.apply_gradients(zip(grads, self.variables))
        for acc in self.accumulators:
            acc.assign(tf.zeros_like(acc))

    def _eval_step(self, src, tgt):
        logits = self.model((src, tgt[:, :-1]), training=False)
        return smoothed_loss(logits, tgt[:, 1:], self.cfg.model.label_smoothing)

    def run_step(self, batches) -> tuple[float, int, int]:
        """One optimizer step over `grad_accum` (src, tgt) micro-batches -> (mean loss, src tokens, tgt tokens)."""
        losses, src_tok, tgt_tok = [], 0, 0
        for src, tgt in batches:
            fn = self.train_step if self.accum == 1 else self.accumulate
            loss, ntok = fn(src, tgt)
            losses.append(loss)
            src_tok += int(tf.math.count_nonzero(src))
            tgt_tok += int(ntok)
        if self.accum > 1:
            self.apply_accumulated()
        self.step.assign_add(1)
        return float(np.mean([float(l) for l in losses])), src_tok, tgt_tok

    def learning_rate(self) -> float:
        return float(self.schedule(_inner(self.optimizer).iterations))

    def sync_variables(self) -> None:
        """Every rank starts from rank 0's weights, optimizer slots and step (restored or fresh)."""
        self.dist.broadcast(self.model.variables + _optimizer_variables(self.optimizer) + [self.step])

    def eval_loss(self, dataset) -> float:
        total, count = 0.0, 0.0
        for src, tgt in dataset:
            s, n = self.eval_step(src, tgt)
            total, count = total + float(s), count + float(n)
        return total / max(count, 1.0)


# --- the loop -----------------------------------------------------------------------------------------

def _check_resumable(run: Path, cfg: Config, vocab_size: int) -> None:
    """An existing run's model section must match this one, or its checkpoints cannot be loaded."""
    path = run / runs.CONFIG
    if not path.exists():
        return
    try:
        old = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise TrainError(f"{path}: line {e.lineno}: not valid JSON; it should be the config this run started with") from None
    diffs = [f"model.{k}: {old.get('model', {}).get(k)!r} -> {v!r}" for k, v in cfg.to_dict()["model"].items()
             if old.get("model", {}).get(k) != v and k not in ("dropout", "label_smoothing")]
    if diffs:
        raise CheckpointError(f"{path}: this run's checkpoints were trained with a different model ({'; '.join(diffs)}); "
                              "train into a new --logdir, or use the original model settings")


def _status(run: Path, **fields) -> None:
    path = run / runs.STATUS
    old = {}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except json.JSONDecodeError:
            old = {}
    old.update(fields, updated=time.time())
    atomic_write_json(path, old)


def _finished_summary(run: Path, step: int, total: int) -> dict | None:
    """The stored summary of a run that already reached `total` steps, else None."""
    path = run / runs.STATUS
    if step < total or not path.exists():
        return None
    try:
        state = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    if state.get("status") != "finished" or not state.get("summary"):
        return None
    return dict(state["summary"])


def train(cfg: Config, run_dir: str | os.PathLike, *, data_dir: str | os.PathLike | None = None, dist=None,
          on_log: Callable[[dict], None] | None = None, resume: bool = True, progress: bool | None = None) -> dict:
    """Train (or resume) a run; returns a summary dict (status, step, losses, BLEU, timing).

    `progress`: a tqdm bar on rank 0 (default: when interactive, single process and no on_log publisher).
    """
    from nmtkit.data.bpe import Tokenizer
    from nmtkit.data.pipeline import make_dataset, read_split

    dist = dist or Single()
    run = Path(run_dir)
    data_dir = Path(data_dir or cfg.data.dir)
    cfg = cfg.with_overrides({"data.dir": str(data_dir)})  # config.json records the data this run used
    chief = dist.is_chief
    if not (data_dir / "spm.model").exists():
        raise TrainError(f"{data_dir}/spm.model: no prepared data here; run `nmtkit prepare` "
                         f"(or nmtkit.data.prepare.prepare(cfg)) first, or pass the right --data")
    tok = Tokenizer.from_data_dir(data_dir)

    ckpt_dir = run / runs.CHECKPOINTS
    has_ckpt = tf.train.latest_checkpoint(str(ckpt_dir)) is not None
    if has_ckpt and not resume:
        raise TrainError(f"{ckpt_dir}: holds checkpoints and resume is off (--fresh); "
                         "choose a new --logdir or delete that directory")
    if has_ckpt:
        _check_resumable(run, cfg, tok.vocab_size)

    trainer = Trainer(cfg, tok.vocab_size, dist)
    manager = tf.train.CheckpointManager(trainer.checkpoint, str(ckpt_dir), max_to_keep=cfg.train.keep_checkpoints,
                                         checkpoint_name="ckpt")
    best_manager = tf.train.CheckpointManager(trainer.checkpoint, str(run / runs.BEST), max_to_keep=1,
                                              checkpoint_name="best")
    if manager.latest_checkpoint:
        restore(trainer.checkpoint, manager.latest_checkpoint)
    trainer.sync_variables()
    start_step = int(trainer.step.numpy())
    total = cfg.train.steps
    n_params = count_params(trainer.model)
    done = _finished_summary(run, start_step, total)
    if done is not None:  # nothing to train: don't re-evaluate or overwrite the finished run's record
        if chief:
            print(f"run already finished at step {start_step} (train.steps={total}); raise train.steps to continue",
                  flush=True)
        return done

    if chief:
        run.mkdir(parents=True, exist_ok=True)
        cfg.save(run / runs.CONFIG)
        for name in SPM_FILES:
            if (data_dir / name).exists():
                shutil.copyfile(data_dir / name, run / name)
        if (data_dir / runs.DATA_STATS).exists():
            shutil.copyfile(data_dir / runs.DATA_STATS, run / runs.DATA_STATS)
        _status(run, status="running", step=start_step, total_steps=total, ranks=dist.size, host=dist.host,
                pid=os.getpid(), started=time.time(), precision=trainer.precision, dist=dist.describe(),
                params=n_params, resumed_from=start_step or None, error=None)
        best_path = run / runs.BEST / "best.json"
        best_bleu = json.loads(best_path.read_text())["bleu"] if best_path.exists() else -1.0
        print(f"{dist.describe()} | {trainer.precision} | {n_params:,} parameters | "
              f"{'resuming at step ' + str(start_step) if start_step else 'fresh start'} -> {total} steps", flush=True)

    peak, peak_source = peak_flops(trainer.precision)  # before the input pipeline's threads start
    ds = make_dataset(data_dir, "train", cfg.data, rank=dist.rank, size=dist.size, seed=cfg.train.seed,
                      shuffle=True, repeat=True)
    if start_step:
        # the exact data position of an uninterrupted run (costs one pass over the skipped batches)
        ds = ds.skip(start_step * trainer.accum)
    batches = iter(ds)

    scalars = _Scalars(run, chief)
    rank_log = runs.rank_log(run, dist.rank)
    translator = Translator(trainer.model, tok, cfg.eval.beam_size, cfg.eval.length_penalty,
                            cfg.eval.max_extra_len) if chief else None
    dev_src, dev_ref = read_split(data_dir, "dev") if chief else ([], [])
    if cfg.eval.dev_sentences:
        dev_src, dev_ref = dev_src[:cfg.eval.dev_sentences], dev_ref[:cfg.eval.dev_sentences]

    def evaluate(step: int) -> dict:
        nonlocal best_bleu
        dev = make_dataset(data_dir, "dev", cfg.data, shuffle=False, repeat=False)
        ev = evaluate_translations(translator, dev_src, dev_ref)
        ev["eval_loss"] = trainer.eval_loss(dev)
        write_lines_atomic(run / runs.TRANSLATIONS / f"dev.{step}.de", ev["hypotheses"])
        scalars.write(step, {"eval_loss": ev["eval_loss"], "Eval_BLEU_Score": ev["bleu"], "eval_chrF": ev["chrf"]})
        if ev["bleu"] > best_bleu:
            best_bleu = ev["bleu"]
            best_manager.save(checkpoint_number=step)
            atomic_write_json(run / runs.BEST / "best.json", {"step": step, "bleu": ev["bleu"], "chrf": ev["chrf"]})
        print(f"eval step {step} | eval_loss {ev['eval_loss']:.3f} | dev BLEU {ev['bleu']:.2f} | chrF {ev['chrf']:.2f} "
              f"| best {best_bleu:.2f} | {len(dev_src)} sentences in {ev['seconds']:.1f}s", flush=True)
        return ev

    sampler = None
    if cfg.monitor.enabled:
        try:
            from nmtkit.monitor import Sampler
            sampler = Sampler(runs.monitor_log(run, dist.host, dist.rank), interval=cfg.monitor.interval,
                              rank=dist.rank, host=dist.host,
                              tb_dir=run / runs.MONITOR_DIR / "tb" if chief else None).start()
        except ImportError:
            sampler = None

    if progress is None:
        progress = _interactive() and dist.size == 1 and on_log is None
    bar = None
    if chief and progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=total, initial=start_step, desc="train", unit="step", dynamic_ncols=True)

    flag = _StopFlag()
    status, step, last_saved = "running", start_step, start_step
    window = {"loss": [], "time": 0.0, "steps": 0, "tokens": 0, "flops": 0.0}
    last_eval: dict = {}
    history: list[dict] = []
    t_start = time.time()
    step_times: list[float] = []
    try:
        with _stop_on_signals(flag):
            while step < total:
                if dist.any(flag.requested):
                    status = "stopped"
                    break
                t0 = time.perf_counter()
                micro = [next(batches) for _ in range(trainer.accum)]
                loss, src_tok, tgt_tok = trainer.run_step(micro)
                dt = time.perf_counter() - t0
                step += 1
                step_times.append(dt)
                append_jsonl(rank_log, {"step": step, "wall_time": time.time(), "step_time": dt, "loss": loss,
                                        "tokens": src_tok + tgt_tok, "rank": dist.rank, "host": dist.host})
                src_len = max(int(b[0].shape[1]) for b in micro)
                tgt_len = max(int(b[1].shape[1]) for b in micro)
                window["loss"].append(loss)
                window["time"] += dt
                window["steps"] += 1
                window["tokens"] += src_tok + tgt_tok
                window["flops"] += train_flops(cfg.model, tok.vocab_size, src_tok, tgt_tok, src_len, tgt_len)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss:.3f}", refresh=False)

                if step % cfg.train.log_every == 0 or step == total:
                    tokens = dist.sum(window["tokens"])  # all ranks, this window
                    flops = dist.sum(window["flops"])
                    sec = window["time"] / window["steps"]
                    rec = {"step": step, "total_steps": total, "rank": dist.rank, "host": dist.host,
                           "loss": float(np.mean(window["loss"])), "lr": trainer.learning_rate(),
                           "step_time": sec, "steps_per_sec": 1.0 / sec, "tokens_per_sec": tokens / window["time"],
                           "mfu": flops / window["time"] / (peak * dist.size), "elapsed": time.time() - t_start}
                    history.append(rec)
                    if chief:
                        scalars.write(step, {"train_loss": rec["loss"], "learning_rate": rec["lr"],
                                             "global_step/sec": rec["steps_per_sec"],
                                             "tokens_per_sec": rec["tokens_per_sec"], "step_time": sec})
                        line = (f"step {step}/{total} | loss {rec['loss']:.3f} | lr {rec['lr']:.1e} | "
                                f"{sec * 1000:.1f} ms/step | {rec['tokens_per_sec']:,.0f} tok/s | MFU {rec['mfu'] * 100:.1f}%")
                        (bar.write if bar is not None else print)(line)
                        sys.stdout.flush()
                    if on_log is not None:
                        on_log(rec)
                    window = {"loss": [], "time": 0.0, "steps": 0, "tokens": 0, "flops": 0.0}

                if chief and cfg.train.ckpt_every and step % cfg.train.ckpt_every == 0:
                    manager.save(checkpoint_number=step)
                    last_saved = step
                    _status(run, step=step)
                if chief and cfg.eval.every and step % cfg.eval.every == 0 and step < total:
                    last_eval = evaluate(step)
            else:
                status = "finished"
    except KeyboardInterrupt:  # a second Ctrl-C, or no handler (not the main thread): still leave a checkpoint
        status = "stopped"
    except BaseException as e:
        if chief:
            _status(run, status="failed", step=step, error=f"{type(e).__name__}: {e}"[:500])
        if bar is not None:
            bar.close()
        if sampler is not None:
            sampler.stop()
        scalars.close()
        raise

    if bar is not None:
        bar.close()
    summary = {"status": status, "step": step, "total_steps": total, "params": n_params,
               "precision": trainer.precision, "ranks": dist.size,
               "train_loss": history[-1]["loss"] if history else None,
               "wall_time": time.time() - t_start,
               "avg_step_time": float(np.mean(step_times[1:])) if len(step_times) > 1 else None,
               "peak_flops": peak, "peak_source": peak_source}
    if history:
        summary.update(tokens_per_sec=history[-1]["tokens_per_sec"], mfu=history[-1]["mfu"])
    try:
        if chief:
            if step != last_saved or not manager.latest_checkpoint:
                manager.save(checkpoint_number=step)
            if status == "stopped":
                print(f"stopped at step {step} ({flag.signal or 'interrupt'}); checkpoint saved, "
                      f"train again with the same run directory to resume", flush=True)
            if status == "finished":
                last_eval = evaluate(step)
                test_src, test_ref = read_split(data_dir, "test")
                if cfg.eval.test_sentences:
                    test_src, test_ref = test_src[:cfg.eval.test_sentences], test_ref[:cfg.eval.test_sentences]
                test = evaluate_translations(translator, test_src, test_ref)
                write_lines_atomic(run / runs.TRANSLATIONS / f"test.{step}.de", test["hypotheses"])
                print(f"test BLEU {test['bleu']:.2f} | chrF {test['chrf']:.2f} | {len(test_src)} sentences in "
                      f"{test['seconds']:.1f}s | {test['bleu_signature']}", flush=True)
                summary.update(test_bleu=test["bleu"], test_chrf=test["chrf"], test_seconds=test["seconds"],
                               bleu_signature=test["bleu_signature"], chrf_signature=test["chrf_signature"])
            if last_eval:
                summary.update(eval_loss=last_eval["eval_loss"], bleu=last_eval["bleu"], chrf=last_eval["chrf"],
                               best_bleu=best_bleu)
            _status(run, status=status, step=step, summary={k: v for k, v in summary.items()
                                                            if isinstance(v, (int, float, str, type(None)))})
    except BaseException as e:
        if chief:
            _status(run, status="failed", step=step, error=f"{type(e).__name__}: {e}"[:500])
        raise
    finally:
        if sampler is not None:
            sampler.stop()
        scalars.close()
    return summary
