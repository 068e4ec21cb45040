"""A GPU-shaped process on a CPU: TensorFlow, tf-keras, Horovod and NVML see GPUs that are not there, so every
"is there a GPU" branch (tf-keras's optimizer XLA, the kit's towers, threads, precision, micro-batches, per-gradient
allreduce, NCCL settings) takes its GPU side, while every kernel still runs on the CPU.

Loaded by sitecustomize.py beside it when NMTKIT_TEST_GPU_SHAPED=<number of GPUs> is set and this folder is on
PYTHONPATH, so processes the test starts (engines, Horovod ranks, bench cases) load it too, before anything is built.
The kit's own tests only: a student release leaves this folder out.

Faked, at the seams the kit and its libraries read:
- TensorFlow's eager Context (what tf.config.* and tf.config.experimental.* call): GPUs listed, visible, with
  details (a Tesla T4, compute capability 7.5); set_visible_devices and set_memory_growth on them are recorded and
  kept, not made (TensorFlow's own RuntimeError once its runtime started is kept too). get_memory_info is not faked:
  it raises, as there is no such device to measure. tf.test.is_built_with_cuda() says True.
- Horovod's build: nccl_built() and cuda_built() say yes (the CPU tensors still go over Gloo).
- NVML: a `pynvml` module with the card's name, memory, UUID, compute capability and driver.
Every faked decision a test may check is appended to NMTKIT_TEST_GPU_SHAPED_RECORD (JSON lines, one per call, any
process) when that variable is set.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import sys
import types

SWITCH, RECORD = "NMTKIT_TEST_GPU_SHAPED", "NMTKIT_TEST_GPU_SHAPED_RECORD"
HERE = os.path.dirname(os.path.abspath(__file__))
CARD = {"name": "Tesla T4", "memory_mib": 15360, "capability": (7, 5), "driver": "550.54.15"}  # a 16 GB T4


def environ(gpus: int = 1, record: str | os.PathLike | None = None, base: dict | None = None) -> dict:
    """An environment whose Python processes are GPU-shaped with `gpus` GPUs (this folder first on PYTHONPATH)."""
    env = dict(os.environ if base is None else base, **{SWITCH: str(gpus), "TF_USE_LEGACY_KERAS": "1"})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, env.get("PYTHONPATH", "")) if p)
    if record is not None:
        env[RECORD] = str(record)
    return env


def calls(path: str | os.PathLike) -> list[dict]:
    """The records every GPU-shaped process appended to `path`."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def count() -> int:
    try:
        return max(0, int(os.environ.get(SWITCH) or 0))
    except ValueError:
        return 1  # "yes", "true": one GPU


def record(call: str, **fields) -> None:
    path = os.environ.get(RECORD)
    if not path:
        return
    line = json.dumps({"pid": os.getpid(), "call": call, **fields}, default=str) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # one write a line: processes do not mix
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


# --- NVML (nmtkit.gpus, nmtkit.monitor, preflight read it through `pynvml`) ----------------------------------

def fake_nvml(n: int) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.__file__ = __file__
    mem = types.SimpleNamespace(total=CARD["memory_mib"] * 2**20, used=0, free=CARD["memory_mib"] * 2**20)

    class NVMLError(Exception):
        pass

    def handle(i):
        if not 0 <= i < n:
            raise NVMLError(f"Invalid Argument: no GPU {i}")
        return i

    m.NVMLError = NVMLError
    m.nvmlInit = m.nvmlShutdown = lambda: None
    m.nvmlSystemGetDriverVersion = lambda: CARD["driver"]
    m.nvmlDeviceGetCount = lambda: n
    m.nvmlDeviceGetHandleByIndex = handle
    m.nvmlDeviceGetName = lambda h: CARD["name"]
    m.nvmlDeviceGetUUID = lambda h: f"GPU-6a1f0e2c-0000-4000-8000-{h:012d}"
    m.nvmlDeviceGetMemoryInfo = lambda h: mem
    m.nvmlDeviceGetCudaComputeCapability = lambda h: CARD["capability"]
    m.nvmlDeviceGetComputeRunningProcesses = lambda h: []
    m.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=0, memory=0)
    m.nvmlDeviceGetPowerUsage = lambda h: 27_000  # milliwatts: an idle T4
    return m


# --- TensorFlow's eager context: every tf.config device call goes through it -----------------------------------

