"""Issue 69, item 1: Slurm with per-task GPUs under ConstrainDevices=yes. Each task sees its GPU as "0", so both
engines of a node report CUDA_VISIBLE_DEVICES=0; the kit counted the node as not bound and had the second rank pin
index 1 of its 1 GPU. Their GPUs' UUIDs (NVML, faked here) differ: bound by UUID."""
import sys
import types

import pytest
from test_gpu_pinning import FakeConfig

from nmtkit.cluster.plan import assign_slots, bound_hosts, device_indices, rank_env
from nmtkit.cluster.remote import engine_identity, pin_args
from nmtkit.training.dist import pin_devices


def nvml_seeing(uuid: str) -> types.ModuleType:
    """NVML inside a task's device cgroup: it opens one GPU (the node's other is another task's)."""
    m = types.ModuleType("pynvml")
    m.nvmlInit = m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: 1
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetUUID = lambda h: uuid
    return m


def test_two_tasks_that_each_call_their_gpu_0_are_bound_by_uuid(monkeypatch):
    idents = []
    slurm_gave = ("0", "0")  # --gpus-per-task=1 with ConstrainDevices=yes: each task's CUDA_VISIBLE_DEVICES
    for uuid, cvd in zip(("GPU-1111", "GPU-2222"), slurm_gave):  # what each engine reports under its task's env
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", cvd)
        monkeypatch.setitem(sys.modules, "pynvml", nvml_seeing(uuid))
        idents.append(dict(engine_identity(), host="gpu-node1"))
    hosts = [d["host"] for d in idents]
    visible, uuids = [d["cuda_visible"] for d in idents], [d["gpu_uuids"] for d in idents]
    assert tuple(visible) == ("0", "0") and uuids == [["GPU-1111"], ["GPU-2222"]]
    assert bound_hosts(hosts, visible, uuids) == {"gpu-node1"}
    devices = device_indices(hosts, visible, uuids)
    assert devices == [0, 0]  # each pins the one GPU it sees, not index 1 of 1
    for slot, device in zip(assign_slots(hosts), devices):
        env = rank_env(slot, addr="10.0.0.1", port=1, iface="ib0", device_index=device, gpus_bound=True)
        cfg = FakeConfig(1)
        pin_devices(*pin_args(env), config=cfg, cores=4, env={})
        assert cfg.visible == [cfg.gpus[0]]


@pytest.mark.parametrize("uuids", [[["GPU-1111"], ["GPU-1111"]],            # the same GPU: they would share it
                                   [["GPU-1111", "GPU-2222"]] * 2,          # no cgroups: both open every GPU
                                   [[], []], None])                         # no NVML: nothing to tell them apart
def test_engines_that_call_the_same_gpu_0_and_open_the_same_gpus_are_not_bound(uuids):
    assert bound_hosts(["n", "n"], ["0", "0"], uuids) == set()
    assert device_indices(["n", "n"], ["0", "0"], uuids) == [0, 1]  # then pinning refuses 2 ranks on 1 GPU
