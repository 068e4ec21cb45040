"""Issue 69, item 8 (Slurm): inside an allocation, the driver's own step (`srun --pty jupyter lab` with GPUs) holds
the GPUs the engines' step asks for. srun --overlap shares GRES from Slurm 21.08; on an older Slurm the engines'
step waited forever: refused in one line instead. Slurm's commands faked on PATH."""
import pytest

from nmtkit import config
from nmtkit.cluster.slurm import SlurmLauncher
from nmtkit.errors import ClusterError

STEP = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_STEP_GPUS": "0,1"}  # srun --pty with the job's GPUs


def slurm_on_path(tmp_path, monkeypatch, version: str) -> None:
    for tool in ("srun", "squeue", "scancel", "scontrol"):
        (tmp_path / tool).write_text(f"#!/bin/sh\necho 'slurm {version}'\n")
        (tmp_path / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")


def engine_cmd(gpus: int, env: dict, tmp_path) -> list:
    cfg = config.load("tiny", {"cluster.launcher": "slurm", "cluster.slurm_gpus_per_node": gpus})
    return SlurmLauncher([], cfg.cluster, env=env).engine_set(2, str(tmp_path))[2]["engine_cmd"]


def test_an_old_slurm_refuses_instead_of_waiting_for_the_drivers_gpus_a_new_one_overlaps(tmp_path, monkeypatch):
    slurm_on_path(tmp_path, monkeypatch, "20.11.9")
    with pytest.raises(ClusterError) as e:
        engine_cmd(2, STEP, tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and "SLURM_STEP_GPUS=0,1" in msg and "--gres=none" in msg and "20.11" in msg
    no_gpus = {k: v for k, v in STEP.items() if k != "SLURM_STEP_GPUS"}  # the driver's step holds none: fine
    assert "--gpus-per-task=1" in engine_cmd(2, no_gpus, tmp_path)
    assert "--overlap" in engine_cmd(0, STEP, tmp_path)  # CPU engines ask for no GPU
    slurm_on_path(tmp_path, monkeypatch, "23.02.3")  # its --overlap shares GRES: the engines' step overlaps
    cmd = engine_cmd(2, STEP, tmp_path)
    assert "--overlap" in cmd and "--gpus-per-task=1" in cmd
