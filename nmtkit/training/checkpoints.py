"""Checkpoints: where they are, whether a run can resume from them, restoring them, and loading a trained model.

A TF checkpoint is `checkpoint` (a text index naming the latest), `<prefix>.index` (which tensor is where) and
`<prefix>.data-00000-of-00001` (the values). Rank 0 writes them through a tf.train.CheckpointManager into
<run>/checkpoints/ (every train.ckpt_every steps and at the end) and <run>/checkpoints/best/ (best dev BLEU).
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from nmtkit import runs
from nmtkit.config import Config
from nmtkit.errors import ConfigError, RunDirError, TrainError
from nmtkit.keras2 import import_tf
from nmtkit.model.transformer import build

tf = import_tf()

SPM_FILES = ("spm.model", "spm.vocab")
# model settings a run may change on resume: they do not change the variables' shapes
RESUMABLE_CHANGES = ("dropout", "label_smoothing")
DATA_DIR = f"{runs.CHECKPOINTS}/data"  # the input pipelines' positions (DataPosition)


_PREFIX = re.compile(r"^(ckpt|best)-(\d+)\.index$")  # CheckpointManager's <checkpoint_name>-<step>
_TEMP = re.compile(r"^(ckpt|best)-\d+_temp$")  # where TF writes a save before renaming it into place


def checkpoint_files(run: str | os.PathLike, best: bool = False) -> list[dict]:
    """The files that make up the latest checkpoint of a run (or the best one): name and size in MB (10^6 bytes).

    The data file holds the weights plus Adam's two moment estimates per weight, so it is about 3x the size of
    the weights alone.

    Introduced in notebook 02_single_gpu_baseline.
    """
    d = Path(run) / (runs.BEST if best else runs.CHECKPOINTS)
    latest = tf.train.latest_checkpoint(str(d))
    if latest is None:
        raise TrainError(f"{d}: no checkpoint here (train first, or check the run directory)")
    prefix = Path(latest).name
    files = [d / "checkpoint"] + sorted(p for p in d.iterdir() if p.name.startswith(prefix + "."))
    return [{"file": p.name, "MB": round(p.stat().st_size / 1e6, 3)} for p in files]


def tokenizer_for(run: str | os.PathLike, data_dir: str | os.PathLike | None = None):
    """The run's own copy of the BPE model (copied at the start of training), else the data directory's."""
    from nmtkit.data.bpe import Tokenizer
    own = Path(run) / "spm.model"
    if own.exists():
        return Tokenizer(own)
    return Tokenizer.from_data_dir(Path(data_dir or runs.load_config(run).data.dir))


def copy_data_files(data_dir: Path, run: Path) -> None:
    """The BPE model and data stats travel with the run: load_model and the analysis need no data directory."""
    for name in SPM_FILES + (runs.DATA_STATS,):
        if (data_dir / name).exists():
            shutil.copyfile(data_dir / name, run / name)


def _why(e: Exception) -> str:
    msg = str(e).strip()
    return (msg.splitlines()[0] if msg else type(e).__name__)[:300]


def restore(ckpt, path: str, expect_partial: bool = False, unused_ok: bool = False):
    """Restore `ckpt` from `path` or raise TrainError naming the file. `unused_ok`: every object of `ckpt` must
    restore, and values of the checkpoint that `ckpt` has no object for are fine (no warnings about them)."""
    try:
        status = ckpt.restore(path)
        if expect_partial:
            status.expect_partial()
        else:
            status.assert_existing_objects_matched()
            if unused_ok:
                status.expect_partial()
    except (tf.errors.OpError, ValueError, AssertionError, IndexError) as e:  # IndexError: a data file cut short
        raise TrainError(f"{path}.index: cannot restore this checkpoint ({_why(e)}); it is corrupted (e.g. a "
                              "copy cut short) or was written by a different model configuration") from None
    return status


LOSS_SCALE_KEY = "optimizer/loss_scale/"  # where a mixed_float16 run's LossScaleOptimizer keeps its dynamic scale


def precision_view(checkpoint, path: str) -> tuple[object, bool, str]:
    """(what to restore `path` into, whether its values may go unused, a line saying what changed; '' when
    nothing did) for a run resumed in another precision. tf-keras's LossScaleOptimizer keeps the inner Adam's
    variables under the same names as a plain Adam, and adds its loss scale: a float32 checkpoint restores into
    the inner optimizer (the loss scale starts afresh, as in a new mixed_float16 run), and a mixed_float16 one into
    a float32 run leaves its loss scale unused."""
    try:
        scaled = any(name.startswith(LOSS_SCALE_KEY) for name, _ in tf.train.list_variables(path))
    except (tf.errors.OpError, ValueError):
        return checkpoint, False, ""  # unreadable: restore() names it
    optimizer = getattr(checkpoint, "optimizer", None)
    inner = getattr(optimizer, "inner_optimizer", None)
    if inner is not None and not scaled:
        # the loss scale is tracked as one of the optimizer's children (tf-keras delegates its tracking to the inner
        # Adam): restore every child but that one, under the names a plain Adam's checkpoint uses
        children = optimizer._trackable_children(save_type="checkpoint")
        without = tf.train.Checkpoint(**{k: v for k, v in children.items() if k != "loss_scale"})
        view = tf.train.Checkpoint(model=checkpoint.model, optimizer=without, step=checkpoint.step)
        return view, False, (f"{Path(path).name} was written without a loss scale (float32): resuming in "
                             "mixed_float16, its dynamic loss scale starts afresh")
    if optimizer is not None and inner is None and scaled:
        return checkpoint, True, (f"{Path(path).name} was written in mixed_float16: resuming in float32, its loss "
                                  "scale is not used")
    return checkpoint, False, ""


@dataclass(frozen=True)
class Restored:
    """A trained model back from a run's checkpoint, with what it needs to translate."""

    model: object        # the Transformer (tf.keras.Model)
    tokenizer: object    # nmtkit.data.bpe.Tokenizer: the run's own spm.model
    config: Config       # the run's config.json
    checkpoint: str      # the checkpoint's path prefix (…/ckpt-N)

    def fp16_gradients(self, batch, scale: float | None = None):
        """What float16 does to this model's gradients on `batch`, unscaled and loss-scaled (nmtkit.training.fp16;
        notebook 02's mixed-precision section)."""
        from nmtkit.training import fp16
        return fp16.fp16_gradients(self, batch, fp16.INITIAL_SCALE if scale is None else scale)

    def mixed_dtypes(self, batch) -> dict:
        """The dtypes of this model's weights, compute and gradients under mixed_float16 (nmtkit.training.fp16)."""
        from nmtkit.training import fp16
        return fp16.mixed_dtypes(self.config, self.tokenizer.vocab_size, batch)


