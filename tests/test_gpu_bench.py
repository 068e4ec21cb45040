"""bench/gpu.py, what course staff run first on a GPU VM, run here on a CPU: a passing case exits 0 and leaves
gpu-report.md/.json; a failing case exits non-zero and the report says which and why."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench(out: Path, *extra: str):
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, str(ROOT / "bench" / "gpu.py"), "--allow-cpu", "--shape", "tiny",
                           "--steps", "2", "--warmup", "1", "--batch", "4", "--cases", "one process", "--out", str(out),
                           *extra], env=env, capture_output=True, text=True, timeout=300)


def test_a_passing_case_exits_0_and_leaves_the_report(tmp_path):
    p = bench(tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    data = json.loads((tmp_path / "gpu-report.json").read_text())
    assert data["ok"] and [c["name"] for c in data["cases"]] == ["one process"]
    r = data["cases"][0]["results"][0]
    assert r["ms_per_step"] > 0 and r["projected_gb"] > 0 and r["micro_batches"] == 1
    assert {"tensorflow", "cuda", "cudnn", "horovod", "gpus"} <= set(data["facts"]) and data["doctor"]
    md = (tmp_path / "gpu-report.md").read_text()
    assert "all cases passed" in md and "| one process | ok |" in md


def test_a_failing_case_exits_non_zero_and_the_report_says_so(tmp_path):
    p = bench(tmp_path, "--fail", "one process")
    assert p.returncode == 1
    assert "one process: FAILED" in p.stdout and "forced failure" in p.stdout
    data = json.loads((tmp_path / "gpu-report.json").read_text())
    assert not data["ok"] and "forced failure" in data["cases"][0]["error"]
    assert "FAILED" in (tmp_path / "gpu-report.md").read_text()
