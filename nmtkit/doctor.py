"""`nmtkit doctor`: is this machine's stack the one the course needs? One row per check, one fix per failure.

Checks are split into gathering facts (imports, NVML, disk) and judging them (pure functions), so the judging
can be tested with facts from machines we don't have (a GPU node, a Horovod built without TensorFlow).
"""
from __future__ import annotations

import glob
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nmtkit  # noqa: F401  (TF_USE_LEGACY_KERAS=1 before TensorFlow)
from nmtkit.data.wmt import DISK_NEED_GB
from nmtkit.errors import ConfigError
from nmtkit.gpus import nvml_gpus, ptx_driver_problem

# The pins the kit was verified on (pyproject.toml holds the same; a test keeps them in step).
TENSORFLOW_VERSION = "2.18.1"
TF_KERAS_SERIES = "2.18"
HOROVOD_VERSION = "0.28.1"
PYTHON_RANGE = ((3, 10), (3, 12))
MIN_FREE_GB = 1.0  # a profile on its own synthetic data (tiny): the data, a few small checkpoints, the logs

HOROVOD_REINSTALL = ("reinstall Horovod against this TensorFlow: `make setup` (or: HOROVOD_WITH_TENSORFLOW=1 "
                     "HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 "
                     "pip install --no-build-isolation --no-cache-dir --force-reinstall horovod==0.28.1"
                     "; add HOROVOD_GPU_OPERATIONS=NCCL on GPU nodes)")


@dataclass
class Check:
    name: str
    value: str
    ok: bool = True
    fix: str = ""          # what to do when not ok


@dataclass
class Facts:
    """What doctor found; every field is plain data so judging is testable."""
    python: tuple = field(default_factory=lambda: tuple(sys.version_info[:3]))
    tensorflow: str | None = None
    tensorflow_error: str = ""
    keras_flavour: str | None = None        # "tf_keras" or "keras3"
    tf_keras: str | None = None
    horovod: str | None = None
    horovod_error: str = ""
    horovod_tf_built: bool = False
    horovod_gloo: bool = False
    horovod_mpi: bool = False
    horovod_nccl: bool = False
    horovod_cuda: bool = False
    horovod_libs: dict = field(default_factory=dict)  # GPU libraries of Horovod's TensorFlow op library -> path
    driver_clues: list = field(default_factory=list)  # TensorFlow's own lines about the driver and CUDA libraries
    tf_gpus: list = field(default_factory=list)
    nvml_gpus: list = field(default_factory=list)   # [{"name", "memory_gb", "driver"}]
    nvml_error: str = ""
    versions: dict = field(default_factory=dict)    # ipyparallel, sentencepiece, sacrebleu
    disk_path: str = "data"
    disk_free_gb: float | None = None
    profile: str = "tiny"                           # the profile whose disk need is checked (disk_need)


def _version(module: str) -> str | None:
    try:
        return getattr(importlib.import_module(module), "__version__", "?")
    except Exception:  # noqa: BLE001  any import failure means "not usable"
        return None


def gather(data_dir: str | os.PathLike = "data", profile: str | None = None) -> Facts:
    from nmtkit.config import PROFILE_ENV
    f = Facts(profile=profile or os.environ.get(PROFILE_ENV) or "tiny")
    try:
        from nmtkit.keras2 import keras_flavour
        f.keras_flavour = keras_flavour()  # imports TensorFlow first, without its CUDA-probe chatter
        import tensorflow as tf
        f.tensorflow = tf.__version__
        f.tf_gpus = [d.name for d in tf.config.list_physical_devices("GPU")]
    except Exception as e:  # noqa: BLE001
        f.tensorflow_error = f"{type(e).__name__}: {e}"
    f.tf_keras = _version("tf_keras")
    try:
        import horovod
        f.horovod = horovod.__version__
        import horovod.tensorflow as hvd
        f.horovod_tf_built = True
        f.horovod_gloo = bool(hvd.gloo_built())
        f.horovod_mpi = bool(hvd.mpi_built())
        f.horovod_nccl = bool(hvd.nccl_built())
        f.horovod_cuda = bool(hvd.cuda_built())
        f.horovod_libs = linked_libraries(os.path.dirname(hvd.__file__), ("libnccl", "libcudart"))
    except Exception as e:  # noqa: BLE001
        f.horovod_error = f"{type(e).__name__}: {e}".splitlines()[0]
    f.nvml_gpus, f.nvml_error = nvml_gpus()
    from nmtkit.keras2 import nvidia_driver_present
    if f.nvml_gpus or nvidia_driver_present():
        f.driver_clues = driver_clues()
    for mod in ("ipyparallel", "sentencepiece", "sacrebleu"):
        f.versions[mod] = _version(mod)
    path = Path(data_dir)
    probe = next((p for p in [path, *path.resolve().parents] if p.exists()), Path("."))
    f.disk_path = str(data_dir)
    f.disk_free_gb = shutil.disk_usage(probe).free / 1e9
    return f


