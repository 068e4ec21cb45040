"""The students' linux/arm64 image (Apple Silicon's), run under QEMU user-mode emulation (Debian's qemu-user-static and
binfmt-support) on this x86-64 machine: aarch64 inside, TensorFlow and Horovod import, `nmtkit doctor` passes, three
training steps of the tiny profile lower the loss, Horovod's library is AArch64 code, no compiler, and the same user,
port and labels as the amd64 image. CI's arm64 tier (scripts/test-all.sh) builds the image once, kept between runs
with its build cache (`imagebuild.py build-arm64`); run alone, this suite builds it (minutes when cached, about 20
cold). Each step's figures are printed (pytest -s) for bench/README.md."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tarfile
import time

import imagebuild
import pytest
from dockertools import ROOT, TAG, docker, why_not

pytestmark = pytest.mark.skipif(why_not() is not None, reason=why_not() or "")
TRAIN = ["train.steps=3", "train.log_every=1", "train.ckpt_every=0", "eval.every=0", "eval.at_end=false",
         "train.warmup_steps=4"]  # the tiny profile's 100 warm-up steps barely move the loss in 3


@pytest.fixture(scope="module")
def arm64(tmp_path_factory):
    """The arm64 image's tag and the release it was built from."""
    if not os.path.exists("/proc/sys/fs/binfmt_misc/qemu-aarch64"):
        pytest.skip("no QEMU for aarch64: sudo apt-get install -y qemu-user-static binfmt-support")
    tag = os.environ.get("NMTKIT_TEST_ARM64_IMAGE")
    if tag:
        return tag, os.environ["NMTKIT_TEST_ARM64_RELEASE"]
    rel, _ = imagebuild.build(tmp_path_factory.mktemp("release-arm64"), imagebuild.ARM64_TAG, "arm64")
    return imagebuild.ARM64_TAG, str(rel)


def emulated(tag: str, script: str, timeout: int = 1800) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.time()
    out = docker("run", "--rm", "--platform", "linux/arm64", tag, "bash", "-c", script, timeout=timeout, check=False)
    return out, time.time() - t0


def test_aarch64_the_stack_imports_and_doctor_passes(arm64):
    out, took = emulated(arm64[0], "uname -m; python -c 'import time; t = time.time(); import tensorflow as tf, "
                         "horovod.tensorflow as h; print(\"import\", tf.__version__, h.gloo_built(), "
                         "round(time.time() - t, 1))' && nmtkit doctor")
    print(f"\n[arm64] uname, import, doctor: {took:.0f} s\n{out.stdout[-1500:]}")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "aarch64", lines[:2]
    assert re.fullmatch(r"import 2\.18\.1 True [0-9.]+", lines[1]), lines[1]


def test_three_tiny_steps_lower_the_loss(arm64):
    sets = " ".join(f"--set {s}" for s in TRAIN)
    out, took = emulated(arm64[0], f"cd /tmp && nmtkit prepare --data d >/dev/null && echo prepared $SECONDS && "
                         f"nmtkit train --data d --logdir r {sets}")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    steps = re.findall(r"^step (\d)/3 \| loss ([0-9.]+) \|.*?\| ([0-9.,]+) ms/step", out.stdout, re.M)
    prepared = re.search(r"^prepared (\d+)", out.stdout, re.M).group(1)
    print(f"\n[arm64] prepare {prepared} s; " + "; ".join(f"step {s}: loss {loss}, {ms} ms" for s, loss, ms in steps) +
          f"; {took:.0f} s in all")
    losses = [float(loss) for _, loss, _ in steps]
    assert len(losses) == 3 and losses[0] > losses[1] > losses[2], out.stdout[-2000:]


def test_horovod_is_aarch64_code_and_no_compiler(arm64, tmp_path):
    out, _ = emulated(arm64[0], "for c in cc gcc g++ c++ aarch64-linux-gnu-g++-12; do command -v $c; done; "
                      "ls /opt/venv/lib/python3.11/site-packages/horovod/tensorflow/mpi_lib*.so")
    lib = out.stdout.strip().splitlines()[-1]
    assert lib.endswith("aarch64-linux-gnu.so"), out.stdout
    assert [c for c in out.stdout.splitlines() if c.startswith("/")] == [lib], out.stdout  # no compiler found
    name = f"nmtkit-arm64-{os.getpid()}"
    docker("create", "--platform", "linux/arm64", "--name", name, arm64[0])
    try:
        docker("cp", f"{name}:{lib}", str(tmp_path / "mpi_lib.so"))
    finally:
        docker("rm", "-f", name, check=False)
    elf = subprocess.run(["readelf", "-h", str(tmp_path / "mpi_lib.so")], capture_output=True, text=True).stdout
    print(f"\n[arm64] readelf -h {lib}: {re.search(r'Machine:.*', elf).group(0)}")
    assert re.search(r"Machine:\s+AArch64", elf), elf