def patch_context(context) -> None:
    Context, PhysicalDevice, LogicalDevice = context.Context, context.PhysicalDevice, context.LogicalDevice
    fakes = [PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(count())]
    state = {"visible": list(fakes), "growth": {}}
    real = {name: getattr(Context, name) for name in (
        "list_physical_devices", "get_visible_devices", "set_visible_devices", "list_logical_devices",
        "get_memory_growth", "set_memory_growth", "get_device_details")}

    def started(ctx) -> bool:  # TensorFlow refuses device changes once its runtime exists; so does the fake
        return ctx._context_handle is not None

    def list_physical_devices(self, device_type=None):
        if device_type == "GPU":
            return list(fakes)
        return real["list_physical_devices"](self, device_type) + (list(fakes) if device_type is None else [])

    def get_visible_devices(self, device_type=None):
        if device_type == "GPU":
            return list(state["visible"])
        return real["get_visible_devices"](self, device_type) + (list(state["visible"]) if device_type is None else [])

    def set_visible_devices(self, devices, device_type=None):
        devices = devices if isinstance(devices, list) else [devices]
        gpus, others = [d for d in devices if d in fakes], [d for d in devices if d not in fakes]
        record("set_visible_devices", devices=[d.name for d in devices], device_type=device_type)
        if device_type in (None, "GPU") and gpus != state["visible"]:
            if started(self):
                raise RuntimeError("Visible devices cannot be modified after being initialized")
            state["visible"] = gpus
        if device_type != "GPU" and (others or device_type is not None):
            real["set_visible_devices"](self, others, device_type)

    def list_logical_devices(self, device_type=None):
        gpus = [LogicalDevice(f"/device:GPU:{i}", "GPU") for i in range(len(state["visible"]))]
        if device_type == "GPU":
            return gpus
        return real["list_logical_devices"](self, device_type) + (gpus if device_type is None else [])

    def get_memory_growth(self, dev):
        return state["growth"].get(dev.name) if dev in fakes else real["get_memory_growth"](self, dev)

    def set_memory_growth(self, dev, enable):
        if dev not in fakes:
            return real["set_memory_growth"](self, dev, enable)
        record("set_memory_growth", device=dev.name, enable=bool(enable))
        if state["growth"].get(dev.name) == enable:
            return None
        if started(self):
            raise RuntimeError("Physical devices cannot be modified after being initialized")
        state["growth"][dev.name] = enable
        return None

    def get_device_details(self, device):
        if device in fakes:
            return {"device_name": CARD["name"], "compute_capability": CARD["capability"]}
        return real["get_device_details"](self, device)

    for fn in (list_physical_devices, get_visible_devices, set_visible_devices, list_logical_devices,
               get_memory_growth, set_memory_growth, get_device_details):
        setattr(Context, fn.__name__, fn)


def patch_test(test) -> None:
    test.is_built_with_cuda = lambda: True  # a GPU machine runs tensorflow[and-cuda]


def patch_horovod(basics) -> None:
    # what `NMTKIT_GPU=1 make setup` builds on a GPU machine; the kit reads these to choose NCCL's paths
    basics.HorovodBasics.nccl_built = lambda self: 1
    basics.HorovodBasics.cuda_built = lambda self: True


PATCHES = {"tensorflow.python.eager.context": patch_context, "tensorflow.python.platform.test": patch_test,
           "horovod.common.basics": patch_horovod}


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Patches each module of PATCHES the moment it has executed, before any caller can use it."""

    def __init__(self):
        self.loaders: dict = {}  # module name -> its real loader

    def find_spec(self, name, path=None, target=None):
        if name not in PATCHES:
            return None
        sys.meta_path.remove(self)  # the real spec, from the finders after this one
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self.loaders[name] = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self.loaders[spec.name].create_module(spec)

    def exec_module(self, module):
        self.loaders[module.__name__].exec_module(module)
        PATCHES[module.__name__](module)


def install() -> None:
    """Make this process GPU-shaped (NMTKIT_TEST_GPU_SHAPED GPUs); call before TensorFlow is imported."""
    n = count()
    if not n:
        return
    if "tensorflow" in sys.modules:
        raise RuntimeError("gpushape: TensorFlow was imported before the switch could shape it")
    sys.modules["pynvml"] = fake_nvml(n)
    sys.meta_path.insert(0, _AfterImport())
