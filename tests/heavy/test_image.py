"""The students' image, built as course staff build it (`nmtkit release --out DIR`, then `make image` there) with a
real dockerd: no compiler in it, nothing of the instructor's kit, the release's commit recorded, JupyterLab on the
published port, the course copied into the work volume once (never over a notebook), another NB_UID, the image as a
file. Fixtures in conftest.py (the image, a 10.x network removed at the end, also on failure)."""
from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
import uuid

import pytest
from dockertools import TAG, docker, run, why_not

from nmtkit.course import INSTRUCTOR_KIT

pytestmark = pytest.mark.skipif(why_not() is not None, reason=why_not() or "")


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


def test_nothing_of_the_instructors_kit_in_the_image(image, exported):
    if not INSTRUCTOR_KIT:  # why_not() skips the module already; the import below needs the instructor's kit
        pytest.skip("the instructor's module names come with the instructor's kit")
    from nmtkit.course.instructor.release import INSTRUCTOR_MODULES
    fs = exported
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
