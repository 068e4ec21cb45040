"""Issue 69, item 4: a run resumes in the other precision. A run begun on a CPU (or with train.precision=float32)
and resumed on a GPU under auto builds a LossScaleOptimizer whose loss scale its checkpoints lack; the kit called
every such checkpoint corrupted. float32 -> mixed_float16 -> float32, on this CPU."""
from pathlib import Path

import numpy as np

from nmtkit.keras2 import import_tf
from nmtkit.training.checkpoints import Checkpoints
from nmtkit.training.trainer import Trainer, _optimizer_variables

from conftest import small_config

tf = import_tf()


def batch(seed: int):
    r = np.random.default_rng(seed)
    return [(tf.constant(r.integers(4, 400, (8, 10)), tf.int32), tf.constant(r.integers(4, 400, (8, 11)), tf.int32))]


def trainer(precision: str) -> Trainer:
    return Trainer(small_config(**{"train.precision": precision}), 400)


def state(t: Trainer) -> list:
    return [v.numpy() for v in t.model.variables + _optimizer_variables(t.optimizer) + [t.step]]


def resumed(precision: str, run: Path) -> tuple[Trainer, list[str]]:
    t, said = trainer(precision), []
    assert Checkpoints(t.checkpoint, run, 3, t.state_bytes()).restore(log=lambda m, **_: said.append(m))
    return t, said


def trained(t: Trainer, run: Path, steps: int) -> list:
    for i in range(steps):
        t.run_step(batch(int(t.step.numpy()) + i))
    Checkpoints(t.checkpoint, run, 3, t.state_bytes()).save(int(t.step.numpy()))
    return state(t)


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def test_float32_and_mixed_float16_checkpoints_resume_in_the_other_precision(tmp_path):
    saved = trained(trainer("float32"), tmp_path, 2)
    mixed, said = resumed("mixed_float16", tmp_path)
    assert mixed.precision == "mixed_float16" and int(mixed.step.numpy()) == 2
    assert same(state(mixed), saved), "the float32 run's weights and Adam slots did not come back"
    assert float(mixed.optimizer.loss_scale) == 2.0**15 and "loss scale starts afresh" in said[0]
    saved = trained(mixed, tmp_path, 1)  # trains on from there, and its checkpoint now holds a loss scale
    back, said = resumed("float32", tmp_path)
    assert int(back.step.numpy()) == 3 and same(state(back), saved)
    assert "written in mixed_float16" in said[0]
