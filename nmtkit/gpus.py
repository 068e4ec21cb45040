"""GPU and driver facts from NVML (`nvidia-ml-py`, imported as `pynvml`): which GPUs, their memory, compute
capability and driver, and who holds them. TensorFlow-free and on the ground floor, so doctor, the monitor, the
trainer and the engines all read the same facts without importing each other. Without NVML or a driver every
function answers "no GPU" ([] or None), the normal case on a laptop."""
from __future__ import annotations

import os

# TensorFlow 2.18.1 ships machine code for sm_60/70/80/89 and only PTX for compute_90 (H100, H200): the driver
# compiles that PTX. Its embedded PTX is ISA 8.3 (read off libtensorflow_cc.so.2; a test reads it again), which
# CUDA 12.3 emits and a driver of the 545 series or newer compiles.
PTX_ONLY_FROM = (9, 0)
PTX_ISA = "8.3"
PTX_DRIVER = 545
# The driver CUDA 12.5 (TensorFlow's wheels' libraries) names; 525+ runs them through minor-version compatibility.
CUDA_DRIVER = 555


def open_nvml(nvml=None) -> tuple[object | None, list, str]:
    """(nvml module, device handles, reason): no handles and a reason when there is no usable GPU. The caller
    shuts NVML down (nvmlShutdown) when it has handles."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return None, [], "nvidia-ml-py (pynvml) is not installed"
    try:
        nvml.nvmlInit()
        count = nvml.nvmlDeviceGetCount()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    except Exception as e:  # noqa: BLE001  NVMLError_LibraryNotFound, DriverNotLoaded, ...: all mean "no GPU here"
        return None, [], f"NVML unavailable ({e})"
    if not handles:
        return nvml, [], "NVML found no GPU"
    return nvml, handles, ""


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_gpus(env=None) -> tuple[list, str]:
    """GPUs as NVML sees them ({"name", "memory_gb", "driver", "capability": (major, minor) or None, "mig": a MIG
    slice or not}), or ([], why not). A GPU in MIG mode counts as its slices, each with its own memory (NVML gives
    the parent the whole card's), and only those CUDA_VISIBLE_DEVICES names when it names MIG devices (`env`,
    default os.environ): those are what TensorFlow was given."""
    try:
        import pynvml
    except ImportError:
        return [], "nvidia-ml-py not installed"
    try:
        pynvml.nvmlInit()
    except Exception as e:  # noqa: BLE001  no driver: the normal case on a laptop
        return [], f"no NVIDIA driver ({type(e).__name__})"
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            try:
                capability = tuple(pynvml.nvmlDeviceGetCudaComputeCapability(h))
            except Exception:  # noqa: BLE001  an old NVML without the call
                capability = None
            name = _text(pynvml.nvmlDeviceGetName(h))
            for d in mig_devices(pynvml, h) or [h]:
                gpus.append({"name": name if d is h else f"{name} MIG {_mig_profile(pynvml, d)}",
                             "memory_gb": round(pynvml.nvmlDeviceGetMemoryInfo(d).total / 2**30, 1),
                             "driver": driver, "capability": capability, "mig": d is not h,
                             **({"uuid": _text(pynvml.nvmlDeviceGetUUID(d))} if d is not h else {})})
        visible = [v.strip() for v in (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES", "").split(",")]
        if any(v.startswith("MIG-") for v in visible):
            gpus = [g for g in gpus if not g["mig"] or g["uuid"] in visible]
        return gpus, ""
    finally:
        pynvml.nvmlShutdown()


def mig_devices(nvml, handle) -> list:
    """The MIG slices' handles of a GPU in MIG mode ([] when it is not, or NVML cannot say)."""
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        if current != getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
            return []
        count = nvml.nvmlDeviceGetMaxMigDeviceCount(handle)
    except Exception:  # noqa: BLE001  no MIG support (most GPUs, older NVML): a whole GPU
        return []
    found = []
    for i in range(count):
        try:
            found.append(nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i))
        except Exception:  # noqa: BLE001  an empty slot (NVMLError_NotFound)
            continue
    return found


def _mig_profile(nvml, handle) -> str:
    """'3g.20gb' from a MIG device's name ('NVIDIA A100-SXM4-40GB MIG 3g.20gb'), else the name."""
    name = _text(nvml.nvmlDeviceGetName(handle))
    return name.rsplit("MIG ", 1)[-1] if "MIG " in name else name


