"""One GPU-shaped process, run by tests/test_gpushape.py under the switch: `python one_process.py DATA OUT`.

What each GPU branch decided, then 3 steps of `train()` (notebook 02's and `nmtkit train`'s path) in float32 and in
train.precision=auto; prints one line `RESULT {json}` for the test to judge. Nothing is asserted here.
"""
from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import nmtkit  # noqa: F401  (Keras 2 API before TensorFlow)
from nmtkit import config
from nmtkit.keras2 import import_tf

tf = import_tf()

SMALL = {"data.train_size": 4000, "data.dev_size": 40, "data.test_size": 40, "data.vocab_size": 400,
         "data.batch_sentences": 32, "model.d_model": 64, "model.d_ff": 128, "model.num_heads": 4,
         "model.encoder_layers": 1, "model.decoder_layers": 1, "train.steps": 3, "train.log_every": 1,
         "train.warmup_steps": 3, "train.lr_scale": 1.0, "model.dropout": 0.0, "train.ckpt_every": 0,
         "eval.every": 0, "eval.dev_sentences": 8, "eval.test_sentences": 8, "eval.max_extra_len": 2,
         "monitor.enabled": False}  # tests/conftest.py's small_config, whose corpus DATA is


def three_variables(precision: str, jit: bool | None = None) -> tuple[bool, list]:
    """(jit_compile as used, 3 variables after 2 updates of FusedAdam inside one tf.function, as the trainer applies
    them); jit_compile as tf-keras constructs it (None: True wherever a GPU is listed) or set after construction;
    under mixed_float16 through the loss scale. tests/test_gpushape.py calls it in-process too."""
    from nmtkit.training.schedule import FusedAdam
    inner = FusedAdam(learning_rate=0.01)
    if jit is not None:
        inner.jit_compile = jit
    opt = tf.keras.mixed_precision.LossScaleOptimizer(inner) if precision == "mixed_float16" else inner
    vs = [tf.Variable(tf.fill(shape, 0.5), name=f"v{i}") for i, shape in enumerate(([3], [2, 2], [4, 1]))]

    @tf.function(autograph=False)
    def step():
        with tf.GradientTape() as tape:
            loss = sum(tf.reduce_sum(tf.square(v - 0.1 * (i + 1))) for i, v in enumerate(vs))
            scaled = opt.get_scaled_loss(loss) if precision == "mixed_float16" else loss
        grads = tape.gradient(scaled, vs)
        opt.apply_gradients(zip(opt.get_unscaled_gradients(grads) if precision == "mixed_float16" else grads, vs))
    for _ in range(2):
        step()
    return inner.jit_compile, [v.numpy().ravel().tolist() for v in vs]


def attempt(res: dict, key: str, fn) -> None:
    """res[key] = fn(), or {"error": its last lines}: one broken branch does not hide the others."""
    try:
        res[key] = fn()
    except Exception:  # noqa: BLE001  reported to the test, which fails on it
        res[key] = {"error": traceback.format_exc(limit=-3)[-3000:]}


def main(data: Path, out: Path) -> dict:
    from nmtkit.gpus import gpu_memory
    from nmtkit.model.memory import fit
    from nmtkit.training.dist import Horovod
    from nmtkit.training.loop import train
    from nmtkit.training.precision import decide_precision
    from nmtkit.training.schedule import FusedAdam, make_optimizer, make_schedule
    from nmtkit.training.trainer import _inner, _kept, gpu_capabilities
    cfg = config.profile("tiny").with_overrides(SMALL)
    res: dict = {"gpus": [d.name for d in tf.config.list_physical_devices("GPU")]}

    def run(precision: str) -> dict:
        logs: list[dict] = []
        summary = train(cfg.with_overrides({"train.precision": precision}), out / precision, data_dir=data,
                        on_log=logs.append, progress=False)
        trainer = _kept[0]  # the Trainer this run trained (kept: a small model)
        status = json.loads((out / precision / "run.json").read_text())
        return {"status": summary["status"], "step": summary["step"], "precision": summary["precision"],
                "losses": [r["loss"] for r in logs if "loss" in r],
                "micro_batches": status.get("micro_batches"), "device_memory_gib": status.get("device_memory_gib"),
                "towers": trainer.towers, "xla": trainer.xla, "optimizer_jit": _inner(trainer.optimizer).jit_compile}
    for precision in ("float32", "auto"):  # auto: what the GPU's compute capability decides
        attempt(res, precision, lambda: run(precision))
    res["threads"] = (tf.config.threading.get_intra_op_parallelism_threads(),
                      tf.config.threading.get_inter_op_parallelism_threads())
    caps = gpu_capabilities(tf)
    res["capabilities"], res["decide_precision"] = caps, decide_precision("auto", caps)[0]
    # tf-keras's own decision, as constructed (its Adam and the kit's subclass), then the optimizer the kit builds
    res["keras_adam_jit"], res["fused_adam_jit"] = tf.keras.optimizers.Adam().jit_compile, FusedAdam().jit_compile
    for precision in ("float32", "mixed_float16"):
        res[f"kit_optimizer_jit_{precision}"] = _inner(
            make_optimizer(make_schedule(cfg.model, cfg.train), cfg.train, precision)).jit_compile
        attempt(res, f"jit_{precision}", lambda: list(three_variables(precision)))
        attempt(res, f"nojit_{precision}", lambda: list(three_variables(precision, jit=False)))
    base = config.profile("wmt16-base")  # the profile's own batch on this (fake) card, at the precision auto picks
    micro = fit(base, base.data.vocab_size, gpu_memory() if caps else None, res["decide_precision"])
    res["wmt16_base"] = {"batch": base.data.batch_sentences, "device_bytes": micro.device_bytes,
                         "micro_batches": micro.count}
    hvd = Horovod()  # one rank, no launcher: which allreduce its step would use
    res["horovod"] = {"fused": hvd.fused, "describe": hvd.describe(), "pinned": hvd.pinned}
    return res


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2])), default=str), flush=True)