def test_same_user_port_and_labels_as_the_dockerfile_says(arm64):
    cfg = json.loads(docker("image", "inspect", arm64[0]).stdout)[0]
    commit = open(os.path.join(arm64[1], "COMMIT")).read().strip()
    size = cfg["Size"]
    print(f"\n[arm64] image {arm64[0]}: {size / 1e9:.2f} GB")
    assert cfg["Architecture"] == "arm64" and cfg["Config"]["User"] == "1000"
    assert list(cfg["Config"]["ExposedPorts"]) == ["8888/tcp"]
    labels = cfg["Config"]["Labels"]
    assert labels["org.opencontainers.image.revision"] == commit and labels["nmtkit.kind"] == "students"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def registry(tmp_path):
    """Debian's docker-registry on a free port of localhost, its store in tmp_path; stopped at the end."""
    if not shutil.which("docker-registry") or not shutil.which("buildah") or not shutil.which("skopeo"):
        pytest.skip("needs Debian's docker-registry, buildah and skopeo: sudo apt-get install -y docker-registry "
                    "buildah skopeo")
    port = free_port()
    (tmp_path / "registry.yml").write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path}/store"
                                           f"\nhttp:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen(["docker-registry", "serve", str(tmp_path / "registry.yml")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(50):
        if subprocess.run(["curl", "-sf", f"http://127.0.0.1:{port}/v2/"], capture_output=True).returncode == 0:
            break
        time.sleep(0.2)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=30)


def test_one_name_for_both_architectures(arm64, image, registry):
    """scripts/image-index.sh's OCI index in a registry on localhost, pulled as linux/amd64 and as linux/arm64: each
    pull gives the image whose config the index names for that platform, with the local image's layers."""
    name = f"{registry}/nmtkit-students:latest"
    t0 = time.time()
    out = subprocess.run(["bash", str(ROOT / "scripts" / "image-index.sh")], capture_output=True, text=True,
                         env={**os.environ, "NAME": name, "AMD64": TAG, "ARM64": arm64[0], "TLS_VERIFY": "false"},
                         timeout=3600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    print(f"\n[arm64] index pushed in {time.time() - t0:.0f} s:\n{out.stdout}")
    entries = dict(line.split() for line in out.stdout.splitlines() if line.startswith("linux/"))
    assert sorted(entries) == ["linux/amd64", "linux/arm64"], out.stdout
    pulled = []
    try:
        for platform, local in (("linux/amd64", TAG), ("linux/arm64", arm64[0])):
            docker("pull", "-q", "--platform", platform, name)
            got = json.loads(docker("image", "inspect", name).stdout)[0]
            pulled.append(got["Id"])
            manifest = json.loads(subprocess.run(
                ["skopeo", "inspect", "--tls-verify=false", "--raw", f"docker://{name.rsplit(':', 1)[0]}@"
                 f"{entries[platform]}"], capture_output=True, text=True, check=True).stdout)
            mine = json.loads(docker("image", "inspect", local).stdout)[0]
            print(f"[arm64] {platform}: manifest {entries[platform]}, config {got['Id']}")
            assert got["Architecture"] == platform.split("/")[1] and got["Id"] == manifest["config"]["digest"]
            assert got["RootFS"]["Layers"] == mine["RootFS"]["Layers"]
            for key in ("User", "ExposedPorts", "Entrypoint", "Cmd", "Labels"):
                assert got["Config"][key] == json.loads(docker("image", "inspect", TAG).stdout)[0]["Config"][key], key
    finally:
        docker("rmi", name, *pulled, check=False)  # the pulled copies (new config digests), never the local images


def test_image_save_writes_the_arm64_file_alone(arm64, tmp_path):
    """`make image-save ARCH=arm64`: its own file (a file of both would double every download), holding the arm64
    image only (the docker-save archive's manifest.json and the config it names)."""
    out = tmp_path / "nmtkit-image-arm64.tar.gz"
    t0 = time.time()
    r = subprocess.run(["make", "-C", arm64[1], "image-save", "ARCH=arm64", f"IMAGE={arm64[0]}", f"IMAGE_FILE={out}"],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    print(f"\n[arm64] make image-save ARCH=arm64: {out.stat().st_size / 1e9:.2f} GB in {time.time() - t0:.0f} s")
    files = {}
    with tarfile.open(out, "r|gz") as tar:  # streamed: the archive's JSON files only
        for m in tar:
            if m.isfile() and m.name.endswith(".json"):
                files[m.name] = json.load(tar.extractfile(m))
    manifest = files["manifest.json"]
    assert len(manifest) == 1 and manifest[0]["RepoTags"] == [arm64[0]], manifest
    assert files[manifest[0]["Config"]]["architecture"] == "arm64"
