"""The launchers: how a Cluster's engines start, end and are named, one object per `cluster.launcher`.

    launcher = make_launcher(cc.launcher, hosts, cc)   # the one factory: "auto" resolved, the choice checked
    launcher.engine_set(n, profile_dir)                # what ipyparallel starts, and how many
    launcher.rank_env()                                # what each rank adds (an allocation's end)
    launcher.cause(...), launcher.ended(...)           # what ended the engines, as far as the launcher knows

The Cluster and the driver ask the object and never compare a launcher's name: `make_launcher` is the only place
that reads it. Local: engines on this machine, each "node" its share of the cores. SSH: ipyparallel's SSH engine
set on `cluster.hosts`. Manual: only the controller starts; students start the engines (not ours to kill or
restart). Slurm: the engines as a Slurm job (cluster.slurm.SlurmJob).
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Callable

import psutil

import nmtkit
from nmtkit.allocation import DEADLINE_ENV, allocation_end
from nmtkit.cluster.plan import check_iface, controller_ip
from nmtkit.cluster.slurm import SlurmJob
from nmtkit.config import ClusterConfig, choices
from nmtkit.errors import ClusterError


def _kit_path() -> dict[str, str]:
    """PYTHONPATH with this checkout first: engines on this machine (or a shared filesystem) import this nmtkit."""
    root = str(Path(nmtkit.__file__).resolve().parents[1])
    return {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}


class Launcher:
    """The seam: what differs between the ways engines start. The defaults are neutral (as many engines as asked,
    no host named, nothing to arm or reap); RemoteLauncher adds the host list that SSH and hand-started engines
    share, and each launcher only what is its own."""

    name = ""
    starts_engines = True      # False: the engines are started by hand (engine_command) and only waited for
    owns_engines = True        # False: not ours to kill or restart (hand-started): a failed job's tasks are aborted
    logical_hosts: bool | None = None  # None: cluster.logical_hosts; False: the nodes are real hosts

    def __init__(self, hosts: list):
        self.hosts = hosts

    def engine_count(self, n: int) -> int:
        """How many engines the cluster runs."""
        return n

    def remote_hosts(self, hosts: list | None = None) -> list[str]:
        """The names of the nodes reached over the network (none known here)."""
        return []

    def is_local(self) -> bool:
        """The engines run on this machine (they share the driver's data directory)."""
        return False

    def check_iface(self, iface: str) -> None:
        """cluster.iface checked here before anything starts, where it names this machine's interface."""

    def listen_ip(self) -> str:
        """Where the controller listens unless cluster.listen says: the local address that routes to the nodes."""
        return controller_ip(self.remote_hosts())

    def controller_kwargs(self) -> dict:
        """ipyparallel.Cluster's keyword arguments for this launcher."""
        return {}

    def engine_set(self, n: int, profile_dir: str) -> tuple[object | None, int, dict]:
        """(ipyparallel's engine launcher class, or None for the Cluster's; how many it starts; its start_engines
        keyword arguments)."""
        return None, n, {}

    def engine_env(self, n: int) -> dict[str, str]:
        """The engines' environment: Keras 2 (remote nodes have their own checkout and cores)."""
        return {"TF_USE_LEGACY_KERAS": "1"}

    def started(self, engine_set, lifeline, controller_pid: int) -> list[int]:
        """The engine set is started: arm what the lifeline must end; returns local pids it must reap."""
        return []

    def reaped(self, engine_pids: list[int]) -> list[int]:
        """Of the engines' pids, those the driver's reaper ends if it dies (local processes only)."""
        return []

    def before_stop(self, ipc) -> None:
        """What happens to the engines before ipyparallel's stop (ipyparallel.Cluster `ipc`)."""

    def refresh_deadline(self) -> None:
        """Learn the allocation's end again (an administrator may change it while the job runs)."""

    def rank_env(self) -> dict[str, str]:
        """What each rank adds to its environment beyond the rank plan."""
        return {}

    def describe(self) -> str:
        """A line about where the engines run ('' when the start message says it all)."""
        return ""

    def cause(self, silent: Callable[[], list[str]], hasten: Callable[[], None], settle_s: float) -> str:
        """What ended the engines, as far as the launcher knows ('' if nothing)."""
        return ""

    def ended(self, hasten: Callable[[], None]) -> str | None:
        """A line naming the allocation and its end when it ended under the engines, else None."""
        return None

    def interrupted(self) -> str:
        """What a Ctrl-C before training ended besides the engines ('' for nothing), for the driver's line."""
        return ""

    def time_limit_note(self) -> str:
        """The driver's closing line when a run stopped before its allocation's time limit ('' for none)."""
        return ""


class LocalLauncher(Launcher):
    """Engines on this machine: inside an allocation (the driver under salloc/sbatch) they end with it too."""

    name = "local"
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
        return {**_kit_path(), "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
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


class RemoteLauncher(Launcher):
    """Engines on other nodes: those of the host list (cluster.hosts, --hosts; a Slurm job's once known), whose
    slots are the engines."""

    def engine_count(self, n: int) -> int:
        """The host list's slots, else `n`."""
        return sum(h.slots for h in self.hosts) if self.hosts else n

    def remote_hosts(self, hosts: list | None = None) -> list[str]:
        return [h.hostname for h in (self.hosts if hosts is None else hosts)]


class SshLauncher(RemoteLauncher):
    name = "ssh"

    def controller_kwargs(self) -> dict:
        return {"engine_launcher_class": "ssh"}  # the hosts go to start_engines (ipyparallel 9: not both here)

    def engine_set(self, n: int, profile_dir: str) -> tuple[object | None, int, dict]:
        # the hosts and their slots, and this venv's python (the remote default is the system python3)
        return None, n, {"engines": {h.hostname: h.slots for h in self.hosts}, "remote_python": sys.executable}


class ManualLauncher(RemoteLauncher):
    name = "manual"
    starts_engines = False
    owns_engines = False


class SlurmLauncher(RemoteLauncher):
    """The engines as a Slurm job; everything Slurm alone knows is its SlurmJob's."""

    name = "slurm"
    logical_hosts = False  # Slurm's nodes are real hosts: their engines share a host and pin its GPUs

    def __init__(self, hosts: list, cc: ClusterConfig):
        super().__init__(hosts)
        self.job = SlurmJob(cc)

    def listen_ip(self) -> str:
        return self.job.listen_ip()

    def engine_set(self, n: int, profile_dir: str) -> tuple[object | None, int, dict]:
        return self.job.engine_set(n, profile_dir)  # sbatch through ipyparallel's launcher, or an srun step

    def engine_env(self, n: int) -> dict[str, str]:
        """This checkout too (a shared filesystem); the cores are Slurm's to give."""
        return {**_kit_path(), "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}

    def started(self, engine_set, lifeline, controller_pid: int) -> list[int]:
        return self.job.started(engine_set, lifeline, controller_pid)

    def refresh_deadline(self) -> None:
        self.job.refresh_deadline()

    def rank_env(self) -> dict[str, str]:
        return self.job.rank_env()

    def describe(self) -> str:
        return self.job.describe()

    def cause(self, silent, hasten, settle_s: float) -> str:
        return self.job.cause(silent, hasten=hasten, settle_s=settle_s)

    def ended(self, hasten) -> str | None:
        return self.job.ended(hasten=hasten)

    def interrupted(self) -> str:
        return f"Slurm job {self.job.job_id} cancelled" if self.job.job_id else ""

    def time_limit_note(self) -> str:
        return (f"Slurm job {self.job.job_id}'s time limit was near: stopped at a checkpoint before it; run the "
                f"same command again (a new job) to resume")


def make_launcher(name: str, hosts: list, cc: ClusterConfig | None = None) -> Launcher:
    """The launcher a cluster uses ("auto": ssh with hosts, else local), or ClusterError naming the key. The one
    place that reads a launcher's name."""
    allowed = choices("cluster.launcher")
    if name not in allowed:
        raise ClusterError(f"cluster.launcher: {name!r}: choose {', '.join(allowed)}")
    if name == "auto":
        name = "ssh" if hosts else "local"
    if name == "ssh" and not hosts:
        raise ClusterError("cluster.launcher=ssh needs cluster.hosts, e.g. 10.0.0.5:2,10.0.0.6:2")
    if name == "slurm":
        if hosts:
            raise ClusterError("cluster.launcher=slurm: Slurm picks the nodes; leave cluster.hosts (--hosts) empty "
                               "and give the number of engines (--np, cluster.engines)")
        return SlurmLauncher(hosts, cc or ClusterConfig())
    return {"local": LocalLauncher, "ssh": SshLauncher, "manual": ManualLauncher}[name](hosts)
