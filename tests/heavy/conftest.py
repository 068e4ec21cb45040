"""The heavy suites' Docker fixtures: the students' image, built once a session as course staff build it (`nmtkit
release --out DIR`, then `make image` there), and a network on a 10.x subnet whose containers and volumes are removed
at the end, also on failure. Tests that need no Docker never touch them."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from dockertools import ROOT, TAG, docker

from nmtkit.course import INSTRUCTOR_KIT


@pytest.fixture(scope="session")
def image(tmp_path_factory):
    if not INSTRUCTOR_KIT:
        pytest.skip("the students' image is built from a release, which only the instructor's kit makes")
    from nmtkit.course.instructor import release
    rel = release.build(tmp_path_factory.mktemp("release") / "kit")
    start = time.time()
    env = {**os.environ, "IMAGE": TAG}
    out = subprocess.run(["make", "-C", str(rel), "image", f"VENV={Path(sys.executable).parents[1]}", f"IMAGE={TAG}",
                          f"WHEELHOUSE={ROOT / 'wheelhouse'}"], capture_output=True, text=True, env=env,
                         timeout=3600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    print(f"[image] built in {time.time() - start:.0f} s")
    yield rel
    docker("rmi", "-f", TAG, check=False)


@pytest.fixture(scope="session")
def exported(image, tmp_path_factory):
    """The image's whole file system, exported from a container made (never started) from it."""
    name = f"nmtkit-x-{uuid.uuid4().hex[:8]}"
    docker("create", "--name", name, TAG)
    fs = tmp_path_factory.mktemp("fs")
    try:
        tar = fs.parent / f"{name}.tar"
        docker("export", "-o", str(tar), name)
        subprocess.run(["tar", "-xf", str(tar), "-C", str(fs)], check=True)
        tar.unlink()
    finally:
        docker("rm", "-f", name, check=False)
    yield fs
    shutil.rmtree(fs, ignore_errors=True)


@pytest.fixture()
def net():
    """A network on a 10.x subnet, and the containers and volumes a test makes on it: all removed at the end."""
    name = f"nmtkit-test-{uuid.uuid4().hex[:8]}"
    made = {"containers": [], "volumes": []}
    for third in range(200, 250):
        if docker("network", "create", "--subnet", f"10.{third}.77.0/24", name, check=False).returncode == 0:
            break
    yield name, made
    for c in made["containers"]:
        docker("rm", "-f", c, check=False)
    for v in made["volumes"]:
        docker("volume", "rm", "-f", v, check=False)
    docker("network", "rm", name, check=False)