def gpu_uuids() -> list[str]:
    """The UUIDs of the GPUs this process can open (NVML), [] without NVML. Under Slurm's ConstrainDevices=yes a
    task opens only its own GPUs, which CUDA numbers from 0 in every task: the UUIDs tell them apart."""
    nvml, handles, _ = open_nvml()
    found = []
    try:
        for h in handles:
            try:
                found.append(_text(nvml.nvmlDeviceGetUUID(h)))
            except Exception:  # noqa: BLE001  a GPU of another task's cgroup: not this process's
                continue
    finally:
        if handles:
            nvml.nvmlShutdown()
    return found


def driver_major(driver: str) -> int | None:
    """550 from '550.54.15'; None when it does not parse."""
    try:
        return int(str(driver).split(".")[0])
    except ValueError:
        return None


def ptx_driver_problem(gpus: list) -> str:
    """Why TensorFlow 2.18.1 cannot run on these GPUs with this driver ('' when it can): a GPU TensorFlow has only
    PTX for needs a driver that compiles PTX ISA 8.3."""
    for g in gpus:
        cap, major = g.get("capability"), driver_major(g.get("driver", ""))
        if cap and tuple(cap) >= PTX_ONLY_FROM and major is not None and major < PTX_DRIVER:
            return (f"{g['name']} (compute capability {cap[0]}.{cap[1]}) with driver {g['driver']}: TensorFlow "
                    f"2.18.1 ships only PTX for compute_90 (ISA {PTX_ISA}, CUDA 12.3's), which the driver compiles "
                    f"and which needs driver {PTX_DRIVER} or newer; install a {PTX_DRIVER}+ driver (e.g. `sudo "
                    "apt-get install nvidia-driver-550`, a long-lived branch, then reboot)")
    return ""


def gpu_holders(engine_pids=()) -> list[dict]:
    """Per GPU (NVML): its memory in MiB, used and total, and the processes other than `engine_pids` holding it
    ({"pid", "mib", "name"}); [] without NVML. TensorFlow never gives memory back, so an idle notebook kernel
    that trained on GPU 0 still holds it when notebook 03's rank 0 needs it."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001  no NVML, no driver: nothing holds a GPU here
        return []
    skip = set(engine_pids)
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            procs = []
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                if p.pid in skip:
                    continue
                try:
                    import psutil
                    name = " ".join(psutil.Process(p.pid).cmdline()[:3])[:80]
                except Exception:  # noqa: BLE001  gone, or another container's
                    name = "?"
                procs.append({"pid": p.pid, "mib": (p.usedGpuMemory or 0) / 2**20, "name": name})
            out.append({"gpu": i, "used_mib": mem.used / 2**20, "total_mib": mem.total / 2**20, "held_by": procs})
        return out
    finally:
        pynvml.nvmlShutdown()


def gpu_memory() -> float | None:
    """Bytes of the smallest GPU NVML sees (every rank's batch must fit its own), None without one."""
    gpus, _ = nvml_gpus()
    return min(g["memory_gb"] for g in gpus) * 2**30 if gpus else None


def tensorflow_blind(gpus: list, built_with_cuda: bool, cuda_visible: str | None) -> str:
    """One line for NVML seeing `gpus` while TensorFlow lists none, naming the likely cause first."""
    names = ", ".join(g["name"] for g in gpus)
    head = f"NVML sees {len(gpus)} GPU(s) ({names}, driver {gpus[0].get('driver', '?')}) but TensorFlow lists none"
    if cuda_visible is not None and cuda_visible.strip() in ("", "-1", "none", "NoDevFiles"):
        return f"{head}: CUDA_VISIBLE_DEVICES={cuda_visible!r} hides them; unset it (or list the GPUs' indices)"
    if not built_with_cuda:
        return (f"{head}: this TensorFlow is a CPU build; `NMTKIT_GPU=1 make setup` (pip install "
                f"'tensorflow[and-cuda]==2.18.1')")
    major = driver_major(gpus[0].get("driver", ""))
    old = f"driver {gpus[0].get('driver')} may be too old for CUDA 12.5 (555+, or 525+ with its compatible " \
          "minor versions); " if major is not None and major < CUDA_DRIVER else ""
    return (f"{head}: {old}check `nvidia-smi`, CUDA_VISIBLE_DEVICES, and TensorFlow's CUDA libraries "
            f"(`nmtkit doctor` shows TensorFlow's driver messages); then `NMTKIT_GPU=1 make setup`")
