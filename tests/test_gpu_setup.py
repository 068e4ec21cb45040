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
    info = site / "tensorflow-2.18.1.dist-info"
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
    assert "CUDA 12.5" in r.stderr and "cuda-keyring" in r.stderr  # NVIDIA's apt repository, its keyring first
    assert "sudo apt-get install -y cuda-nvcc-12-5 cuda-cudart-dev-12-5" in r.stderr  # not the 4-6 GB toolkit


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


def _tool(bins: Path, name: str, script: str) -> None:
    (bins / name).write_text("#!/bin/sh\n" + script + "\n")
    (bins / name).chmod(0o755)


def _setup(env, *args):
    return subprocess.run(["bash", str(SETUP), *args], env=env, capture_output=True, text=True, timeout=120)


def test_a_failed_compute_capability_query_names_the_override_and_honours_it(gpu_vm, tmp_path):
    bins = tmp_path / "bin"
    _tool(bins, "nvidia-smi", "case \"$*\" in *compute_cap*) echo 'Field \"compute_cap\" is not a valid field' >&2; "
                              "exit 2;; *) echo 'GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-0)';; esac")
    r = _setup(gpu_vm["env"], "--horovod-plan")
    err = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(err) == 1 and "HOROVOD_BUILD_CUDA_CC_LIST" in err[0], r.stderr
    plan = _plan(dict(gpu_vm["env"], HOROVOD_BUILD_CUDA_CC_LIST="70"))
    assert plan["HOROVOD_BUILD_CUDA_CC_LIST"] == "70"


@pytest.mark.parametrize("release, caps, needs", [("11.5", "9.0", "11.8"), ("11.0", "8.6", "11.1")])
def test_an_nvcc_too_old_for_a_gpu_is_named_before_the_build(gpu_vm, tmp_path, release, caps, needs):
    _tool(tmp_path / "bin", "nvidia-smi", f"case \"$*\" in *compute_cap*) echo {caps};; *) echo 'GPU 0: H100';; esac")
    _tool(gpu_vm["cuda"] / "bin", "nvcc", f"echo 'Cuda compilation tools, release {release}, V{release}.1'")
    r = _setup(gpu_vm["env"], "--horovod-plan")
    assert r.returncode == 1 and f"nvcc {release}" in r.stderr and f"compute capability {caps}" in r.stderr
    assert f"needs CUDA {needs}" in r.stderr and "cuda-nvcc-12-5 cuda-cudart-dev-12-5" in r.stderr


def test_cuda_13_has_dropped_volta(gpu_vm, tmp_path):
    _tool(tmp_path / "bin", "nvidia-smi", "case \"$*\" in *compute_cap*) echo 7.0;; *) echo 'GPU 0: V100';; esac")
    _tool(gpu_vm["cuda"] / "bin", "nvcc", "echo 'Cuda compilation tools, release 13.0, V13.0.48'")
    r = _setup(gpu_vm["env"], "--horovod-plan")
    assert r.returncode == 1 and "dropped compute capability 7.0" in r.stderr


@pytest.mark.parametrize("gpu", ["0", "1"])
def test_gcc_13_builds_with_gcc_12_when_installed_else_with_horovods_header_fix(gpu_vm, tmp_path, gpu):
    bins = tmp_path / "bin"
    _tool(bins, "g++", "case \"$1\" in -dumpversion) echo 13;; *) echo 'g++ (Ubuntu 13.2.0-23ubuntu4) 13.2.0';; esac")
    env = dict(gpu_vm["env"], NMTKIT_GPU=gpu, NMTKIT_GCC_FALLBACK="12-absent")  # this machine has a real gcc-12
    env.pop("CXX", None)
    patched = _plan(env)
    assert patched["patch"] == "1" and "CXX" not in patched and "headers-fix" in patched["configuration"]
    for name in ("gcc-12", "g++-12"):
        _tool(bins, name, "echo 12.2.0")
    env.pop("NMTKIT_GCC_FALLBACK")
    swapped = _plan(env)
    assert swapped["patch"] == "0" and swapped["CC"] == "gcc-12" and swapped["CXX"] == "g++-12"
    assert swapped["cache"] != patched["cache"]  # a wheel built one way is never reused the other way
    _tool(bins, "g++", "case \"$1\" in -dumpversion) echo 12;; *) echo 'g++ (Debian 12.2.0-14) 12.2.0';; esac")
    plain = _plan(env)
    assert plain["patch"] == "0" and "CXX" not in plain and "cxx=" not in plain["configuration"]


def test_the_header_fix_applies_to_horovods_own_source(tmp_path):
    tree = tmp_path / "src"
    with tarfile.open(_sdist(tmp_path)) as tar:
        for rel in ("horovod/common/common.h", "horovod/common/group_table.h"):
            member = tar.getmember(f"horovod-{HVD}/{rel}")
            tar.extract(member, tree, filter="data")
    root = tree / f"horovod-{HVD}"
    before = (root / "horovod/common/common.h").read_text()
    assert "#include <stdexcept>" not in before  # 0.28.1 lacks it: what gcc 13 trips on
    r = _setup(dict(os.environ), "--patch-horovod-source", str(root))
    assert r.returncode == 0, r.stderr
    common, table = (root / "horovod/common/common.h").read_text(), (root / "horovod/common/group_table.h").read_text()
    assert "#include <memory>\n#include <stdexcept>\n" in common and "#include <queue>\n#include <string>\n" in table
    assert _setup(dict(os.environ), "--patch-horovod-source", str(root)).returncode == 0  # idempotent
    assert (root / "horovod/common/common.h").read_text().count("<stdexcept>") == 1


def test_a_nccl_directory_without_its_library_is_named_not_a_silent_exit(gpu_vm):
    (gpu_vm["nccl"] / "lib" / "libnccl.so.2").unlink()
    r = _setup(gpu_vm["env"], "--horovod-plan")
    assert r.returncode == 1 and "holds no libnccl.so.N" in r.stderr, (r.returncode, r.stderr)


def test_ubuntu_2404s_python_312_without_venv_names_its_own_package(tmp_path):
    # Ubuntu 24.04's only Python is 3.12; Debian here has none: a faked interpreter whose venv module is missing
    bins = tmp_path / "bin"
    bins.mkdir()
    _tool(bins, "python3.12", 'case "$*" in *"import venv"*) exit 1;; *print*) echo 3.12;; *) exit 0;; esac')
    env = dict(os.environ, VENV=str(tmp_path / "new-venv"), PYTHON=str(bins / "python3.12"))
    r = _setup(env)
    assert r.returncode == 1 and "sudo apt-get install -y python3.12-venv" in r.stderr, r.stderr
    assert "python3.11-venv" not in r.stderr
