"""Shared pytest fixtures. Keep each engineer's fixtures in its own section."""
import os
from pathlib import Path

import pytest

import nmtkit  # noqa: F401  (Keras 2 API before TensorFlow)

# --- a student release's `make test` (nmtkit release writes RELEASE.md) ---------------------------------------

# The test files that check a student's install and what the student runs: the stack and its pins, the corpus and BPE,
# training and its logs, two local ranks under Horovod, the CLI, the doctor, the course runner and the browser. In a
# release they are its `make test` (minutes on a laptop); the others check the kit's engineering (GPU decisions,
# Slurm, multi-host, the memory fit, the front door's design, the model's numerics) and run in the kit's own
# `make test` on the same code. A release ships them all to read; NMTKIT_ALL_TESTS=1 runs them there too.
STUDENT_TESTS = ("test_environment.py", "test_config.py", "test_errors.py", "test_files.py", "test_makefile.py",
                 "test_data_synthetic.py", "test_data_pipeline.py", "test_data_prepare.py", "test_layers.py",
                 "test_loss.py", "test_keras2.py", "test_train_loop.py", "test_train_eval.py", "test_train_schedule.py",
                 "test_train_layout.py", "test_tensorboard.py", "test_monitor.py", "test_runs.py", "test_runlock.py",
                 "test_run_session.py", "test_course.py", "test_unanswered.py", "test_practice.py", "test_browser.py",
                 "test_cli.py", "test_bad_inputs.py", "test_doctor.py", "test_cluster.py", "test_rendezvous.py",
                 "test_link.py", "test_lifeline.py")
A_RELEASE = (Path(__file__).resolve().parents[1] / "RELEASE.md").exists()
# The long tier: test files of integration tests that take a minute or more each on 2 cores (clusters killed and
# resumed, SSH hosts, Slurm, sandboxes, a release built and checked) carry `pytest.mark.long` in their pytestmark.
# `make test` leaves them out (-m "not long") so it stays a quick loop; `make test-all`, which CI runs, runs them
# (`make long`) before the heavy suites. Chosen by their time in CI's unit.xml (bench/README.md "The long tier"); no
# student test is among them.


def pytest_ignore_collect(collection_path, config):
    if A_RELEASE and collection_path.name.startswith("test_") and collection_path.suffix == ".py" and \
            collection_path.parent == Path(__file__).parent and collection_path.name not in STUDENT_TESTS:
        return os.environ.get("NMTKIT_ALL_TESTS") != "1"
    return None


def pytest_report_header(config):
    if A_RELEASE and os.environ.get("NMTKIT_ALL_TESTS") != "1":
        return (f"a student release: the {len(STUDENT_TESTS)} test files that check your install run (conftest.py's "
                "STUDENT_TESTS); NMTKIT_ALL_TESTS=1 runs the kit's engineering tests too")
    return None


# --- model / training (nmtkit.model, nmtkit.training, nmtkit.serving) ----------------------------------------

def small_config(**overrides):
    """A tiny-profile config shrunk for tests: fast steps, small evals, no monitor thread."""
    from nmtkit import config
    base = {"data.train_size": 4000, "data.dev_size": 40, "data.test_size": 40, "data.vocab_size": 400,
            "data.batch_sentences": 32, "model.d_model": 64, "model.d_ff": 128, "model.num_heads": 4,
            "model.encoder_layers": 1, "model.decoder_layers": 1, "train.log_every": 10,
            "train.ckpt_every": 0, "eval.every": 0, "eval.dev_sentences": 40, "eval.test_sentences": 40,
            "eval.max_extra_len": 6, "monitor.enabled": False}
    base.update(overrides)
    return config.profile("tiny").with_overrides(base)


@pytest.fixture(scope="session")
def nmt_data(tmp_path_factory):
    """A small prepared synthetic corpus (4k pairs, 400 BPE pieces), shared by every training test."""
    from nmtkit.data.prepare import prepare
    d = tmp_path_factory.mktemp("nmt_data")
    prepare(small_config(), data_dir=d, progress=False)
    return d


def once_per_session(tmp_path_factory, name: str, make):
    """make(directory) once per test session, by whichever xdist worker asks first (the others wait on the lock and
    reuse it): the workers do not each repeat a long training. Returns the directory; copy it before writing."""
    import fcntl
    import os
    import shutil
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the session's, shared by its workers
    d = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (d / ".made").exists():
            shutil.rmtree(d, ignore_errors=True)  # a worker that died while making it
            d.mkdir()
            make(d)
            (d / ".made").touch()
    return d


@pytest.fixture(scope="session")
def trained_run(nmt_data, tmp_path_factory):
    """One small model trained long enough to translate the synthetic grammar: (run dir, summary). Trained once
    per session (on its own copy of nmt_data's corpus); each worker gets its own copy of the run."""
    import json
    import shutil

    from nmtkit.data.prepare import prepare
    from nmtkit.training.loop import train
    # float32 whatever the host: `auto` would train another model on a bf16 CPU. lr_scale 0.5, the tiny profile's:
    # at 0.3 the model scored greedy BLEU 19 after 400 steps, too weak for beam vs greedy to mean anything
    cfg = small_config(**{"train.steps": 400, "train.warmup_steps": 100, "train.lr_scale": 0.5, "model.dropout": 0.0,
                          "train.precision": "float32", "train.ckpt_every": 200, "eval.every": 200})

    def make(d):
        prepare(small_config(), data_dir=d / "data", progress=False)
        summary = train(cfg, d / "run", data_dir=d / "data", progress=False)
        (d / "summary.json").write_text(json.dumps(summary))
    shared = once_per_session(tmp_path_factory, "trained_run", make)
    run = tmp_path_factory.mktemp("trained") / "run"
    shutil.copytree(shared / "run", run)
    return run, json.loads((shared / "summary.json").read_text())


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    """A real TF checkpoint (model + Adam, one step applied) and the model's parameter count."""
    from nmtkit.keras2 import import_tf
    tf = import_tf()
    model = tf.keras.Sequential([tf.keras.layers.Dense(64, input_shape=(32,)), tf.keras.layers.Dense(16)])
    opt = tf.keras.optimizers.Adam()
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(tf.ones((2, 32))))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    d = tmp_path_factory.mktemp("ckpt") / "checkpoints"
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=opt), str(d), max_to_keep=2)
    manager.save()
    manager.save()
    return d, model.count_params()
