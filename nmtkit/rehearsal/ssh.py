"""Engines on the two hosts over real SSH, through ipyparallel's own SSH launcher (SSHEngineSetLauncher).

ipyparallel's launcher runs `ssh <ssh_args> <host> -- sh -` and `scp <scp_args>`; it reads its settings from
traitlets config, and `ipyparallel.Cluster` loads `<profile_dir>/ipcluster_config.py` (its `load_profile`
default). So `write_profile_config()` puts there, without touching nmtkit.cluster:

- `ssh_args = scp_args = ["-F", <the rehearsal's ssh config>]`: the throwaway key, no host-key prompts, the
  host names mapped to the hosts' management addresses;
- `remote_python` and `engine_cmd`: the venv's python at the same path on every host, with
  TF_USE_LEGACY_KERAS=1, PYTHONPATH (the code) and one TensorFlow thread per engine (`env` in front: the engine
  set's `environment` is replaced by nmtkit.cluster's own dict, so it cannot carry these);
- `remote_profile_dir`: where the connection file goes on the hosts: under the directory the second host sees as
  its own empty disk, so the file really travels by scp, as it would to a second VM.

`start_cluster()` asks nmtkit.cluster for `launcher="ssh"`. nmtkit.cluster at 880df36 cannot start it
(`ipp.Cluster(engine_launcher_class="ssh", engines={...})` raises ipyparallel's TypeError "Only specify one of
'engines' or 'engine_launcher_class'", since `engines=` is ipyparallel's alias of the launcher class); then the
controller starts with `launcher="manual"` and `SshEngines` starts the same SSH launcher with the same settings
directly. The report says which path ran; docs/rehearsal.md has the one-line fix for nmtkit.cluster.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from nmtkit.cluster import Cluster, ClusterError

IPP_ALIAS_ERROR = "Only specify one of 'engines' or 'engine_launcher_class'"


def launcher_traits(ssh_config: str | Path, code_root: str | Path, remote_profile_dir: str | Path,
                    python: str = sys.executable) -> dict:
    """The SSH launcher's settings for these hosts (trait name -> value)."""
    cmd = ["env", "TF_USE_LEGACY_KERAS=1", "TF_CPP_MIN_LOG_LEVEL=2", f"PYTHONPATH={code_root}",
           "TF_NUM_INTRAOP_THREADS=1", "TF_NUM_INTEROP_THREADS=1", python, "-m", "ipyparallel.engine"]
    return {"ssh_args": ["-F", str(ssh_config)], "scp_args": ["-F", str(ssh_config)], "remote_python": python,
            "remote_profile_dir": str(remote_profile_dir), "engine_cmd": cmd}


def write_profile_config(profile_dir: str | Path, traits: dict) -> Path:
    """<profile_dir>/ipcluster_config.py setting `traits` on ipyparallel's SSH launchers."""
    from nmtkit.files import atomic_write_text
    lines = ["# written by nmtkit.rehearsal: ipyparallel's SSH launchers reach the rehearsal's hosts", "c = get_config()"]
    for cls in ("SSHLauncher", "SSHEngineLauncher", "SSHEngineSetLauncher"):
        lines += [f"c.{cls}.{k} = {json.dumps(v)}" for k, v in traits.items()]
    path = Path(profile_dir) / "ipcluster_config.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


class SshEngines:
    """ipyparallel's SSHEngineSetLauncher pointed at a running controller (for the `manual` cluster)."""

    def __init__(self, cluster: Cluster, hosts: dict[str, int], traits: dict):
        engine_file = Path(cluster.connection_files()["engine"])
        self.cluster, self.hosts, self.traits = cluster, hosts, traits
        self.profile_dir = str(engine_file.parents[1])
        self.cluster_id = engine_file.name[len("ipcontroller-"):-len("-engine.json")]
        self.launchers: list = []

    def start(self) -> list[int]:
        """One SSHEngineSetLauncher per host, the hosts in parallel (each launch is a few SSH round trips and a
        remote `ipython profile create`, ~10 s per engine on a loaded machine); waits until all registered."""
        from ipyparallel.cluster.launcher import SSHEngineSetLauncher
        from tornado.ioloop import IOLoop
        loop = IOLoop.current()  # the launchers' stop callbacks go to this (the main) thread's loop
        before = set(self.cluster.client.ids)
        self.launchers = [SSHEngineSetLauncher(engines={h: {"n": k, "loop": loop}}, profile_dir=self.profile_dir,
                                               cluster_id=self.cluster_id, work_dir=".", loop=loop,
                                               environment={"TF_USE_LEGACY_KERAS": "1"}, **self.traits)
                          for h, k in self.hosts.items()]
        errors: list[BaseException] = []

        def launch(launcher, k):
            try:
                launcher.start(k)
            except BaseException as e:  # noqa: BLE001  re-raised below, in the caller's thread
                errors.append(e)

        threads = [threading.Thread(target=launch, args=(la, k), daemon=True)
                   for la, k in zip(self.launchers, self.hosts.values())]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise ClusterError(f"starting engines over SSH failed: {type(errors[0]).__name__}: {errors[0]}")
        n = sum(self.hosts.values())
        deadline = time.time() + self.cluster.start_timeout
        while len(set(self.cluster.client.ids) - before) < n:
            if time.time() > deadline:
                raise ClusterError(f"only {len(set(self.cluster.client.ids) - before)} of {n} SSH engines "
                                   f"registered within {self.cluster.start_timeout} s")
            time.sleep(0.3)
        self.cluster.ids = sorted(set(self.cluster.client.ids) - before)[:n]
        self.cluster.engines(refresh=True)
        return self.cluster.ids

    def stop(self) -> None:
        for launcher in self.launchers:
            for el in list(launcher.launchers.values()):
                try:
                    el.signal(9)
                except Exception:  # noqa: BLE001  a host that is gone has no engine left to stop
                    pass
                waiter = getattr(el, "_stop_waiting", None)
                if waiter is not None:
                    waiter.set()
        self.launchers = []

    def restart(self) -> list[int]:
        """Fresh engines on every host (after a rank was killed): old ones stopped and forgotten first."""
        old = set(self.cluster.ids)
        self.stop()
        deadline = time.time() + 60
        while old & set(self.cluster.client.ids) and time.time() < deadline:
            time.sleep(0.5)  # the controller drops them after its heartbeat misses them
        return self.start()


def start_cluster(cfg, hosts: dict[str, int], traits: dict, *, listen_ip: str, iface: str,
                  profile_dir: str | Path, force_manual: bool = False) -> tuple[Cluster, SshEngines | None, str]:
    """The cluster with 2 engines per host over SSH: (cluster, fallback engines or None, how it was launched)."""
    write_profile_config(profile_dir, traits)
    spec = ",".join(f"{h}:{k}" for h, k in hosts.items())
    common = dict(hosts=spec, listen_ip=listen_ip, iface=iface, logical_hosts=False, profile_dir=profile_dir)
    note = ""
    if not force_manual:
        cluster = Cluster(cfg, launcher="ssh", **common)
        try:
            return cluster.start(), None, "nmtkit.cluster launcher=ssh"
        except TypeError as e:
            if IPP_ALIAS_ERROR not in str(e):
                raise
            note = f"nmtkit.cluster launcher=ssh failed: TypeError: {e}; "
    cluster = Cluster(cfg, launcher="manual", **common).start()
    engines = SshEngines(cluster, hosts, traits)
    try:
        engines.start()
    except BaseException:
        engines.stop()
        cluster.stop()
        raise
    return cluster, engines, note + "engines started by ipyparallel's SSHEngineSetLauncher (launcher=manual controller)"
