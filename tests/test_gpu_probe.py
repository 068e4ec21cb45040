"""Issue 69, Deliver 2: bench/gpu_probe.py, the PyTorch probe for a GPU machine without TensorFlow. Its comparison
and report run here on a CPU against a recorded JSON in the probe's shape (tests/data/gpu_probe_h100.json: its
memory and matmul figures are invented, no H100 here); each ratio and verdict is recomputed from the kit's own
projections, not read from the file. The probe itself needs torch and a GPU: without torch it must say so in one
line, exit non-zero and still write its JSON."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nmtkit import config
from nmtkit.model import memory
from nmtkit.model.flops import train_flops
from nmtkit.model.size import count_params
from nmtkit.training.peaks import gpu_peak

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import gpu_probe_report as report  # noqa: E402

RECORDED = json.loads((ROOT / "tests" / "data" / "gpu_probe_h100.json").read_text())
CFG = config.profile("wmt16-base")
V, L = RECORDED["vocab"], RECORDED["length"]


def test_each_measured_peak_is_set_beside_the_kits_projection():
    rep = report.compare(RECORDED)
    assert len(rep["memory"]) == 12  # 64/128/256 x fp16/fp32 x dropout on/off
    assert {(r["batch"], r["precision"], r["dropout"]) for r in rep["memory"]} == {
        (b, p, d) for b in (64, 128, 256) for p in ("mixed_float16", "float32") for d in (0.1, 0.0)}
    for r in rep["memory"]:
        proj = memory.project(CFG, V, r["batch"], L, r["precision"]).total
        assert r["ratio"] == pytest.approx(r["peak_bytes"] / proj)
    md = report.markdown(rep)
    row = next(r for r in rep["memory"] if (r["batch"], r["precision"], r["dropout"]) == (256, "float32", 0.1))
    assert f"| 256 | float32 | 0.1 | {row['peak_bytes'] / 2**30:.2f} | {row['projected_bytes'] / 2**30:.2f} | " in md


def test_the_slopes_and_the_keep_they_imply():
    rep = report.compare(RECORDED)
    assert len(rep["slopes"]) == 4
    one = {p: memory.project(CFG, V, 1, L, p) for p in ("mixed_float16", "float32")}
    for s in rep["slopes"]:
        pts = {r["batch"]: r["peak_bytes"] for r in RECORDED["memory"]
               if (r["precision"], r["dropout"]) == (s["precision"], s["dropout"])}
        slope = (pts[256] - pts[128]) / 128
        p = one[s["precision"]]
        keep = (slope - p.loss) / (p.activations / memory.KEEP)
        assert s["slope_bytes"] == pytest.approx(slope) and s["ratio"] == pytest.approx(slope / p.per_sentence)
        assert s["keep_implied"] == pytest.approx(keep)
        assert s["adoptable"] == (s["dropout"] == CFG.model.dropout and keep >= 1)
    assert not any(s["adoptable"] for s in rep["slopes"] if s["dropout"] == 0.0)  # never from a dropout-0 run


def test_the_16gb_cap_against_fit():
    rep = report.compare(RECORDED)
    by = {c["precision"]: c for c in rep["cap"]}
    for precision, c in by.items():
        plan = memory.fit(CFG, V, 16e9, precision)
        assert c["plan"] == f"{plan.count} x {plan.size}"
    # the recorded run: fp16's 1 x 256 fits where fit() splits (safe), fp32's runs out where fit() splits (agree)
    assert by["mixed_float16"]["verdict"].startswith("errs safe") and by["float32"]["verdict"].startswith("agree")
    assert rep["ok"] and "OOM RISK" not in report.markdown(rep)


def test_a_projection_that_plans_1_x_256_where_it_ran_out_is_flagged(monkeypatch):
    # issue 69 item 3's story: a KEEP adopted too low makes fit() plan float32 1 x 256 on a 16 GB card
    monkeypatch.setattr(memory, "KEEP", 0.3)
    assert memory.fit(CFG, V, 16e9, "float32").count == 1
    rep = report.compare(RECORDED)
    fp32 = next(c for c in rep["cap"] if c["precision"] == "float32")
    assert fp32["verdict"].startswith("OOM") and not fp32["ok"] and not rep["ok"]
    assert report.markdown(rep).startswith("# nmtkit GPU probe (PyTorch replica of the kit's graph): OOM RISK")


def test_the_peak_table_and_the_flop_count_beside_the_measured():
    rep = report.compare(RECORDED)
    for m in rep["matmul"]:
        table = gpu_peak(RECORDED["device"]["name"], m["precision"], tf32=True)[0]
        assert m["table_flops"] == table and m["ratio"] == pytest.approx(m["flops_per_s"] / table)
    f = RECORDED["flops"]
    kit = train_flops(CFG.model, V, f["batch"] * f["length"], f["batch"] * f["length"], f["length"], f["length"])
    assert rep["flops"]["ratio"] == pytest.approx(f["torch_flops"] / kit)
    assert 0.9 < rep["flops"]["ratio"] < 1.1, rep["flops"]  # the kit counts what PyTorch's counter counts
    assert rep["params"]["kit"] == count_params(CFG.model, V) and rep["params"]["ratio"] == 1.0  # the same variables


def test_the_report_imports_neither_torch_nor_tensorflow_and_torch_is_no_dependency():
    code = ("import sys; sys.path[:0] = ['bench']; import gpu_probe, gpu_probe_report; "
            "print(sorted(m for m in ('torch', 'tensorflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
    for f in ("pyproject.toml", "environment.yml"):
        assert "torch" not in (ROOT / f).read_text().lower(), f
    assert importlib.util.find_spec("torch") is None  # the kit's environment has none


def test_without_torch_the_probe_fails_in_one_line_and_writes_its_json(tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_probe.py"), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and len(p.stdout.strip().splitlines()) == 1 and not p.stderr.strip(), p.stdout + p.stderr
    assert "no PyTorch here" in p.stdout
    data = json.loads((tmp_path / "gpu-probe.json").read_text())
    assert data["errors"] and data["memory"] == [] and data["vocab"] == CFG.data.vocab_size
    assert "error: no PyTorch here" in (tmp_path / "gpu-probe.md").read_text()
