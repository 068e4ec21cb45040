"""Helpers of the heavy suites that drive a real dockerd (Debian's docker.io: /usr/bin/docker)."""
from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

from nmtkit.course import INSTRUCTOR_KIT

DOCKER = "/usr/bin/docker"
ROOT = Path(__file__).resolve().parents[2]
TAG = f"nmtkit-students-test-{uuid.uuid4().hex[:8]}:latest"


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
