"""train.precision=auto from faked devices and CPU flags, the bf16 quality record, and XLA never on Horovod."""
from __future__ import annotations

import json

import pytest

from nmtkit.errors import ConfigError
from nmtkit.training.precision import (
    BF16_RECORD,
    BF16_SPEED,
    bf16_quality,
    bf16_speed,
    cpu_flags,
    decide_precision,
    use_xla,
    write_bf16_speed,
)


def record(tmp_path, fp32, bf16):
    p = tmp_path / "q.json"
    p.write_text(json.dumps({"fp32_bleu": fp32, "bf16_bleu": bf16, "shape": "small", "measured": "2026-11-23"}))
    return p


def test_gpus_with_tensor_cores_get_fp16(tmp_path):
    assert decide_precision("auto", [(8, 0), (8, 0)])[0] == "mixed_float16"
    assert decide_precision("auto", [(7, 0)])[0] == "mixed_float16"
    assert decide_precision("auto", 1)[0] == "mixed_float16"  # capability unknown: a current GPU
    p, why = decide_precision("auto", [(6, 0)])
    assert p == "float32" and "6.0 has no tensor cores" in why


def test_cpu_bf16_only_with_native_flags_and_a_good_record(tmp_path):
    good, bad = record(tmp_path, 90.0, 89.2), record(tmp_path.parent, 90.0, 88.5)
    p, why = decide_precision("auto", 0, {"avx2", "avx512_bf16"}, good)
    assert p == "mixed_bfloat16" and "avx512_bf16" in why and "89.2 vs fp32 90.0" in why
    assert decide_precision("auto", 0, {"amx_bf16"}, good)[0] == "mixed_bfloat16"
    p, why = decide_precision("auto", 0, {"avx512_bf16"}, bad)
    assert p == "float32" and "more than 1 point" in why
    p, why = decide_precision("auto", 0, {"avx2", "avx512f"}, good)
    assert p == "float32" and "without avx512_bf16" in why
    p, why = decide_precision("auto", 0, {"avx512_bf16"}, tmp_path / "missing.json")
    assert p == "float32" and "no recorded" in why


def test_explicit_settings_pass_through_and_bad_ones_fail():
    assert decide_precision("float32", [(9, 0)])[0] == "float32"
    assert decide_precision("mixed_bfloat16", 0, set()) == ("mixed_bfloat16", "set in the config")
    with pytest.raises(ConfigError, match="bf17"):
        decide_precision("bf17", 0)[0]


def test_the_shipped_records_parse():
    ok, why = bf16_quality(BF16_RECORD)
    assert "no recorded" not in why, f"{BF16_RECORD} is missing or malformed"
    for kind in ("amx_bf16", "avx512_bf16"):  # both kinds of native bf16 measured
        for d_model in (128, 256, 512):
            ratio, why = bf16_speed(d_model, BF16_SPEED, {kind})
            assert ratio is not None and ratio > 0, f"{BF16_SPEED} is missing or malformed for {kind}: {why}"


