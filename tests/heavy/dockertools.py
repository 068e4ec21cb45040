"""Helpers of the heavy suites that drive a real dockerd (Debian's docker.io: /usr/bin/docker)."""
from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from pathlib import Path

from nmtkit.course import INSTRUCTOR_KIT

DOCKER = "/usr/bin/docker"
ROOT = Path(__file__).resolve().parents[2]
# the image scripts/test-all.sh built for every heavy suite of a CI run (tests/heavy/imagebuild.py), else one of this
# session's own (conftest's `image`)
PREBUILT = os.environ.get("NMTKIT_TEST_IMAGE") if os.environ.get("NMTKIT_TEST_RELEASE") else None
TAG = PREBUILT or f"nmtkit-students-test-{uuid.uuid4().hex[:8]}:latest"


def docker(*args, check=True, timeout=600, **kw):
    out = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check and out.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: rc {out.returncode}\n{out.stderr[-2000:]}")
    return out


def why_not() -> str | None:
    """Why the image's tests cannot run here (None: they can)."""
    if not INSTRUCTOR_KIT:
        return "the students' image is built from a release, which only the instructor's kit makes"
    if not os.access(DOCKER, os.X_OK):
        return "needs Debian's docker.io (dockerd 20.10) and debootstrap: sudo apt-get install -y docker.io debootstrap"
    if subprocess.run([DOCKER, "info"], capture_output=True).returncode != 0:
        return "dockerd is not running: start it (as root: dockerd --iptables=false &; .ci/run does)"
    return None


def run(net, *args, name=None, timeout=600):
    """`docker run` on the test's network; the container is removed at the end of the test."""
    name = name or f"nmtkit-c-{uuid.uuid4().hex[:8]}"
    net[1]["containers"].append(name)
    return docker("run", "--name", name, "--network", net[0], *args, timeout=timeout)


# the cgroup's peak (v1, then v2), printed after the course so the test can read it
PEAK = ("cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.peak "
        "2>/dev/null || echo 0")


def course(net, notebooks: Path | None = None) -> tuple[subprocess.CompletedProcess, float, int]:
    """`nmtkit course` in the image under --memory 4g --cpus 2 (the release's notebooks, or `notebooks` mounted over
    them): its result, seconds and the cgroup's peak bytes. It also prints the bytes the course wrote (executed
    notebooks and the workspace's runs: what a student's volume holds after it, docs/instructors.md)."""
    mount = ["-v", f"{notebooks}:/opt/nmtkit/notebooks:ro"] if notebooks else []
    t0 = time.time()
    out = run(net, "--memory", "4g", "--cpus", "2", *mount, TAG, "bash", "-c",
              f"nmtkit course --out /tmp/course; rc=$?; echo peak=$({PEAK}) disk=$(du -sb /tmp/course | cut -f1); "
              "exit $rc", timeout=3600)
    peak = int(re.findall(r"peak=(\d+)", out.stdout)[-1])
    return out, time.time() - t0, peak
