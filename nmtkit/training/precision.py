"""The precision and XLA decisions of a run (`train.precision`, `train.xla`), TensorFlow-free: the CPU's flags,
the recorded bf16 quality measurement, the GPUs' compute capabilities. The trainer applies what they decide and
prints the decision with its reason in the run's first log line and run.json.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from nmtkit.config import choices
from nmtkit.errors import ConfigError

PRECISIONS = choices("train.precision")

# Test BLEU of fp32 and mixed_bfloat16 at the small shape (bench/quality.py), written when measured; bf16 is
# chosen on CPUs only while this record says it costs at most BF16_MAX_BLEU_LOSS.
BF16_RECORD = Path(__file__).with_name("bf16_quality.json")
BF16_MAX_BLEU_LOSS = 1.0
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# bf16 ÷ fp32 training tokens/s per shape, one record per kind of native bf16 (bench/throughput.py --record-bf16,
# interleaved rounds): at small shapes the casts can cost more than bf16's GEMMs save, and how much differs between
# CPUs with AMX tiles and without, so auto keeps fp32 where, at the shape nearest the run's, bf16 was not faster in
# every round on a CPU like this one.
BF16_SPEED = Path(__file__).with_name("bf16_speed.json")


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags (the first processor's), empty where /proc/cpuinfo is missing."""
    try:
        with open(path) as f:
            return set(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []))
    except OSError:
        return set()


def bf16_quality(path: Path | None = None) -> tuple[bool, str]:
    """(bf16 is good enough, why) from the recorded fp32-vs-bf16 test BLEU (BF16_RECORD)."""
    path = path or BF16_RECORD
    try:
        rec = json.loads(Path(path).read_text())
        fp32, bf16 = float(rec["fp32_bleu"]), float(rec["bf16_bleu"])
    except (OSError, ValueError, KeyError, TypeError):
        return False, "no recorded bf16 quality measurement"
    ok = bf16 >= fp32 - BF16_MAX_BLEU_LOSS
    return ok, (f"bf16 test BLEU {bf16:.1f} vs fp32 {fp32:.1f} at the {rec.get('shape', '?')} shape "
                f"({rec.get('measured', '?')}): {'within' if ok else 'more than'} {BF16_MAX_BLEU_LOSS:g} point")


def cpu_class(flags) -> str | None:
    """The kind of native bf16 a CPU has, which sets what bf16 pays on it: "amx_bf16" (matrix tiles; implies
    avx512_bf16), "avx512_bf16" (vector dot products only), None (emulated)."""
    return next((f for f in reversed(BF16_CPU_FLAGS) if f in flags), None)


def bf16_speed(d_model: int, path: Path | None = None, flags=None) -> tuple[float | None, str]:
    """(bf16 ÷ fp32 tokens/s at the shape nearest `d_model`, measured on a CPU of this one's class (cpu_class of
    `flags`, default this machine's), what that was); (None, why) with no such record. The figure is the slowest
    of the record's rounds: the host drifts by tens of percent between rounds, so bf16 counts as faster only
    where it was faster in every one."""
    import math
    kind = cpu_class(cpu_flags() if flags is None else set(flags))
    try:
        classes = json.loads(Path(path or BF16_SPEED).read_text())["classes"]
        rec = classes.get(kind) if isinstance(classes, dict) else None
        shapes = {name: (int(v["d_model"]), float(v["ratio"]), [float(r) for r in v.get("rounds") or [v["ratio"]]])
                  for name, v in rec["shapes"].items()} if rec else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, "no recorded bf16 speed measurement"
    if not shapes:
        return None, f"no bf16 speed measured on a CPU with {kind or 'no native bf16'}"
    name, (d, ratio, rounds) = min(shapes.items(), key=lambda kv: abs(math.log(kv[1][0] / max(d_model, 1))))
    spread = f", its {len(rounds)} rounds {min(rounds):.2f}-{max(rounds):.2f}" if len(rounds) > 1 else ""
    return min(rounds), (f"bf16 trained at {ratio:.2f}x fp32's tokens/s at the {name} shape (d_model {d}{spread}; "
                         f"{rec.get('measured', '?')}, {rec.get('host', '?')})")


