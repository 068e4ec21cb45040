"""System samplers: what the GPUs, CPUs, memory and network did while a run trained.

`Sampler` is a background thread (one per rank) that every `interval` seconds appends one flat record to a JSONL
file (`nmtkit.runs.monitor_log`) and, optionally, TensorBoard scalars in a directory of its own:

    {"time": 1700000000.1, "host": "node1", "rank": 0, "n_gpus": 2,
     "cpu_percent": 87.5, "cpu_count": 8, "proc_cpu_percent": 181.0, "mem_used_mib": 5210.4, "mem_percent": 33.1,
     "proc_rss_mib": 1480.2,
     "gpu0_util": 97.0, "gpu0_mem_used_mib": 14000.0, "gpu0_mem_total_mib": 16160.5, "gpu0_power_w": 251.3, ...,
     "net_eth0_sent_Bps": 1.1e8, "net_eth0_recv_Bps": 1.1e8, ...}

Flat keys load straight into pandas. GPU figures come from NVML (`nvidia-ml-py`, imported as `pynvml`); on a
machine without GPUs the sampler records CPU only and says so once. `live()` is the same sampler as an nmon-like
terminal view (`nmtkit monitor`).
"""
from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
from pathlib import Path

import psutil

from nmtkit.errors import TrainError
from nmtkit.files import append_jsonl
from nmtkit.gpus import open_nvml

# --- column names: the one definition the sampler writes and the analysis reads -----------------------

GPU_FIELDS = ("util", "mem_used_mib", "mem_total_mib", "power_w")
# Memory is in MiB (2**20 bytes), as psutil and NVML count it. Logs written before the columns said so named them
# *_mb (the shipped reference runs among them); readers take them through renamed_columns().
_OLD_MIB = re.compile(r"((?:gpu\d+_)?mem_used|(?:gpu\d+_)?mem_total|proc_rss)_mb")
NET_DIRECTIONS = ("sent", "recv")
_GPU_UTIL = re.compile(r"gpu(\d+)_util")


def renamed_columns(columns) -> dict[str, str]:
    """{old name: new name} for the MiB columns of an old log among `columns` ("mem_used_mb" -> "mem_used_mib")."""
    return {c: f"{m.group(1)}_mib" for c in columns if (m := _OLD_MIB.fullmatch(str(c)))}


def gpu_col(i: int, field: str) -> str:
    """gpu_col(0, "util") -> "gpu0_util" (field: one of GPU_FIELDS)."""
    return f"gpu{i}_{field}"


def gpu_util_cols(columns) -> list[str]:
    """The gpu<i>_util columns among `columns`, in GPU order."""
    found = [(int(m.group(1)), c) for c in columns if (m := _GPU_UTIL.fullmatch(str(c)))]
    return [c for _, c in sorted(found)]


