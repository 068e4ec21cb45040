"""The speed decisions: no host sync inside a step (stats are read at the log interval only), the rank log
complete after the buffered writes, one traced step function, XLA only in one process, threads per rank."""
import pytest
from tensorflow.python.framework import ops

from nmtkit import runs
from nmtkit.files import read_jsonl
from nmtkit.training.dist import thread_counts
from nmtkit.training.loop import train
from nmtkit.training.precision import use_xla
from nmtkit.training.trainer import Trainer

from conftest import small_config


def test_no_host_sync_between_log_intervals(nmt_data, tmp_path, monkeypatch):
    syncs, at_step, traces = [0], [], []
    real_numpy, real_run_step = ops._EagerTensorBase._numpy, Trainer.run_step

    def counting_numpy(self):  # every numpy()/float()/int()/bool() of an eager tensor goes through here
        syncs[0] += 1
        return real_numpy(self)

    def run_step(self, batches):
        at_step.append(syncs[0])
        out = real_run_step(self, batches)
        traces.append(self.train_step.experimental_get_tracing_count())
        return out

    monkeypatch.setattr(ops._EagerTensorBase, "_numpy", counting_numpy)
    monkeypatch.setattr(Trainer, "run_step", run_step)
    cfg = small_config(**{"train.steps": 12, "train.log_every": 5, "train.grad_accum": 2})
    summary = train(cfg, tmp_path / "run", data_dir=nmt_data, progress=False)
    assert summary["step"] == 12
    # syncs from the start of step k's call to the start of step k+1's: only where step k was logged
    per_step = {k: at_step[k] - at_step[k - 1] for k in range(1, 12)}
    assert all(per_step[k] == 0 for k in per_step if k % 5), per_step
    assert per_step[5] > 0 and per_step[10] > 0  # the counter sees the reads it should
    assert traces[-1] == 1  # micro-batches of every length: one trace of the whole step
    recs = list(read_jsonl(runs.rank_log(tmp_path / "run", 0)))
    assert [r["step"] for r in recs] == list(range(1, 13))  # the steps after the last interval were flushed
    assert all(r["step_time"] > 0 and r["tokens"] > 0 and r["loss"] > 0 for r in recs)


def test_xla_only_in_one_process():
    assert use_xla(True, 1) is True
    assert use_xla(True, 2) is False  # Horovod's allreduce has no XLA kernel on CPUs
    assert use_xla(False, 1) is False


def test_xla_on_a_cpu_is_refused_in_one_line_unless_a_benchmark_asks_for_it(nmt_data, tmp_path):

    from nmtkit.errors import ConfigError
    from nmtkit.training.loop import train

    from conftest import small_config
    with pytest.raises(ConfigError, match=r"^train\.xla=true: on a CPU the XLA-compiled step trains slower"):
        use_xla(True, 1, gpu=False, env={})
    assert use_xla(False, 1, gpu=False, env={}) is False
    assert use_xla(True, 1, gpu=False, env={"NMTKIT_XLA_ON_CPU": "1"}) is True  # bench/throughput.py measures it
    with pytest.raises(ConfigError, match=r"train\.xla=true") as e:  # what a user who sets it sees, at once
        train(small_config(**{"train.xla": True, "train.steps": 2}), tmp_path / "run", data_dir=nmt_data,
              progress=False)
    assert "\n" not in str(e.value)


def test_threads_split_the_cores_between_local_ranks():
    assert thread_counts(16, 2, env={}, gpu=True) == (8, 8)
    assert thread_counts(16, 2, env={}) == (4, 8)  # a CPU: two towers of 4 threads an op each
    assert thread_counts(2, 1, env={}) == (1, 2)  # two towers of one thread
    assert thread_counts(2, 1, env={}, gpu=True) == (2, 2)
    assert thread_counts(2, 2, env={}) == (1, 1)
    assert thread_counts(2, 4, env={}) == (1, 1)  # never zero
    assert thread_counts(16, 2, env={"TF_NUM_INTRAOP_THREADS": "3"}) is None  # the user's setting wins
    assert thread_counts(16, 2, env={"TF_NUM_INTEROP_THREADS": "1"}) is None