def linked_libraries(package_dir: str, names: tuple) -> dict:
    """{library: resolved path or 'not found'} for the `names` Horovod's TensorFlow op library links (ldd)."""
    libs = sorted(glob.glob(os.path.join(package_dir, "mpi_lib*.so")))
    if not libs or not shutil.which("ldd"):
        return {}
    try:
        out = subprocess.run(["ldd", libs[0]], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", line)
        if m and m.group(1).startswith(names):
            found[m.group(1)] = m.group(2).strip()
    return found


def driver_clues(timeout: float = 120) -> list[str]:
    """What TensorFlow says about the driver when it looks for GPUs, at full log level (the kit and the Makefile
    quieten it elsewhere): 'failed call to cuInit', 'Cannot dlopen some GPU libraries', ..."""
    from nmtkit.keras2 import DRIVER_CLUES
    code = "import tensorflow as tf; tf.config.list_physical_devices('GPU')"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_USE_LEGACY_KERAS="1")
    try:
        err = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=timeout).stderr
    except (OSError, subprocess.SubprocessError) as e:
        return [f"could not run TensorFlow's GPU probe: {e}"]
    return [line.strip()[-200:] for line in err.splitlines() if DRIVER_CLUES.search(line)]


def judge(f: Facts) -> list[Check]:
    """Turn facts into rows; a failed row carries one line saying how to fix it."""
    rows = []
    lo, hi = PYTHON_RANGE
    py = ".".join(map(str, f.python))
    rows.append(Check("Python", py, lo <= tuple(f.python[:2]) <= hi,
                      "use Python 3.10-3.12 (3.11 recommended): sudo apt-get install python3.11 python3.11-venv "
                      "python3.11-dev, then `rm -rf .venv && make setup`"))
    if f.tensorflow is None:
        rows.append(Check("TensorFlow", "missing", False,
                          f"TensorFlow does not import ({f.tensorflow_error}): run `make setup`"))
    else:
        rows.append(Check("TensorFlow", f.tensorflow, f.tensorflow == TENSORFLOW_VERSION,
                          f"the kit is verified on tensorflow=={TENSORFLOW_VERSION} (the newest Horovod 0.28.1 "
                          f"builds against): pip install tensorflow=={TENSORFLOW_VERSION}, then rebuild Horovod "
                          "(`make setup`)"))
    keras_ok = f.keras_flavour == "tf_keras" and (f.tf_keras or "").startswith(TF_KERAS_SERIES)
    rows.append(Check("Keras", f"tf-keras {f.tf_keras} (Keras 2 API)" if f.keras_flavour == "tf_keras"
                      else f"{f.keras_flavour or 'missing'} (tf-keras {f.tf_keras})", keras_ok,
                      "Keras 3 is active; Horovod 0.28.1 fails under it. Install tf-keras==2.18.0 and make sure "
                      "TF_USE_LEGACY_KERAS=1 is set before TensorFlow is imported (import nmtkit first; in Jupyter "
                      "use the 'nmtkit' kernel), then restart the process"))
    return rows + _judge_horovod(f) + _judge_gpus(f) + _judge_rest(f)


