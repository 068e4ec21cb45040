"""pin_devices() against a faked tf.config: which GPU a rank sees, memory growth, and the errors when it is too
late or there are more ranks than GPUs. The real tf.config is exercised too (no GPU here: threads only)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from nmtkit.errors import NmtkitError, StackError
from nmtkit.training.dist import compute_threads, pin_devices, towers


@dataclass(frozen=True)
class Dev:
    name: str
    device_type: str = "GPU"


class FakeConfig:
    """The tf.config calls pin_devices makes, with TensorFlow's rule: nothing changes once initialised
    (setting the value it already has is allowed, as in TensorFlow's context.py)."""

    def __init__(self, gpus: int, initialised: bool = False):
        self.gpus = [Dev(f"/physical_device:GPU:{i}") for i in range(gpus)]
        self.visible = list(self.gpus)
        self.growth: dict = {}
        self.initialised = initialised
        self.intra = self.inter = 0
        cfg = self

        class Experimental:
            @staticmethod
            def set_memory_growth(dev, on):
                if cfg.growth.get(dev) != on and cfg.initialised:
                    raise RuntimeError("Physical devices cannot be modified after being initialized")
                cfg.growth[dev] = on

        class Threading:
            @staticmethod
            def set_intra_op_parallelism_threads(n):
                if n != cfg.intra and cfg.initialised:
                    raise RuntimeError("Intra op parallelism cannot be modified after initialization.")
                cfg.intra = n

            @staticmethod
            def set_inter_op_parallelism_threads(n):
                if n != cfg.inter and cfg.initialised:
                    raise RuntimeError("Inter op parallelism cannot be modified after initialization.")
                cfg.inter = n

            @staticmethod
            def get_intra_op_parallelism_threads():
                return cfg.intra

            @staticmethod
            def get_inter_op_parallelism_threads():
                return cfg.inter

        self.experimental, self.threading = Experimental, Threading

    def list_physical_devices(self, kind):
        return list(self.gpus) if kind == "GPU" else []

    def set_visible_devices(self, devices, kind):
        if list(devices) != self.visible and self.initialised:
            raise RuntimeError("Visible devices cannot be modified after being initialized")
        self.visible = list(devices)

    def get_visible_devices(self, kind):
        return list(self.visible)


def test_two_local_ranks_on_two_gpus_get_devices_0_and_1():
    for rank in (0, 1):
        cfg = FakeConfig(2)
        out = pin_devices(rank, 2, config=cfg, cores=8, env={})
        assert [d.name for d in cfg.visible] == [f"/physical_device:GPU:{rank}"]
        assert cfg.growth == {cfg.gpus[rank]: True}
        assert out == {"gpus": 2, "device": rank, "threads": (4, 4)}
        assert (cfg.intra, cfg.inter) == (4, 4)


def test_device_index_overrides_the_local_rank():
    # local engines posing as nodes: local rank 0 on each, NMTKIT_DEVICE_INDEX says which physical GPU
    cfg = FakeConfig(2)
    pin_devices(0, 1, "1", config=cfg, cores=2, env={})
    assert cfg.visible == [cfg.gpus[1]]


def test_three_ranks_on_two_gpus_is_a_clear_error():
    with pytest.raises(StackError, match="3 ranks on this machine but 2 GPU"):
        pin_devices(2, 3, config=FakeConfig(2), cores=2, env={})
    with pytest.raises(StackError, match="3 ranks on this machine but 2 GPU"):
        pin_devices(0, 1, 2, config=FakeConfig(2), cores=2, env={})  # a third engine posing as a node


def test_too_late_raises_instead_of_sharing_gpu0():
    cfg = FakeConfig(2, initialised=True)  # something ran an op with both GPUs visible
    with pytest.raises(StackError, match="before this process could pin") as e:
        pin_devices(1, 2, config=cfg, cores=2, env={})
    assert isinstance(e.value, NmtkitError)


def test_same_pinning_again_is_a_no_op():
    # the rank check pins, then the training job on the same engine pins the same device: fine
    cfg = FakeConfig(2)
    pin_devices(1, 2, config=cfg, cores=2, env={})
    cfg.initialised = True
    assert pin_devices(1, 2, config=cfg, cores=2, env={})["device"] == 1


def test_single_process_sees_every_gpu_with_memory_growth():
    cfg = FakeConfig(2)
    out = pin_devices(0, 1, pin=False, config=cfg, cores=2, env={})
    assert cfg.visible == cfg.gpus and all(cfg.growth[g] for g in cfg.gpus)
    assert out["device"] is None


def test_threads_already_fixed_warn_and_report_what_runs(capsys):
    cfg = FakeConfig(0)
    cfg.intra = cfg.inter = 2
    cfg.initialised = True
    out = pin_devices(0, 2, config=cfg, cores=2, env={})
    assert out["threads"] == (2, 2)
    assert "thread pools already run 2/2" in capsys.readouterr().err


def test_cpu_only_real_tf_config():
    from nmtkit.keras2 import import_tf
    tf = import_tf()
    out = pin_devices(0, 1, env={"TF_NUM_INTRAOP_THREADS": "1"})  # the environment decides: nothing set
    assert out == {"gpus": len(tf.config.list_physical_devices("GPU")), "device": None, "threads": None}


def test_the_default_pools_of_a_lone_process_are_what_it_asks_no_warning(capsys):
    """A notebook that built a model before nk.train: TensorFlow's pools are fixed at its default (0/0: every
    core), which is what one rank on the machine asks for; a second local rank would still be warned."""
    cfg = FakeConfig(0)
    cfg.intra = cfg.inter = 0
    cfg.initialised = True
    assert pin_devices(0, 1, config=cfg, cores=2, env={})["threads"] == (2, 2)
    assert capsys.readouterr().err == "" and towers(cfg) == 1  # TensorFlow's pools: one tower on every core
    pin_devices(0, 2, config=cfg, cores=2, env={})
    assert "thread pools already run 0/0 threads" in capsys.readouterr().err


def test_a_lone_cpu_process_runs_two_towers_of_one_thread_and_a_gpu_rank_one():
    cpu = FakeConfig(0)
    assert pin_devices(0, 1, config=cpu, cores=2, env={})["threads"] == (1, 2)
    assert towers(cpu) == 2 and compute_threads(cpu) == 2  # the peak MFU divides by is timed on both cores
    two = FakeConfig(0)
    assert pin_devices(0, 2, config=two, cores=2, env={})["threads"] == (1, 1)  # a core each: no towers
    assert towers(two) == 1 and compute_threads(two) == 1
    gpu = FakeConfig(1)
    assert pin_devices(0, 1, config=gpu, cores=8, env={})["threads"] == (8, 8)
    assert towers(gpu) == 1
    big = FakeConfig(0)
    assert pin_devices(0, 1, config=big, cores=16, env={})["threads"] == (8, 16)
    assert towers(big) == 2 and compute_threads(big) == 16
