"""Issue 69, item 8: the GPU path's smaller points, each found by reading, before anyone has a GPU."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from test_gpu_setup import _setup, _tool, gpu_vm  # noqa: F401  (gpu_vm: the fixture, used by name)

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "instructors.md"


def test_the_keyring_url_is_this_systems(gpu_vm, tmp_path):  # noqa: F811
    release = tmp_path / "os-release"
    release.write_text('NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\n')
    env = dict(gpu_vm["env"], CUDA_HOME=str(tmp_path / "nowhere"), NMTKIT_OS_RELEASE=str(release))
    r = _setup(env, "--horovod-plan")
    assert r.returncode == 1
    assert "repos/ubuntu2204/x86_64/cuda-keyring" in r.stderr and "ubuntu2404" not in r.stderr, r.stderr
    release.write_text("ID=debian\nVERSION_ID=\"12\"\n")
    assert "repos/debian12/x86_64/cuda-keyring" in _setup(env, "--horovod-plan").stderr


def test_blackwell_is_told_the_nvcc_it_needs(gpu_vm, tmp_path):  # noqa: F811
    _tool(tmp_path / "bin", "nvidia-smi", "case \"$*\" in *compute_cap*) echo 10.0;; *) echo 'GPU 0: B200';; esac")
    r = _setup(gpu_vm["env"], "--horovod-plan")
    assert r.returncode == 1 and "compute capability 10.0" in r.stderr and "needs CUDA 12.8" in r.stderr
    assert "install nvcc 12.8" in r.stderr and "cuda-nvcc-12-8 cuda-cudart-dev-12-8" in r.stderr, r.stderr
    assert "cuda-nvcc-12-5" not in r.stderr  # 12.5 cannot compile for it


def test_the_xla_case_is_reported_not_counted_and_doctor_checks_the_homeworks_disk(tmp_path):
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("NMTKIT_PROFILE", None)
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu.py"), "--allow-cpu", "--shape", "tiny",
                        "--steps", "2", "--warmup", "1", "--batch", "4", "--cases", "one process, XLA",
                        "--fail", "one process, XLA", "--out", str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "not counted: train.xla is off by default" in p.stdout
    data = json.loads((tmp_path / "gpu-report.json").read_text())
    [case] = data["cases"]
    assert data["ok"] and not case["ok"] and "forced failure" in case["error"] and case["optional"]
    md = (tmp_path / "gpu-report.md").read_text()
    assert "FAILED, not counted (train.xla is off" in md and "not counted: one process, XLA failed" in md
    [disk] = [r for r in data["doctor"] if r["name"].startswith("free disk")]
    assert "profile wmt16-base" in disk["value"] or "profile wmt16-base" in disk["fix"], disk


def gpu_section() -> str:
    text = DOCS.read_text()
    return text[text.index("**0. Each GPU VM"):text.index("## 3. Keeping it safe")]


def test_the_gpu_checklists_doctor_checks_the_homeworks_profile():
    calls = re.findall(r"bin/nmtkit doctor[^`|\n]*", gpu_section())
    assert calls and all("--profile wmt16-base" in c for c in calls), calls


def test_the_docs_micro_batch_table_is_what_fit_plans():
    from nmtkit.config import profile
    from nmtkit.model.memory import GIB, fit
    cfg = profile("wmt16-base")
    rows = re.findall(r"^\| ([^|]*\(([\d.]+) GiB\)) \| ([^|]+) \| ([^|]+) \|$", gpu_section(), re.M)
    assert len(rows) >= 5, "the table names each GPU's memory as NVML reports it, e.g. 'T4 16 GB (15.0 GiB)'"
    for name, gib, *cells in rows:
        for cell, precision in zip(cells, ("mixed_float16", "float32")):
            plan = fit(cfg, cfg.data.vocab_size, float(gib) * GIB, precision)
            said = re.search(r"(\d+) x (\d+)[^,]*, ([\d.]+) GiB", cell)
            assert said, f"{name}: {cell!r} names no plan"
            assert (int(said[1]), int(said[2]), float(said[3])) == (
                plan.count, plan.size, round(plan.projection.total / GIB, 1)), f"{name} {precision}: {cell}"


def test_fit_says_how_many_sentences_its_equal_micro_batches_make():
    # issue 69 item 8: a T4 in float32 plans 3 x 86, which is 258 sentences a step, not the config's 256; the docs'
    # table says so (above) and so does the plan's reason, where it said "the same 256 sentences a step"
    from nmtkit.config import profile
    from nmtkit.model.memory import GIB, fit
    cfg = profile("wmt16-base")
    t4 = fit(cfg, cfg.data.vocab_size, 15.0 * GIB, "float32")
    assert (t4.count, t4.size) == (3, 86)
    assert "258 sentences a step, 2 more than data.batch_sentences" in t4.reason and "the same 256" not in t4.reason
    v100 = fit(cfg, cfg.data.vocab_size, 15.8 * GIB, "float32")
    assert (v100.count, v100.size) == (2, 128) and "the same 256 sentences a step" in v100.reason
    assert "3 x 86 is 258" in gpu_section()