def _judge_horovod(f: Facts) -> list[Check]:
    rows = []
    if f.horovod is None:
        rows.append(Check("Horovod", "missing", False, f"Horovod does not import ({f.horovod_error}): "
                          + HOROVOD_REINSTALL))
    else:
        rows.append(Check("Horovod", f.horovod, f.horovod == HOROVOD_VERSION,
                          f"the kit is verified on horovod=={HOROVOD_VERSION}: " + HOROVOD_REINSTALL))
        rows.append(Check("Horovod frameworks", "TensorFlow" if f.horovod_tf_built else "none", f.horovod_tf_built,
                          "Horovod was built without TensorFlow support: " + HOROVOD_REINSTALL))
        ctrl = ", ".join(n for n, b in (("Gloo", f.horovod_gloo), ("MPI", f.horovod_mpi)) if b) or "none"
        rows.append(Check("Horovod controllers", ctrl, f.horovod_gloo,
                          "Horovod was built without Gloo (nmtkit drives it without MPI): " + HOROVOD_REINSTALL))
        ops = ", ".join(n for n, b in (("NCCL", f.horovod_nccl), ("Gloo", f.horovod_gloo), ("MPI", f.horovod_mpi))
                        if b) or "none"
        gpus = bool(f.tf_gpus or f.nvml_gpus)
        if f.horovod_cuda:
            ops += " (CUDA built)"
        rows.append(Check("Horovod tensor ops", ops, (f.horovod_nccl and f.horovod_cuda) or not gpus,
                          "GPUs are present but Horovod has no NCCL/CUDA operations: `NMTKIT_GPU=1 "
                          "NMTKIT_REBUILD_HOROVOD=1 make setup` (builds with HOROVOD_GPU_OPERATIONS=NCCL; needs "
                          "CUDA toolkit 12.5's nvcc)"))
        if f.horovod_nccl and f.horovod_libs:
            missing = [k for k, v in f.horovod_libs.items() if v == "not found"]
            rows.append(Check("Horovod GPU libraries", ", ".join(f"{k} => {v}" for k, v in f.horovod_libs.items()),
                              not missing, f"{', '.join(missing)} does not resolve for Horovod: `NMTKIT_GPU=1 "
                              "NMTKIT_REBUILD_HOROVOD=1 make setup` (links the nvidia-nccl-cu12 wheel with an rpath)"))
    return rows


def _judge_gpus(f: Facts) -> list[Check]:
    rows = []
    if f.nvml_gpus:
        desc = "; ".join(f"{g['name']} {g['memory_gb']} GB" for g in f.nvml_gpus)
        desc += f" (driver {f.nvml_gpus[0]['driver']})"
    else:
        desc = f"none: CPU mode ({f.nvml_error})" if f.nvml_error else "none: CPU mode"
    rows.append(Check("GPUs (NVML)", desc))
    ptx = ptx_driver_problem(f.nvml_gpus)
    if ptx:
        rows.append(Check("driver for compute capability 9.0", ptx.split(":")[0], False, ptx))
    slices = [g for g in f.nvml_gpus if g.get("mig")]
    if slices:
        kinds = ", ".join(g["name"].rsplit(" MIG ", 1)[-1] for g in slices)
        rows.append(Check("MIG mode", f"on: {len(slices)} slice(s) ({kinds}); batches are planned for a slice's "
                          f"memory ({min(g['memory_gb'] for g in slices)} GB), not the whole GPU's"))
    # a process sees one MIG slice (CUDA enumerates only one), whichever CUDA_VISIBLE_DEVICES names
    tf_ok = not f.nvml_gpus or len(f.tf_gpus) == len(f.nvml_gpus) or bool(slices and f.tf_gpus)
    rows.append(Check("GPUs (TensorFlow)", ", ".join(f.tf_gpus) or "none: CPU mode", tf_ok,
                      "NVML sees GPUs that TensorFlow does not: install tensorflow[and-cuda]==2.18.1 and check "
                      "CUDA_VISIBLE_DEVICES"))
    if f.driver_clues:
        rows.append(Check("TensorFlow's driver messages", " | ".join(f.driver_clues[:3]), tf_ok,
                          "the NVIDIA driver and TensorFlow's CUDA 12.5 libraries do not work together: check "
                          "`nvidia-smi` (a driver for CUDA 12.5: 555 or newer; 525+ runs CUDA 12.5's libraries on "
                          "GPUs TensorFlow ships machine code for, 545+ on compute capability 9.0, H100/H200), then "
                          "`NMTKIT_GPU=1 make setup`"))
    return rows


