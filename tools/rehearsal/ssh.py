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

`start_cluster()` is what a student's notebook does: `Cluster(cfg, hosts="vm1:2,vm2:2", launcher="ssh")`;
nmtkit.cluster hands the hosts and the venv's python to ipyparallel's `start_engines`, which reads the rest from the
profile's config written here.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from nmtkit.cluster.engines import Cluster


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
    lines = ["# written by tools.rehearsal: ipyparallel's SSH launchers reach the rehearsal's hosts",
             "c = get_config()"]
    for cls in ("SSHLauncher", "SSHEngineLauncher", "SSHEngineSetLauncher"):
        lines += [f"c.{cls}.{k} = {json.dumps(v)}" for k, v in traits.items()]
    path = Path(profile_dir) / "ipcluster_config.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def start_cluster(cfg, hosts: dict[str, int], traits: dict, *, listen_ip: str, iface: str,
                  profile_dir: str | Path) -> tuple[Cluster, str]:
    """The cluster with `hosts`' slots of engines over SSH: (cluster, how it was launched, for the report)."""
    write_profile_config(profile_dir, traits)
    spec = ",".join(f"{h}:{k}" for h, k in hosts.items())
    cluster = Cluster(cfg, launcher="ssh", hosts=spec, listen_ip=listen_ip, iface=iface, logical_hosts=False,
                      profile_dir=profile_dir)
    return cluster.start(), f"nmtkit.cluster launcher=ssh (ipyparallel's SSHEngineSetLauncher), hosts={spec}"
