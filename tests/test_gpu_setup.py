"""scripts/setup.sh on a GPU VM, without a GPU: the Horovod build plan against a fake driver (nvidia-smi), a fake CUDA
toolkit (nvcc) and a fake nvidia-nccl-cu12 wheel; Horovod 0.28.1's own FindNCCL.cmake, run by the venv's cmake, finds
NCCL with that plan (and does not without it); the wheel cache key changes with the TensorFlow build."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "scripts" / "setup.sh"
HVD = "0.28.1"


def _cmake() -> str | None:
    here = Path(sys.executable).parent / "cmake"
    return str(here) if here.exists() else shutil.which("cmake")


def _sdist(tmp: Path) -> Path:
    """Horovod's sdist: setup.sh's cache first (it keeps the source it built), else PyPI."""
    root = Path(os.environ.get("NMTKIT_WHEEL_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                / "nmtkit" / "wheels")
    cached = root / "sdist" / f"horovod-{HVD}.tar.gz"
    if cached.exists():
        return cached
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        f"horovod=={HVD}", "-d", str(tmp)], capture_output=True, text=True, timeout=240)
    got = tmp / f"horovod-{HVD}.tar.gz"
    if r.returncode or not got.exists():
        pytest.skip(f"Horovod {HVD}'s sdist is neither in {cached.parent} (make setup keeps it) nor downloadable: "
                    f"{r.stderr.strip().splitlines()[-1:]}")
    return got


@pytest.fixture
def gpu_vm(tmp_path):
    """A venv whose python sees a fake tensorflow dist-info and a fake nvidia.nccl wheel; nvidia-smi and nvcc."""
    site = tmp_path / "site"
    info = site / f"tensorflow-2.18.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.18.1\n")
    (info / "RECORD").write_text("tensorflow/__init__.py,sha256=one,1\n")
    nccl = site / "nvidia" / "nccl"
    (nccl / "include").mkdir(parents=True)
    (nccl / "lib").mkdir()
    (nccl / "__init__.py").write_text("")
    (nccl / "include" / "nccl.h").write_text("#define NCCL_MAJOR 2\n#define NCCL_VERSION_CODE 22103\n")
    (nccl / "lib" / "libnccl.so.2").write_bytes(b"\x7fELF")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    py = venv / "bin" / "python"
    py.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} \"$@\"\n")
    bins = tmp_path / "bin"
    bins.mkdir()
    smi = bins / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncase \"$*\" in *compute_cap*) printf '8.6\\n8.0\\n8.6\\n';; "
                   "*) echo 'GPU 0: NVIDIA A10 (UUID: GPU-0)';; esac\n")
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    nvcc = cuda / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.5, V12.5.82'\n")
    for f in (py, smi, nvcc):
        f.chmod(0o755)
    env = dict(os.environ, VENV=str(venv), NMTKIT_GPU="1", CUDA_HOME=str(cuda), PATH=f"{bins}:{os.environ['PATH']}",
               NMTKIT_WHEEL_CACHE=str(tmp_path / "cache"))
    for k in ("HOROVOD_NCCL_HOME", "HOROVOD_BUILD_CUDA_CC_LIST", "HOROVOD_CUDA_HOME"):
        env.pop(k, None)
    return {"env": env, "nccl": nccl, "info": info, "cuda": cuda}


def _plan(env) -> dict:
    r = subprocess.run(["bash", str(SETUP), "--horovod-plan"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


def test_plan_links_nccl_from_the_wheel_and_passes_cuda_and_architectures(gpu_vm):
    plan = _plan(gpu_vm["env"])
    nccl = gpu_vm["nccl"]
    assert plan["HOROVOD_GPU_OPERATIONS"] == "NCCL"
    assert plan["HOROVOD_NCCL_LINK"] == "SHARED"
    assert plan["HOROVOD_NCCL_HOME"] == str(nccl) and plan["HOROVOD_NCCL_LIB"] == str(nccl / "lib")
    assert plan["HOROVOD_CUDA_HOME"] == str(gpu_vm["cuda"])
    assert plan["HOROVOD_BUILD_CUDA_CC_LIST"] == "80,86"  # from nvidia-smi, deduplicated, as Horovod wants them
    assert f"-Wl,-rpath,{nccl}/lib" in plan["LDFLAGS"]  # libnccl.so.2 resolves at run time
    assert os.readlink(nccl / "lib" / "libnccl.so") == "libnccl.so.2"
    assert "release 12.5" in plan["configuration"]


def test_the_cache_key_follows_the_tensorflow_build_and_the_gpus(gpu_vm):
    env = gpu_vm["env"]
    first = _plan(env)["cache"]
    assert _plan(env)["cache"] == first
    (gpu_vm["info"] / "RECORD").write_text("tensorflow/__init__.py,sha256=two,1\n")  # same version, other build
    other_build = _plan(env)["cache"]
    assert other_build != first and "tf-2.18.1" in other_build
    assert _plan(dict(env, HOROVOD_BUILD_CUDA_CC_LIST="90"))["cache"] != other_build
    assert _plan(dict(env, NMTKIT_GPU="0"))["cache"] not in (first, other_build)


def test_without_nvcc_setup_names_the_toolkit_to_install(gpu_vm, tmp_path):
    env = dict(gpu_vm["env"], CUDA_HOME=str(tmp_path / "nowhere"))
    r = subprocess.run(["bash", str(SETUP), "--horovod-plan"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "CUDA toolkit 12.5" in r.stderr and "cuda-toolkit-12-5" in r.stderr


@pytest.mark.skipif(_cmake() is None, reason="no cmake (make setup installs it into the venv)")
def test_horovods_own_findnccl_finds_the_wheel_with_the_plan(gpu_vm, tmp_path):
    with tarfile.open(_sdist(tmp_path)) as tar:
        member = tar.getmember(f"horovod-{HVD}/cmake/Modules/FindNCCL.cmake")
        member.name = "FindNCCL.cmake"
        tar.extract(member, tmp_path / "modules", filter="data")
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(findnccl LANGUAGES CXX)\n"
        f"list(APPEND CMAKE_MODULE_PATH {tmp_path / 'modules'})\nfind_package(NCCL)\n"
        'message(STATUS "RESULT found=${NCCL_FOUND} lib=${NCCL_LIBRARIES}")\n')

    def configure(env, name):
        r = subprocess.run([_cmake(), "-S", str(project), "-B", str(tmp_path / name)], env=env,
                           capture_output=True, text=True, timeout=120)
        return r.stdout + r.stderr

    base = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    nccl = gpu_vm["nccl"]
    # what setup.sh used to pass: HOROVOD_NCCL_HOME at the wheel, which has no libnccl.so
    before = configure(dict(base, HOROVOD_NCCL_HOME=str(nccl)), "before")
    assert "Could NOT find NCCL" in before, before

    plan = _plan(gpu_vm["env"])
    env = dict(base, **{k: v for k, v in plan.items() if k.startswith("HOROVOD_NCCL")})
    after = configure(env, "after")
    assert "Linking against shared NCCL library" in after
    assert f"RESULT found=TRUE lib={nccl}/lib/libnccl.so" in after, after
