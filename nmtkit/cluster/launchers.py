"""The launchers: how a Cluster's engines start, end and are named, one object per `cluster.launcher`.

    launcher = make_launcher(cc.launcher, hosts, cc)   # the one factory: "auto" resolved, the choice checked
    launcher.engine_set(n, profile_dir)                # what ipyparallel starts, and how many
    launcher.rank_env()                                # what each rank adds (an allocation's end)
    launcher.cause(...), launcher.ended(...)           # what ended the engines, as far as the launcher knows

The Cluster and the driver ask the object and never compare a launcher's name: `make_launcher` is the only place
that reads it. Local: engines on this machine, each "node" its share of the cores. SSH: ipyparallel's SSH engine
set on `cluster.hosts`. Manual: only the controller starts; students start the engines (not ours to kill or
restart). Slurm: the engines as a Slurm job (slurm.SlurmLauncher). Their base, the neutral seam, is seam.py's.
"""
from __future__ import annotations

import os
import signal
import sys

import psutil

from nmtkit.allocation import DEADLINE_ENV, allocation_end
from nmtkit.cluster.plan import check_iface
from nmtkit.cluster.seam import Launcher, RemoteLauncher, kit_path
from nmtkit.cluster.slurm import SlurmLauncher
from nmtkit.config import ClusterConfig, choices
from nmtkit.errors import ClusterError


class LocalLauncher(Launcher):
    """Engines on this machine: inside an allocation (the driver under salloc/sbatch) they end with it too."""

    name = "local"
    one_process = True  # one engine here is this process: `nmtkit train --np 1` trains without a cluster
    deadline: float | None = None

    def refresh_deadline(self) -> None:
        self.deadline = allocation_end()

    def rank_env(self) -> dict[str, str]:
        return {} if self.deadline is None else {DEADLINE_ENV: f"{self.deadline:.0f}"}

    def is_local(self) -> bool:
        return True

    def check_iface(self, iface: str) -> None:
        check_iface(iface)  # remote hosts' interfaces: preflight checks them on each host

    def engine_env(self, n: int) -> dict[str, str]:
        """nmtkit importable, Keras 2, and each local "node" its share of the cores."""
        threads = max(1, (os.cpu_count() or 1) // max(1, n))
        return {**kit_path(), "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
                "TF_NUM_INTRAOP_THREADS": str(threads), "TF_NUM_INTEROP_THREADS": "1"}

    def reaped(self, engine_pids: list[int]) -> list[int]:
        return engine_pids

    def before_stop(self, ipc) -> None:
        """SIGTERM every engine at once (ipyparallel's stop waits for each engine's exit in turn), skipping the ones
        already gone: a failed job's engines were SIGKILLed (Job's release) and ipyparallel marks an engine stopped
        only later, so its own signal_engines raises psutil.NoSuchProcess at the first dead one, and the stop would
        end there with the job's error hidden."""
        for engine_set in list(ipc.engines.values()):  # ipyparallel's LocalEngineSetLauncher: one per engine
            for one in list(engine_set.launchers.values()):
                try:
                    one.signal(signal.SIGTERM)
                except psutil.NoSuchProcess:
                    pass


class SshLauncher(RemoteLauncher):
    name = "ssh"

    def __init__(self, hosts: list, cc: ClusterConfig | None = None):
        if not hosts:
            raise ClusterError("cluster.launcher=ssh needs cluster.hosts, e.g. 10.0.0.5:2,10.0.0.6:2")
        super().__init__(hosts, cc)

    def controller_kwargs(self) -> dict:
        return {"engine_launcher_class": "ssh"}  # the hosts go to start_engines (ipyparallel 9: not both here)

    def engine_set(self, n: int, profile_dir: str) -> tuple[object | None, int, dict]:
        # the hosts and their slots, and this venv's python (the remote default is the system python3)
        return None, n, {"engines": {h.hostname: h.slots for h in self.hosts}, "remote_python": sys.executable}


class ManualLauncher(RemoteLauncher):
    name = "manual"
    starts_engines = False
    owns_engines = False


# each `cluster.launcher` choice but "auto" (make_launcher resolves it), and the class that is it
LAUNCHERS: dict[str, type[Launcher]] = {"local": LocalLauncher, "ssh": SshLauncher, "manual": ManualLauncher,
                                        "slurm": SlurmLauncher}


def launcher_class(name: str, hosts: list) -> type[Launcher]:
    """The class of launcher `name` ("auto": ssh with hosts, else local), or ClusterError naming the key."""
    allowed = choices("cluster.launcher")
    if name not in allowed:
        raise ClusterError(f"cluster.launcher: {name!r}: choose {', '.join(allowed)}")
    return LAUNCHERS[("ssh" if hosts else "local") if name == "auto" else name]


def make_launcher(name: str, hosts: list, cc: ClusterConfig | None = None) -> Launcher:
    """The launcher a cluster uses, or ClusterError naming the key. The one place that reads a launcher's name
    (through launcher_class, its registry); each launcher refuses a host list it cannot use."""
    return launcher_class(name, hosts)(hosts, cc or ClusterConfig())
