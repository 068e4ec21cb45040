"""The heavy suites' Docker fixtures: the students' image, built once a session as course staff build it (`nmtkit
release --out DIR`, then `make image` there), and a network on a 10.x subnet whose containers and volumes are removed
at the end, also on failure. Tests that need no Docker never touch them."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import uuid
from pathlib import Path

import pytest
from dockertools import DOCKER, ROOT, TAG, docker

from nmtkit.course import INSTRUCTOR_KIT


@pytest.fixture(scope="session")
def image(tmp_path_factory):
    if not INSTRUCTOR_KIT:
        pytest.skip("the students' image is built from a release, which only the instructor's kit makes")
    from nmtkit.course.instructor import release
    rel = release.build(tmp_path_factory.mktemp("release") / "kit")
    start, cached, dangling = time.time(), build_cache(), dangling_images()
    env = {**os.environ, "IMAGE": TAG}
    out = subprocess.run(["make", "-C", str(rel), "image", f"VENV={Path(sys.executable).parents[1]}", f"IMAGE={TAG}",
                          f"WHEELHOUSE={ROOT / 'wheelhouse'}"], capture_output=True, text=True, env=env,
                         timeout=3600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    print(f"[image] built in {time.time() - start:.0f} s")
    yield rel
    docker("rmi", "-f", TAG, check=False)
    # the build's own cache entries go with its image (dozens of GB over many CI runs), and so does the wheelhouse
    # image it replaced (left untagged); others' entries and images stay
    for entry in build_cache() - cached:
        docker("builder", "prune", "-af", "--filter", f"id={entry}", check=False)
    for old in dangling_images() - dangling:
        docker("rmi", old, check=False)


def dangling_images() -> set[str]:
    return set(docker("images", "-q", "--filter", "dangling=true", check=False).stdout.split())


def build_cache() -> set[str]:
    out = docker("system", "df", "-v", "--format", "{{json .BuildCache}}", check=False).stdout.strip()
    return {e["ID"] for e in json.loads(out or "[]") or []}


# what the tests read of the exported file system; every other file is made empty (its name is what they check), so
# the copy takes megabytes where the image takes gigabytes: a full export and its unpacking once filled CI's disk
READ = re.compile(r"(opt/nmtkit|home|root|opt/venv/lib/python[0-9.]+/site-packages/(nmtkit|[^/]+\.dist-info))/.*|"
                  r"var/lib/dpkg/info/[^/]+\.list")


@pytest.fixture(scope="session")
def exported(image, tmp_path_factory):
    """The image's file system, streamed out of a container made (never started) from it: the files the tests read
    in full, every other regular file as an empty one of the same name, links as links."""
    name = f"nmtkit-x-{uuid.uuid4().hex[:8]}"
    docker("create", "--name", name, TAG)
    fs = tmp_path_factory.mktemp("fs")
    try:
        proc = subprocess.Popen([DOCKER, "export", name], stdout=subprocess.PIPE)
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            for m in tar:
                if m.isdir() or m.issym() or (m.isfile() and READ.fullmatch(m.name.lstrip("./"))):
                    tar.extract(m, fs, set_attrs=False, filter="fully_trusted")
                elif m.isfile() or m.islnk():
                    dest, target = fs / m.name, fs / m.linkname
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    if m.islnk() and READ.fullmatch(m.name.lstrip("./")) and target.is_file():
                        shutil.copyfile(target, dest)
                    else:
                        dest.touch()
        assert proc.wait() == 0, f"docker export {name}: rc {proc.returncode}"
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
