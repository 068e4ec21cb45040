"""The students' image, built as course staff build it (`nmtkit release --out DIR`, then `make image` there) with a
real dockerd: no compiler in it, nothing of the instructor's kit, the release's commit recorded, JupyterLab on the
published port, the course copied into the work volume once (never over a notebook), another NB_UID. Containers,
volumes and the network live on a 10.x subnet the tests choose and are removed at the end, also on failure."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from nmtkit.course import INSTRUCTOR_KIT

DOCKER = "/usr/bin/docker"
ROOT = Path(__file__).resolve().parents[2]


def docker(*args, check=True, timeout=600, **kw):
    out = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check and out.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: rc {out.returncode}\n{out.stderr[-2000:]}")
    return out


def _why_not() -> str | None:
    if not INSTRUCTOR_KIT:
        return "the students' image is built from a release, which only the instructor's kit makes"
    if not os.access(DOCKER, os.X_OK):
        return "needs Debian's docker.io (dockerd 20.10) and debootstrap: sudo apt-get install -y docker.io debootstrap"
    if subprocess.run([DOCKER, "info"], capture_output=True).returncode != 0:
        return "dockerd is not running: start it (as root: dockerd --iptables=false &; .ci/run does)"
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")
TAG = f"nmtkit-students-test-{uuid.uuid4().hex[:8]}:latest"


@pytest.fixture(scope="module")
def image(tmp_path_factory):
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


def run(net, *args, name=None):
    name = name or f"nmtkit-c-{uuid.uuid4().hex[:8]}"
    net[1]["containers"].append(name)
    return docker("run", "--name", name, "--network", net[0], *args)


def test_no_compiler_and_the_stack_imports(image, net):
    out = run(net, "--rm", TAG, "bash", "-c", "for c in cc gcc g++ c++; do command -v $c; done; "
              "python -c 'import tensorflow, horovod.tensorflow as h; print(\"ok\", h.gloo_built())'")
    assert out.stdout.strip().splitlines()[-1] == "ok True", out.stdout
    assert not [line for line in out.stdout.splitlines() if line.startswith("/")], out.stdout


def test_the_release_commit_is_in_a_label_and_a_file(image, net):
    commit = (image / "COMMIT").read_text().strip()
    label = docker("image", "inspect", "-f", '{{index .Config.Labels "org.opencontainers.image.revision"}}', TAG)
    assert label.stdout.strip() == commit
    assert run(net, "--rm", TAG, "cat", "/opt/nmtkit/COMMIT").stdout.strip() == commit


def test_nothing_of_the_instructors_kit_in_the_image(image, net, tmp_path):
    from nmtkit.course.instructor.release import INSTRUCTOR_MODULES
    name = f"nmtkit-x-{uuid.uuid4().hex[:8]}"
    net[1]["containers"].append(name)
    docker("create", "--name", name, TAG)
    tar = tmp_path / "fs.tar"
    docker("export", "-o", str(tar), name)
    fs = tmp_path / "fs"
    fs.mkdir()
    subprocess.run(["tar", "-xf", str(tar), "-C", str(fs)], check=True)
    kit = fs / "opt" / "nmtkit"
    site = next((fs / "opt" / "venv" / "lib").glob("python3*/site-packages"))
    assert not (kit / "nmtkit" / "course" / "instructor").exists() and not (kit / "tests" / "instructor").exists()
    assert not (kit / "tools").exists() and not (kit / "docs" / "instructors.md").exists()
    names = {f"{m}.py" for m in INSTRUCTOR_MODULES}
    leaks = [str(p) for p in (kit / "nmtkit").rglob("*.py") if p.name in names]
    where = [str(kit), str(fs / "home")] + ([str(site / "nmtkit")] if (site / "nmtkit").exists() else [])
    marker = "### BEGIN " + "SOLUTION"  # spelt apart: this file ships in the release, which holds no marker
    grep = subprocess.run(["grep", "-rlI", marker, *where], capture_output=True, text=True)
    leaks += grep.stdout.split()
    assert not leaks, leaks[:10]


def test_jupyterlab_copies_the_course_once_and_keeps_edits_and_another_uid_works(image, net):
    vol = f"nmtkit-work-{uuid.uuid4().hex[:8]}"
    net[1]["volumes"].append(vol)
    first = run(net, "-d", "-p", "127.0.0.1::8888", "-v", f"{vol}:/home/jovyan/work", TAG).stdout.strip()
    port = docker("port", first, "8888").stdout.strip().splitlines()[0].rsplit(":", 1)[1]
    deadline, logs = time.time() + 120, ""
    while time.time() < deadline and "token=" not in logs:
        time.sleep(2)
        logs = docker("logs", first).stdout + docker("logs", first).stderr
    assert "token=" in logs and "copied 01_data_prep_bpe.ipynb" in logs, logs[-2000:]
    token = logs.split("token=")[1].split()[0]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/kernelspecs?token={token}", timeout=30) as r:
        assert b'"nmtkit"' in r.read()
    docker("exec", first, "bash", "-c", "echo edited >> /home/jovyan/work/01_data_prep_bpe.ipynb")
    docker("rm", "-f", first)
    again = run(net, "--rm", "-v", f"{vol}:/home/jovyan/work", TAG, "tail", "-c", "7",
                "/home/jovyan/work/01_data_prep_bpe.ipynb")
    assert again.stdout.strip() == "edited"
    other = run(net, "--rm", "--user", "root", "-e", "NB_UID=1234", "-v", f"{vol}:/home/jovyan/work", TAG,
                "bash", "-c", "id -u; touch /home/jovyan/work/x && echo wrote")
    assert other.stdout.split()[-2:] == ["1234", "wrote"], other.stdout


def test_image_save_gives_a_file_docker_load_takes(image, tmp_path):
    out = tmp_path / "img.tar.gz"
    r = subprocess.run(["make", "-C", str(image), "image-save", f"IMAGE={TAG}", f"IMAGE_FILE={out}"],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0 and out.stat().st_size > 100e6, r.stderr[-2000:]
    assert TAG.split(":")[0] in docker("load", "-i", str(out), timeout=1800).stdout
    shutil.rmtree(tmp_path, ignore_errors=True)
