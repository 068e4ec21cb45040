"""Question 3's deciding measurement: the loss in evaluation mode (dropout off) on a slice of the training data,
against the same on the dev set, from a run's checkpoint.

The logged train loss has dropout on and eval loss has it off, so their gap mixes dropout with memorisation; in
evaluation mode on both, a training-slice loss far below the dev loss is memorisation, and nothing else. Needs
TensorFlow, the checkpoint's weights and the prepared data (the shipped reference run has no weights).

    losses = eval_mode_losses(run)   # {"train_slice": ..., "dev": ..., "batches": 10, "checkpoint": ...}
"""
from __future__ import annotations

from pathlib import Path

from nmtkit.errors import TrainError


def eval_mode_losses(run, data_dir: str | Path | None = None, batches: int = 10) -> dict:
    """Mean label-smoothed loss per target token, dropout off, on the first `batches` batches of the training split
    (unshuffled: the same slice every time) and of the dev split, with the run's latest checkpoint."""
    import nmtkit  # noqa: F401  Keras 2 before TensorFlow
    from nmtkit import runs
    from nmtkit.data.pipeline import make_dataset
    from nmtkit.keras2 import import_tf
    from nmtkit.model.transformer import smoothed_loss
    from nmtkit.training.checkpoints import load_model
    tf = import_tf()
    run = Path(getattr(run, "path", run))
    if not list((run / runs.CHECKPOINTS).glob("*.index")):
        raise TrainError(f"{run.name}: no checkpoint weights under {runs.CHECKPOINTS}/ (the reference run ships "
                           f"only their listing); use a run you trained")
    restored = load_model(run, "latest")
    cfg = restored.config
    data = Path(data_dir or cfg.data.dir)
    if not (data / "train.en.ids.npy").exists():
        raise TrainError(f"{run.name}: no prepared data in {data.name}/ (the config's data.dir); pass data_dir")

    def sums(src, tgt):
        return smoothed_loss(restored.model((src, tgt[:, :-1]), training=False), tgt[:, 1:], cfg.model.label_smoothing)
    # one trace for every batch shape: eagerly, each of the 20 batches took as long as the trace (bench/README.md)
    step = tf.function(sums, input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2, autograph=False)

    def mean_loss(split: str) -> float:
        total = count = 0.0
        for src, tgt in make_dataset(data, split, cfg.data, shuffle=False, repeat=False).take(batches):
            s, n = step(src, tgt)
            total, count = total + float(s), count + float(n)
        return total / max(count, 1.0)

    return {"train_slice": mean_loss("train"), "dev": mean_loss("dev"), "batches": batches,
            "checkpoint": Path(restored.checkpoint).name if restored.checkpoint else None}


def describe(run, batches: int = 10) -> str:
    """One line for notebook 05: the two eval-mode losses and their gap, or why they cannot be measured."""
    try:
        x = eval_mode_losses(run, batches=batches)
    except TrainError as e:
        return f"eval-mode losses: cannot measure: {e}"
    return (f"eval-mode losses with {x['checkpoint']} ({batches} batches each, dropout off): training slice "
            f"{x['train_slice']:.3f}, dev {x['dev']:.3f}, dev minus training slice {x['dev'] - x['train_slice']:+.3f}")