def _judge_rest(f: Facts) -> list[Check]:
    rows = []
    for mod, v in f.versions.items():
        rows.append(Check(mod, v or "missing", v is not None, f"{mod} does not import: run `make setup`"))
    rows.append(_homework_step(f))
    free, need = f.disk_free_gb, disk_need(f.profile)
    parts = ", ".join(f"{k} {v:.1f}" for k, v in need.items())
    total = sum(need.values())
    rows.append(Check(f"free disk ({f.disk_path})", "?" if free is None else f"{free:.1f} GB (profile {f.profile} "
                      f"needs {total:.1f})", free is None or free >= total,
                      f"less than the {total:.1f} GB profile {f.profile} needs where data and runs go ({parts} GB): "
                      "free space or pass --data elsewhere"))
    return rows


def disk_need(profile_name: str) -> dict:
    """GB of free disk a profile's run needs, by part: preparing its data (WMT16: DISK_NEED_GB) and the
    checkpoints it keeps (train.keep_checkpoints, the best, and the one being written, each the weights and Adam's
    two slots in float32)."""
    from nmtkit.config import profile
    from nmtkit.model.memory import params_of
    try:
        cfg = profile(profile_name)
    except ConfigError:
        return {"the kit's minimum": MIN_FREE_GB}
    if cfg.data.source != "wmt16":
        return {"the kit's minimum": MIN_FREE_GB}
    state = 3 * 4 * params_of(cfg.model, cfg.data.vocab_size) / 1e9
    return {"WMT16 preparation": DISK_NEED_GB, "checkpoints": (cfg.train.keep_checkpoints + 2) * state}


def _homework_step(f: Facts) -> Check:
    """The homework's step (wmt16-base, 256 sentences per GPU) projected against this machine's GPU memory."""
    from nmtkit.config import profile
    from nmtkit.model.memory import GIB, fit
    cfg = profile("wmt16-base")
    device = min(g["memory_gb"] for g in f.nvml_gpus) * GIB if f.nvml_gpus else None
    precision = "mixed_float16" if device else "float32"
    try:
        plan = fit(cfg, cfg.data.vocab_size, device, precision)
    except ConfigError as e:
        return Check("homework step (projected)", str(e), False, "a GPU with more memory")
    return Check("homework step (projected)", f"{plan.projection.total / GIB:.1f} GiB per GPU in {plan.count} "
                 f"micro-batch(es) of {plan.size}, {precision}" + (f" on {device / GIB:.0f} GiB" if device else
                                                                   " (no GPU here)"))


def format_table(rows: list[Check]) -> str:
    width = max(len(r.name) for r in rows)
    lines = [f"{'check':<{width}}  {'':2}  value", "-" * (width + 40)]
    lines += [f"{r.name:<{width}}  {'ok' if r.ok else 'XX'}  {r.value}" for r in rows]
    return "\n".join(lines)


def main(as_json: bool = False, data_dir: str = "data", facts: Facts | None = None, profile: str | None = None) -> int:
    rows = judge(facts or gather(data_dir, profile))
    failed = [r for r in rows if not r.ok]
    if as_json:
        print(json.dumps({"ok": not failed, "checks": [asdict(r) for r in rows]}, indent=2))
    else:
        print(format_table(rows))
        print()
        if failed:
            for r in failed:
                print(f"FAIL {r.name}: {r.fix}")
        else:
            print("healthy: the stack is ready")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main("--json" in sys.argv))