def load_model(run: str | os.PathLike, which: str = "best") -> Restored:
    """A run's model from its checkpoint: `which` is "best" (falls back to latest) or "latest".

    Introduced in notebook 02_single_gpu_baseline."""
    run = Path(run)
    cfg = runs.load_config(run)
    tok = tokenizer_for(run)
    model = build(cfg.model, tok.vocab_size)
    dirs = [run / runs.BEST, run / runs.CHECKPOINTS] if which == "best" else [run / runs.CHECKPOINTS]
    for d in dirs:
        latest = tf.train.latest_checkpoint(str(d)) if d.is_dir() else None
        if latest:
            restore(tf.train.Checkpoint(model=model), latest, expect_partial=True)
            return Restored(model, tok, cfg, latest)
    raise TrainError(f"{run}: no checkpoint in {runs.BEST}/ or {runs.CHECKPOINTS}/ (train first)")


def _check_resumable(run: Path, cfg: Config, resume: bool = True) -> None:
    """A run with checkpoints resumes only when asked to and with the model its checkpoints were trained with."""
    ckpt_dir = run / runs.CHECKPOINTS
    if not on_disk(ckpt_dir):
        return
    if not resume:
        raise TrainError(f"{ckpt_dir}: holds checkpoints and resume is off (--fresh); "
                         "choose a new --logdir or delete that directory")
    if not (run / runs.CONFIG).exists():
        return
    try:
        old = runs.load_config(run).to_dict()["model"]
    except ConfigError as e:
        raise TrainError(f"{e}; it should be the config this run started with") from None
    diffs = [f"model.{k}: {old.get(k)!r} -> {v!r}" for k, v in cfg.to_dict()["model"].items()
             if old.get(k) != v and k not in RESUMABLE_CHANGES]
    if diffs:
        raise TrainError(f"{run / runs.CONFIG}: this run's checkpoints were trained with a different model "
                              f"({'; '.join(diffs)}); train into a new --logdir, or use the original model settings")


def on_disk(directory: Path) -> list[str]:
    """The checkpoint prefixes in `directory` (those with an .index file), newest step first."""
    if not directory.is_dir():
        return []
    found = [(int(m.group(2)), str(directory / p.name[:-len(".index")]))
             for p in directory.iterdir() if (m := _PREFIX.match(p.name))]
    return [path for _, path in sorted(found, reverse=True)]