def write_bf16_speed(path: Path, shapes: dict, command: str, flags=None) -> Path:
    """Write the record bf16_speed() reads: under this CPU's class (cpu_class), {shape: {"d_model", "ratio" (bf16 ÷
    fp32 tokens/s), "rounds"}} with the date, the host and the command that measured it (bench/throughput.py
    --record-bf16). The other classes' records in the file stay."""
    import platform
    from datetime import date

    from nmtkit.files import atomic_write_json
    flags = cpu_flags() if flags is None else set(flags)
    kind = cpu_class(flags) or "no native bf16"
    classes = {}
    if Path(path).exists():  # add to it, never drop what it holds
        try:
            classes = dict(json.loads(Path(path).read_text())["classes"])
        except (OSError, ValueError, KeyError, TypeError):
            raise ConfigError(f"{path}: not a bf16 speed record with a 'classes' key; write to a new file "
                              "(--record-bf16 NEW.json) or move this one aside") from None
    have = "/".join(sorted(f for f in BF16_CPU_FLAGS if f in flags)) or "no bf16"
    host = f"{os.cpu_count()}-core {platform.processor() or platform.machine()} with {have}"
    classes[kind] = {"measured": date.today().isoformat(), "command": command, "host": host, "shapes": shapes}
    return atomic_write_json(Path(path), {"classes": dict(sorted(classes.items()))})


def decide_precision(setting: str, gpus, flags=None, record: Path | None = None, d_model: int | None = None,
                     speed: Path | None = None) -> tuple[str, str]:
    """(precision, reason). `gpus`: a count, or the GPUs' compute capabilities ((major, minor) or None each).

    auto: mixed_float16 on GPUs with tensor cores (compute capability 7.0 and up); float32 on older GPUs;
    on CPUs mixed_bfloat16 where the flags show avx512_bf16 or amx_bf16 (faster there, slower without), the
    recorded quality measurement allows it and, given the run's `d_model`, the speed record (`speed`, default
    BF16_SPEED) measured bf16 faster at the nearest shape on a CPU of this one's class (cpu_class); else float32.
    `flags`: the CPU flags (default: this machine's).
    """
    if setting not in PRECISIONS:
        raise ConfigError(f"train.precision={setting!r}: choose one of {', '.join(PRECISIONS)}")
    if setting != "auto":
        return setting, "set in the config"
    caps = [None] * gpus if isinstance(gpus, int) else list(gpus)
    if caps:
        known = [tuple(c) for c in caps if c]
        if known and min(known) < (7, 0):
            return "float32", f"auto: GPU compute capability {'.'.join(map(str, min(known)))} has no tensor cores"
        return "mixed_float16", ("auto: GPU with tensor cores (compute capability "
                                 f"{'.'.join(map(str, min(known))) if known else 'unknown'})")
    flags = cpu_flags() if flags is None else set(flags)
    native = [f for f in BF16_CPU_FLAGS if f in flags]
    if not native:
        return "float32", "auto: CPU without avx512_bf16/amx_bf16 (bf16 is emulated there, slower)"
    ok, why = bf16_quality(record)
    if not ok:
        return "float32", f"auto: CPU with {'/'.join(native)}, but {why}"
    ratio, fast = bf16_speed(d_model, speed, flags) if d_model else (None, "")
    if ratio is not None and ratio <= 1.0:
        return "float32", f"auto: CPU with {'/'.join(native)}, but {fast}: not faster in every round at this size"
    return "mixed_bfloat16", f"auto: CPU with {'/'.join(native)}; {why}" + (f"; {fast}" if fast else "")


XLA_ON_CPU = "NMTKIT_XLA_ON_CPU"  # set (bench/throughput.py does) to measure XLA on a CPU anyway


def use_xla(setting: bool, size: int, horovod: bool = False, gpu: bool = True, env=None) -> bool:
    """train.xla -> whether the step is compiled with XLA (jit_compile). Never in a Horovod job, one rank
    included: Horovod's allreduce is a custom op with no XLA kernel (its XLA ops exist only for GPUs built with
    HOROVOD_ENABLE_XLA_OPS), so the step stays a plain tf.function. On a CPU it is refused in one line: one
    program per length bucket still trained slower there than without XLA (bench/README.md has the figures)."""
    if setting and not gpu and not (os.environ if env is None else env).get(XLA_ON_CPU):
        raise ConfigError("train.xla=true: on a CPU the XLA-compiled step trains slower than the plain one "
                          "(bench/README.md, `bench/throughput.py --variant xla:train.xla=true`); leave train.xla "
                          "off here, it is for GPUs")
    return bool(setting) and size == 1 and not horovod
