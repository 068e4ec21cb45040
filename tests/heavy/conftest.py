"""The heavy suites' Docker fixtures: the students' image, built once a CI run as course staff build it (`nmtkit
release --out DIR`, then `make image` there: imagebuild.py), the course run once with the solutions in it, and
networks on a 10.x subnet whose containers and volumes are removed at the end, also on failure. Tests that need no
Docker never touch them."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path

import imagebuild
import pytest
from dockertools import DOCKER, PREBUILT, TAG, course, docker

from nmtkit.course import INSTRUCTOR_KIT


@pytest.fixture(scope="session")
def image(tmp_path_factory):
    """The release the students' image (tagged TAG) was built from: scripts/test-all.sh's build when it made one
    (NMTKIT_TEST_RELEASE: one build for every worker of a CI run), else one made here once a session."""
    if not INSTRUCTOR_KIT:
        pytest.skip("the students' image is built from a release, which only the instructor's kit makes")
    if PREBUILT:
        assert docker("image", "inspect", TAG, check=False).returncode == 0, f"{TAG}: the prebuilt image is gone"
        yield Path(os.environ["NMTKIT_TEST_RELEASE"])
        return
    rel, before = imagebuild.build(tmp_path_factory.mktemp("release"), TAG)
    yield rel
    imagebuild.remove(TAG, before)


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


def network():
    """A network on a 10.x subnet, and the containers and volumes made on it: all removed at the end."""
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


net = pytest.fixture(network, name="net")  # a test's own
session_net = pytest.fixture(network, name="session_net", scope="session")


@pytest.fixture(scope="session")
def solved_course(image, session_net, tmp_path_factory):
    """The course with the instructor's solutions put in, run once a session in the image under a laptop's limits
    (`--memory 4g --cpus 2`): (its result, seconds, cgroup peak bytes, the solved notebooks). The image's and the
    release's suites both assert on this one run, the longest of the heavy suites (~10 min on 2 cores)."""
    from solutions import put_solutions
    solved = put_solutions(image / "notebooks", tmp_path_factory.mktemp("solved") / "notebooks")
    return (*course(session_net, solved), solved)


# pytest-xdist's groups (scripts/test-all.sh: `-n 2 --dist loadgroup`): a group's tests run on one worker, in order.
# Each suite is a group of its own, so the session fixtures each needs are made once: the image's two suites share
# the image's exported file system and the course run with the solutions (so does the release's test of that run).
# Across groups nothing is shared but dockerd: every container, volume and network has a name of its own, and no
# test lists or prunes what is not its own. The image itself is built before the workers start (imagebuild.py).
GROUPS = {"test_image": "image", "test_image_course": "image", "test_hub": "hub", "test_marking": "hub",
          "test_marking_hub": "hub", "test_sandbox_grade": "sandbox", "test_release_kit": "release",
          "test_gpu_build": "gpu", "test_arm64": "arm64", "test_arm64_course": "arm64"}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(items):
    for item in (i for i in items if i.path.parent == Path(__file__).parent):  # a hook sees every item
        if item.path.stem not in GROUPS:  # ungrouped, its module's tests would be spread and their fixtures remade
            raise pytest.UsageError(f"{item.path}: a heavy suite needs its xdist group in tests/heavy/conftest.py")
        group = "image" if "solved_course" in getattr(item, "fixturenames", ()) else GROUPS[item.path.stem]
        item.add_marker(pytest.mark.xdist_group(group))