class Checkpoints:
    """A run's checkpoints (rank 0 saves): checkpoints/ckpt-<step> every train.ckpt_every steps and at the end,
    checkpoints/best/best-<step> at the best dev BLEU. Saves check the free disk first."""

    def __init__(self, checkpoint, run: Path, keep: int, state_bytes: int):
        self.checkpoint, self.run, self.state_bytes = checkpoint, run, state_bytes
        self.latest = tf.train.CheckpointManager(checkpoint, str(run / runs.CHECKPOINTS), max_to_keep=keep,
                                                 checkpoint_name="ckpt")
        self.best = tf.train.CheckpointManager(checkpoint, str(run / runs.BEST), max_to_keep=1,
                                               checkpoint_name="best")

    def clean_interrupted_saves(self) -> list[Path]:
        """Remove the `<name>-<step>_temp` directories of saves cut short (the kit's own, nothing else)."""
        removed = []
        for d in (self.run / runs.CHECKPOINTS, self.run / runs.BEST):
            for p in (d.iterdir() if d.is_dir() else ()):
                if p.is_dir() and _TEMP.match(p.name):
                    shutil.rmtree(p)
                    removed.append(p)
        return removed

    def restore(self, log=print) -> str | None:
        """Restore the newest checkpoint that restores (None when there is none). A newer one that does not is
        named in one line with the one used instead; when none restores, TrainError. Nothing is deleted."""
        failed: list[tuple[str, str]] = []
        for path in on_disk(self.run / runs.CHECKPOINTS):
            view, unused_ok, changed = precision_view(self.checkpoint, path)
            try:
                restore(view, path, unused_ok=unused_ok)
            except TrainError as e:
                failed.append((Path(path).name, str(e).split(": ", 1)[1]))
                continue
            if changed:
                log(changed, flush=True)
            if failed:
                log(f"checkpoint {failed[0][0]} does not restore ({failed[0][1]}); resuming from {Path(path).name} "
                    f"instead", flush=True)
            return path
        if failed:
            names = ", ".join(name for name, _ in failed)
            raise TrainError(f"{self.run / runs.CHECKPOINTS}: none of its checkpoints restores ({names}; newest: "
                                  f"{failed[0][1]}); they are left as they are: put back a good copy, or train into "
                                  "a new --logdir")
        return None

    def save(self, step: int, best: bool = False) -> str:
        """Save after checking the free disk: the size of the previous checkpoint, else of the variables."""
        manager = self.best if best else self.latest
        d = Path(manager.directory)
        d.mkdir(parents=True, exist_ok=True)
        previous = manager.latest_checkpoint
        need = sum(p.stat().st_size for p in d.glob(Path(previous).name + ".*")) if previous else 0
        need = int(1.1 * (need or self.state_bytes))
        free = shutil.disk_usage(d).free
        if free < need:
            raise TrainError(f"{d}: not enough free disk for a checkpoint (about {need:,} bytes needed, "
                                  f"{free:,} free); free some space and train again to resume")
        return manager.save(checkpoint_number=step)


class DataPosition:
    """Where a rank's input pipeline is: a tf.data iterator checkpoint per rank (checkpoints/data/rank<R>/data-<step>,
    written by every rank when rank 0 saves the model), so a resume reads on from the next batch of the
    uninterrupted run instead of replaying the batches before it."""

    def __init__(self, run: Path, rank: int, iterator, keep: int):
        self.iterator, self.checkpoint = iterator, tf.train.Checkpoint(iterator=iterator)
        self.directory = run / DATA_DIR / f"rank{rank}"
        self.manager = tf.train.CheckpointManager(self.checkpoint, str(self.directory), max_to_keep=keep,
                                                  checkpoint_name="data")

    @classmethod
    def open(cls, dataset, run: Path, rank: int, step: int, batches: int, keep: int) -> "DataPosition":
        """The iterator over `dataset` at `step` (`batches` batches per step): restored from the saved position,
        else (a run from before positions were saved) by reading and dropping the batches before it."""
        position = cls(run, rank, iter(dataset), keep)
        if not step or position.restore(step):
            return position
        print(f"no saved data position for step {step} in {position.directory}; reading past "
              f"{step * batches:,} batches to reach it", flush=True)
        return cls(run, rank, iter(dataset.skip(step * batches)), keep)

    def restore(self, step: int) -> bool:
        path = self.directory / f"data-{step}"
        if not path.with_name(path.name + ".index").exists():
            return False
        try:
            self.checkpoint.read(str(path)).assert_existing_objects_matched().expect_partial()
        except (tf.errors.OpError, ValueError, AssertionError):
            return False
        return True

    def save(self, step: int) -> None:
        if self.manager.latest_checkpoint != str(self.directory / f"data-{step}"):
            self.manager.save(checkpoint_number=step)


def finished_summary(run: Path, step: int, total: int) -> dict | None:
    """The stored summary of a run that already reached `total` steps, else None."""
    if step < total:
        return None
    try:
        state = runs.read_status(run)
    except RunDirError:
        return None
    if state.get("status") != "finished" or not state.get("summary"):
        return None
    return dict(state["summary"])
