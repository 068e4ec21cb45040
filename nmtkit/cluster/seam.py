"""The seam every launcher sits behind: `Launcher`, whose defaults are neutral (as many engines as asked, no host
named, nothing to arm or reap), and `RemoteLauncher`, the host list that SSH, hand-started and Slurm engines share.
Each launcher adds only what is its own: launchers.py (local, SSH, manual, and the one factory), slurm.py (Slurm).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import nmtkit
from nmtkit.cluster.plan import controller_ip
from nmtkit.config import ClusterConfig


def kit_path() -> dict[str, str]:
    """PYTHONPATH with this checkout first: engines on this machine (or a shared filesystem) import this nmtkit."""
    root = str(Path(nmtkit.__file__).resolve().parents[1])
    return {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}


class Launcher:
    """What differs between the ways engines start; the Cluster and the driver ask it, never its name."""

    name = ""
    one_process = False        # True: with one engine and no hosts the run is this process alone (route.py asks)
    starts_engines = True      # False: the engines are started by hand (engine_command) and only waited for
    owns_engines = True        # False: not ours to kill or restart (hand-started): a failed job's tasks are aborted
    logical_hosts: bool | None = None  # None: cluster.logical_hosts; False: the nodes are real hosts

    def __init__(self, hosts: list, cc: ClusterConfig | None = None):
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


class RemoteLauncher(Launcher):
    """Engines on other nodes: those of the host list (cluster.hosts, --hosts; a Slurm job's once known), whose
    slots are the engines."""

    def engine_count(self, n: int) -> int:
        """The host list's slots, else `n`."""
        return sum(h.slots for h in self.hosts) if self.hosts else n

    def remote_hosts(self, hosts: list | None = None) -> list[str]:
        return [h.hostname for h in (self.hosts if hosts is None else hosts)]
