"""On the engines, rank_main pins each rank (GPU, memory growth, threads) before the rank check's allreduce, the
first op there: the settings hold, the training job after it on the same engines pins the same way (no error) and
ends with equal weights. Before, the rank check initialised TensorFlow first and the pinning was skipped."""
import importlib.util
import os

import pytest

from nmtkit import config

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not importlib.util.find_spec("horovod"), reason="Horovod is not installed")]


def test_rank_check_then_a_job_pinned_before_the_first_collective(tmp_path_factory):
    from test_cluster_train import TINY

    from nmtkit.cluster import Cluster
    from nmtkit.cluster.remote import rank_check
    from nmtkit.data.prepare import prepare
    from nmtkit.training.dist import thread_counts
    data = tmp_path_factory.mktemp("data") / "tiny"
    cfg = config.load("tiny", dict(TINY, **{"data.dir": str(data), "train.steps": 6, "train.precision": "float32"}))
    prepare(cfg, progress=False)
    cluster = Cluster(engines=2, profile_dir=tmp_path_factory.mktemp("ipython") / "profile_nmtkit").start()
    try:
        checks = cluster.submit(rank_check).wait(timeout=180)
        assert [c.value["allreduce_sum"] for c in checks] == [3.0, 3.0]
        for c in checks:
            v = c.value
            assert v["pinned"]["tf_started_before"] is False, v  # pinned before the allreduce started TensorFlow
            want = thread_counts(len(os.sched_getaffinity(0)), v["hvd"][3], v["env"])
            assert v["pinned"]["threads"] == want
            if want is not None:  # set by pin_devices, not left to TensorFlow's default
                assert v["threads"] == want
            assert v["gpus"] == [] and v["pinned"]["gpus"] == 0  # no GPU here; test_gpu_pinning covers the choice
        results = cluster.launch(cfg, tmp_path_factory.mktemp("run") / "run", preflight=False).wait(timeout=300)
        sums = [r.value for r in results]
        assert sums[0]["weights_checksum"] == sums[1]["weights_checksum"]
        again = cluster.submit(rank_check).wait(timeout=180)  # same engines, same pinning: still fine
        assert [c.value["threads"] for c in again] == [c.value["threads"] for c in checks]
        assert all(c.value["pinned"]["tf_started_before"] for c in again)  # and pinning again did not raise
    finally:
        cluster.stop()