def test_token_budget_fills_like_opennmt_tf():
    from nmtkit import config
    from nmtkit.data.pipeline import bucket_plan
    dc = config.load("tiny", {"data.batch_tokens": 2048, "data.bucket_width": 1}).data
    boundaries, sizes = bucket_plan(56, dc)
    assert sizes == [2048 // n for n in range(1, 57)]  # OpenNMT-tf: batch_size // bucket_max_length
    dc.bucket_width = 8
    assert bucket_plan(56, dc)[1] == [2048 // n for n in (8, 16, 24, 32, 40, 48, 56)]


def test_pad_to_bucket_bounds_the_shapes(nmt_data):
    from nmtkit.data.pipeline import make_dataset
    dc = small_config(**{"data.batch_tokens": 600, "data.bucket_width": 8}).data
    shapes = set()
    for src, tgt in make_dataset(nmt_data, "train", dc, seed=1, repeat=False, pad_to_bucket=True):
        assert src.shape[1] == tgt.shape[1] and src.shape[1] % 8 == 0  # both sides at the bucket's length
        assert src.shape[0] * src.shape[1] <= 600
        shapes.add((src.shape[1], tgt.shape[1]))
    longest = dc.max_tokens + 2  # BOS + 56 pieces + EOS
    assert 1 < len(shapes) <= -(-longest // 8)  # one shape per bucket, whatever the lengths inside


def test_fused_adam_matches_keras_adam_dense_and_sparse():
    """FusedAdam (ResourceApplyAdam) follows Keras's Adam step for step, dense and IndexedSlices gradients."""
    import numpy as np

    from nmtkit.keras2 import import_tf
    from nmtkit.training.schedule import FusedAdam
    tf = import_tf()
    init = [np.random.RandomState(0).randn(7, 5).astype("float32"), np.ones(5, "float32")]
    ours, theirs = [tf.Variable(x) for x in init], [tf.Variable(x) for x in init]
    kw = dict(learning_rate=0.01, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    fused, keras = FusedAdam(**kw), tf.keras.optimizers.Adam(**kw)
    rng = np.random.RandomState(1)
    for step in range(6):
        dense = tf.constant(rng.randn(7, 5).astype("float32"))
        sparse = tf.IndexedSlices(tf.constant(rng.randn(2, 5).astype("float32")), tf.constant([1, 4]), [7, 5])
        g = [dense if step % 2 else sparse, tf.constant(rng.randn(5).astype("float32"))]
        fused.apply_gradients(zip(g, ours))
        keras.apply_gradients(zip(g, theirs))
    for a, b, x in zip(ours, theirs, init):
        assert not np.allclose(a.numpy(), x)  # it moved
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert int(fused.iterations) == 6


def test_fused_adam_builds_the_steps_scalars_once_per_dtype_in_a_traced_step():
    """In a tf.function with the Transformer schedule: the same values as Keras's Adam, and the rate and the two
    powers built once for all variables (per-variable scalars made the tiny traced step ~1,000 ops larger)."""
    import numpy as np

    from nmtkit.keras2 import import_tf
    from nmtkit.training.schedule import FusedAdam, TransformerSchedule
    tf = import_tf()
    init = [np.random.RandomState(0).randn(7, 5).astype("float32"), np.ones(5, "float32"), np.zeros(3, "float32")]
    ours, theirs = [tf.Variable(x) for x in init], [tf.Variable(x) for x in init]
    kw = dict(learning_rate=TransformerSchedule(16, 4), beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    fused, keras = FusedAdam(**kw), tf.keras.optimizers.Adam(**kw)

    def step(opt, variables, g):
        opt.apply_gradients(zip(g, variables))

    traced = [tf.function(step), tf.function(step)]
    rng = np.random.RandomState(1)
    for _ in range(4):
        g = [tf.constant(rng.randn(*x.shape).astype("float32")) for x in init]
        traced[0](fused, ours, g)
        traced[1](keras, theirs, g)
    for a, b, x in zip(ours, theirs, init):
        assert not np.allclose(a.numpy(), x)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    g = [tf.TensorSpec(x.shape, tf.float32) for x in init]
    ops = [o.type for o in traced[0].get_concrete_function(fused, ours, g).graph.get_operations()]
    # beta1^t, beta2^t and the schedule's own power, once (once per variable: 9)
    assert ops.count("ResourceApplyAdam") == 3 and ops.count("Pow") == 3, sorted(set(ops))
    assert fused._scalars is None  # nothing kept between steps (a later trace builds its own)