def iface_key(name: str) -> str:
    """An interface name as a safe column name: 'veth-a@if3' -> 'veth_a_if3'."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def net_col(iface: str, direction: str) -> str:
    """net_col("eth0", "sent") -> "net_eth0_sent_Bps" (bytes/s; direction: "sent" or "recv")."""
    return f"net_{iface_key(iface)}_{direction}_Bps"


def interfaces(columns) -> list[str]:
    """The interface keys that have network columns among `columns`, sorted."""
    head, tail = "net_", "_sent_Bps"
    return sorted(str(c)[len(head):-len(tail)] for c in columns if str(c).startswith(head) and str(c).endswith(tail))


# --- GPUs through NVML ------------------------------------------------------------------------------
# Kept small on purpose: everything NVML-specific is in these two functions; the rest of the module sees a dict.

def open_gpus(nvml=None) -> tuple[object | None, list, str]:
    """(nvml module, device handles, reason) — no handles and a reason when there is no usable GPU."""
    return open_nvml(nvml)


def gpu_sample(nvml, handles: list) -> dict:
    """gpu<i>_util (%), gpu<i>_mem_used_mib, gpu<i>_mem_total_mib, gpu<i>_power_w for every handle.

    A field a device does not support (power on some boards) is left out rather than faked.
    """
    out: dict = {}
    for i, h in enumerate(handles):
        try:
            out[gpu_col(i, "util")] = float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)
        except Exception:  # noqa: BLE001
            pass
        try:
            mem = nvml.nvmlDeviceGetMemoryInfo(h)
            out[gpu_col(i, "mem_used_mib")] = mem.used / 2**20
            out[gpu_col(i, "mem_total_mib")] = mem.total / 2**20
        except Exception:  # noqa: BLE001
            pass
        try:
            out[gpu_col(i, "power_w")] = nvml.nvmlDeviceGetPowerUsage(h) / 1000.0  # milliwatts
        except Exception:  # noqa: BLE001
            pass
    return out


# --- CPU, memory, network ---------------------------------------------------------------------------

class Probe:
    """Takes one flat sample; keeps the previous network counters so it can report bytes/s."""

    def __init__(self, host: str | None = None, rank: int = 0, nvml=None):
        self.host = host or socket.gethostname()
        self.rank = rank
        self.nvml, self.gpus, self.no_gpu_reason = open_gpus(nvml)
        self.proc = psutil.Process(os.getpid())
        # cpu_percent() measures since the previous call: prime both so the first sample is meaningful.
        psutil.cpu_percent(None)
        self.proc.cpu_percent(None)
        self._net = psutil.net_io_counters(pernic=True)
        self._t = time.time()

    def sample(self) -> dict:
        now = time.time()
        vm = psutil.virtual_memory()
        rec = {
            "time": now, "host": self.host, "rank": self.rank, "n_gpus": len(self.gpus),
            "cpu_percent": psutil.cpu_percent(None), "cpu_count": psutil.cpu_count(),
            "proc_cpu_percent": self.proc.cpu_percent(None),
            "mem_used_mib": (vm.total - vm.available) / 2**20,
            "mem_percent": vm.percent,
            "proc_rss_mib": self.proc.memory_info().rss / 2**20,
        }
        if self.gpus:
            rec.update(gpu_sample(self.nvml, self.gpus))
        net = psutil.net_io_counters(pernic=True)
        rec.update(net_rates(self._net, net, now - self._t))
        self._net, self._t = net, now
        return rec


def net_rates(before: dict, after: dict, dt: float) -> dict:
    """net_<iface>_sent_Bps / _recv_Bps from two psutil.net_io_counters(pernic=True) readings dt seconds apart."""
    out = {}
    if dt <= 0:
        return out
    for name, now in after.items():
        prev = before.get(name)
        if prev is None:
            continue  # an interface that appeared between samples: no rate yet
        # Counters can wrap or reset (interface re-created); a negative delta is not traffic.
        out[net_col(name, "sent")] = max(now.bytes_sent - prev.bytes_sent, 0) / dt
        out[net_col(name, "recv")] = max(now.bytes_recv - prev.bytes_recv, 0) / dt
    return out


# --- TensorBoard, without TensorFlow -----------------------------------------------------------------

class _TBWriter:
    """Scalars in an event file of their own (TensorBoard's writer: no TensorFlow import, no fight with the
    trainer's)."""

    def __init__(self, logdir: str | Path):
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        self._event_pb2, self._summary_pb2 = event_pb2, summary_pb2
        Path(logdir).mkdir(parents=True, exist_ok=True)
        self._w = EventFileWriter(str(logdir), flush_secs=10)

    def write(self, record: dict, step: int) -> None:
        values = [self._summary_pb2.Summary.Value(tag=f"monitor/{k}", simple_value=float(v))
                  for k, v in record.items() if isinstance(v, (int, float)) and k not in ("time", "rank")]
        self._w.add_event(self._event_pb2.Event(wall_time=record["time"], step=step,
                                                summary=self._summary_pb2.Summary(value=values)))

    def close(self) -> None:
        self._w.close()


# --- the sampler thread ------------------------------------------------------------------------------

_said_no_gpu = False  # "no GPU" is said once per process, not once per sampler


def _say_no_gpu(reason: str) -> None:
    global _said_no_gpu
    if not _said_no_gpu:
        _said_no_gpu = True
        # stdout: a fact for the training log, not an error
        print(f"nmtkit.monitor: no GPU to sample ({reason}); recording CPU, memory and network only", flush=True)


class Sampler:
    """Samples this machine every `interval` seconds in a daemon thread until stop().

        with Sampler(runs.monitor_log(run, host, rank), rank=rank, tb_dir=run / "monitor" / "tb"):
            train()

    `path` may be None (TensorBoard only, or records read via `.last`). Errors while sampling never reach training:
    the first is printed once and sampling goes on.
    """

    def __init__(self, path: str | Path | None, interval: float = 1.0, rank: int = 0, host: str | None = None,
                 tb_dir: str | Path | None = None, nvml=None):
        if not interval > 0:
            raise TrainError(f"sampler interval must be > 0 seconds, got {interval!r} (monitor.interval)")
        self.path = Path(path) if path is not None else None
        self.interval = float(interval)
        self.rank = rank
        self.host = host
        self.tb_dir = Path(tb_dir) if tb_dir is not None else None
        self._nvml = nvml
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tb: _TBWriter | None = None
        self.samples = 0
        self.last: dict | None = None
        self.error: str | None = None

    def start(self) -> "Sampler":
        if self._thread is not None:
            return self
        self.probe = Probe(self.host, self.rank, self._nvml)
        if not self.probe.gpus:
            _say_no_gpu(self.probe.no_gpu_reason)
        if self.tb_dir is not None:
            self._tb = _TBWriter(self.tb_dir)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"nmtkit-monitor-rank{self.rank}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        # Sample on a fixed grid (not "sleep interval after each sample") so the rate does not drift.
        next_t = time.monotonic() + self.interval
        while not self._stop.wait(max(next_t - time.monotonic(), 0.0)):
            self.tick()
            next_t += self.interval
            if next_t < time.monotonic():  # we fell behind (a suspended process): skip, don't burst
                next_t = time.monotonic() + self.interval

    def tick(self) -> dict | None:
        """Take and write one sample now (the thread calls this; tests may too)."""
        try:
            rec = self.probe.sample()
            if self.path is not None:
                append_jsonl(self.path, rec)
            if self._tb is not None:
                self._tb.write(rec, self.samples)
        except Exception as e:  # noqa: BLE001  monitoring must never break training
            if self.error is None:
                print(f"nmtkit.monitor: sampling failed ({type(e).__name__}: {e}); will keep trying",
                      file=sys.stderr)
            self.error = f"{type(e).__name__}: {e}"
            return None
        self.samples += 1
        self.last = rec
        return rec

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=max(5.0, 2 * self.interval))
            self._thread = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --- the live terminal view (`nmtkit monitor`) ----------------------------------------------------------