def test_cpu_flags_reads_proc_cpuinfo(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(str(f)) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags(str(tmp_path / "none")) == set()


def test_xla_never_on_a_horovod_job():
    assert use_xla(True, 1) is True
    assert use_xla(True, 1, horovod=True) is False  # one Horovod rank: its allreduce has no XLA kernel
    assert use_xla(True, 2, horovod=True) is False


def test_cpu_bf16_only_at_shapes_where_the_speed_record_measured_it_faster(tmp_path):
    good = record(tmp_path, 90.0, 89.8)
    speed = tmp_path / "speed.json"
    speed.write_text(json.dumps({"classes": {"amx_bf16": {"measured": "2026-11-26", "host": "2-core test host",
                                                          "shapes": {
        "base": {"d_model": 512, "ratio": 1.4}, "small": {"d_model": 256, "ratio": 1.1},
        "tiny": {"d_model": 128, "ratio": 0.48}}}}}))
    p, why = decide_precision("auto", 0, {"amx_bf16"}, good, d_model=128, speed=speed)
    assert p == "float32" and "0.48x fp32's tokens/s at the tiny shape" in why and "not faster in every round" in why
    p, why = decide_precision("auto", 0, {"amx_bf16"}, good, d_model=96, speed=speed)  # nearest: tiny
    assert p == "float32"
    p, why = decide_precision("auto", 0, {"amx_bf16"}, good, d_model=512, speed=speed)
    assert p == "mixed_bfloat16" and "1.40x" in why and "base" in why
    assert decide_precision("auto", 0, {"amx_bf16"}, good, d_model=300, speed=speed)[0] == "mixed_bfloat16"  # small
    # no speed record, or no shape given: quality alone decides, as before
    assert decide_precision("auto", 0, {"amx_bf16"}, good, d_model=128, speed=tmp_path / "none.json")[0] == \
        "mixed_bfloat16"
    assert decide_precision("auto", 0, {"amx_bf16"}, good)[0] == "mixed_bfloat16"
    assert decide_precision("auto", 0, {"avx2"}, good, d_model=512, speed=speed)[0] == "float32"  # no native bf16


def test_the_speed_record_of_the_cpus_own_kind_of_bf16_decides(tmp_path):
    """AMX tiles and avx512_bf16 alone pay differently: a CPU reads the record measured on its own kind, and a kind
    nobody measured is said to be unmeasured, not judged by another kind's figures."""
    good = record(tmp_path, 90.0, 89.8)
    speed = tmp_path / "speed.json"
    def shapes(r):
        return {"tiny": {"d_model": 128, "ratio": r}}
    speed.write_text(json.dumps({"classes": {"amx_bf16": {"host": "amx host", "shapes": shapes(0.8)},
                                             "avx512_bf16": {"host": "avx512 host", "shapes": shapes(1.2)}}}))
    p, why = decide_precision("auto", 0, {"avx512_bf16", "amx_bf16"}, good, d_model=128, speed=speed)
    assert p == "float32" and "0.80x" in why and "amx host" in why
    p, why = decide_precision("auto", 0, {"avx512_bf16"}, good, d_model=128, speed=speed)
    assert p == "mixed_bfloat16" and "1.20x" in why and "avx512 host" in why
    # faster by the median of its rounds but not in each of them: the drifting host cannot decide, fp32 stays
    speed.write_text(json.dumps({"classes": {"avx512_bf16": {"host": "h", "shapes": {"tiny": {
        "d_model": 128, "ratio": 1.12, "rounds": [0.98, 1.12, 1.31]}}}}}))
    p, why = decide_precision("auto", 0, {"avx512_bf16"}, good, d_model=128, speed=speed)
    assert p == "float32" and "1.12x" in why and "rounds 0.98-1.31" in why and "not faster in every round" in why
    speed.write_text(json.dumps({"classes": {"amx_bf16": {"host": "amx host", "shapes": shapes(0.8)}}}))
    ratio, why = bf16_speed(128, speed, {"avx512_bf16"})
    assert ratio is None and why == "no bf16 speed measured on a CPU with avx512_bf16"


def test_the_speed_record_written_by_the_bench_is_the_one_auto_reads(tmp_path):
    path = write_bf16_speed(tmp_path / "s.json", {"tiny": {"d_model": 128, "ratio": 0.9, "rounds": [0.9]}},
                            "bench/throughput.py --record-bf16 s.json", flags={"avx512_bf16", "amx_bf16"})
    ratio, why = bf16_speed(128, path, {"amx_bf16"})
    assert ratio == 0.9 and "tiny shape" in why
    assert json.loads(path.read_text())["classes"]["amx_bf16"]["command"].startswith("bench/")
    # a second CPU kind adds its record beside the first
    write_bf16_speed(path, {"tiny": {"d_model": 128, "ratio": 1.1, "rounds": [1.1]}}, "bench/throughput.py",
                     flags={"avx512_bf16"})
    assert bf16_speed(128, path, {"avx512_bf16"})[0] == 1.1 and bf16_speed(128, path, {"amx_bf16"})[0] == 0.9
    # a file that is not such a record is refused in one line, and left as it was
    other = tmp_path / "other.json"
    other.write_text('{"shapes": {}}')
    with pytest.raises(ConfigError, match="not a bf16 speed record"):
        write_bf16_speed(other, {}, "bench/throughput.py", flags={"avx512_bf16"})
    assert other.read_text() == '{"shapes": {}}'
