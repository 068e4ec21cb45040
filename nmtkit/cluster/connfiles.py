"""The controller's connection files: where ipyparallel writes them, made owner-only, and the command that joins an
engine to the controller by one of them (a student's hand-started engines, cluster.launcher=manual)."""
from __future__ import annotations

import glob
import os
import stat
import time
from pathlib import Path

from nmtkit.errors import ClusterError


def connection_files(ipp_cluster) -> dict[str, str]:
    """{"engine": path, "client": path} of the files the controller has written so far."""
    sec = Path(ipp_cluster.profile_dir) / "security"
    files = {}
    for kind in ("engine", "client"):
        hits = glob.glob(str(sec / f"ipcontroller-{ipp_cluster.cluster_id}-{kind}.json"))
        if hits:
            files[kind] = hits[0]
    return files


def secure(ipp_cluster, timeout: float) -> None:
    """The files hold the key that lets anyone run code on the engines: owner-only (0600). Waits for the
    controller to write them (a loaded machine takes a while; the SSH launcher copies them next)."""
    deadline = time.time() + timeout
    while len(connection_files(ipp_cluster)) < 2:
        if time.time() > deadline:
            raise ClusterError(f"the controller wrote no connection files within {timeout} s; see its log in "
                               f"{ipp_cluster.profile_dir}/log (cluster.start_timeout waits longer)")
        time.sleep(0.1)
    for f in list(connection_files(ipp_cluster).values()) + [ipp_cluster.cluster_file]:
        if os.path.exists(f):
            os.chmod(f, stat.S_IRUSR | stat.S_IWUSR)


def engine_command(ipp_cluster, python: str = "ipengine") -> str:
    """The command a student runs on each node to join the controller (mode c). Copy the engine connection file
    to the node first (it holds the controller's address and key; keep it private): `scp <file> node:~/`."""
    f = connection_files(ipp_cluster).get("engine")
    if f is None:
        raise ClusterError("the controller has not written its engine connection file yet: start() first")
    run = python if python == "ipengine" else f"{python} -m ipyparallel.engine"
    return f"TF_USE_LEGACY_KERAS=1 {run} --file=~/{Path(f).name}"