def _bar(percent: float, width: int = 30) -> str:
    filled = int(round(max(0.0, min(percent, 100.0)) / 100 * width))
    return "#" * filled + "." * (width - filled)


def _rate(bps: float) -> str:
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:7.1f} {unit}"
    return f"{bps:7.0f} B/s "


def render(rec: dict, no_gpu_reason: str = "") -> str:
    """One screen of the live view for one sample (plain text; the caller clears the terminal)."""
    lines = [f"nmtkit monitor  {rec['host']}  {time.strftime('%H:%M:%S', time.localtime(rec['time']))}  "
             f"(Ctrl-C to quit)", ""]
    lines.append(f"CPU  {_bar(rec['cpu_percent'])} {rec['cpu_percent']:5.1f}%   "
                 f"mem {rec['mem_used_mib'] / 1024:6.1f} GiB ({rec['mem_percent']:.0f}%)")
    n = rec.get("n_gpus", 0)
    if n:
        for i in range(n):
            util = rec.get(gpu_col(i, "util"), float("nan"))
            mem = rec.get(gpu_col(i, "mem_used_mib"), float("nan")) / 1024
            total = rec.get(gpu_col(i, "mem_total_mib"), float("nan")) / 1024
            power = rec.get(gpu_col(i, "power_w"))
            lines.append(f"GPU{i} {_bar(util)} {util:5.1f}%   mem {mem:5.1f}/{total:.1f} GiB"
                         + (f"   {power:5.0f} W" if power is not None else ""))
    else:
        lines.append(f"GPU  none ({no_gpu_reason or 'no GPU found'})")
    lines.append("")
    lines.append(f"{'interface':<16}{'sent':>14}{'received':>14}")
    for iface in interfaces(rec):
        sent, recv = rec[net_col(iface, "sent")], rec.get(net_col(iface, "recv"), 0.0)
        lines.append(f"{iface:<16}{_rate(sent):>14}{_rate(recv):>14}")
    return "\n".join(lines)


def live(interval: float = 1.0, out: str | Path | None = None, *, iterations: int | None = None,
         stream=None, nvml=None) -> int:
    """An nmon-like view of this machine, refreshed every `interval` s; Ctrl-C exits with 0.

    `out`: also append every sample to this JSONL file. `iterations`: stop after that many (tests).
    """
    if not interval > 0:
        raise TrainError(f"--interval must be > 0 seconds, got {interval!r}")
    stream = stream or sys.stdout
    probe = Probe(nvml=nvml)
    clear = "\x1b[2J\x1b[H" if getattr(stream, "isatty", lambda: False)() else ""
    n = 0
    try:
        while iterations is None or n < iterations:
            time.sleep(interval)
            rec = probe.sample()
            if out is not None:
                append_jsonl(out, rec)
            stream.write(clear + render(rec, probe.no_gpu_reason) + "\n")
            stream.flush()
            n += 1
    except KeyboardInterrupt:
        stream.write("\n")
    return 0
