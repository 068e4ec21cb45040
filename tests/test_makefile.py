"""The Makefile's choice of Python environment, run by make itself on a copy of the Makefile: VENV=, then the env
`make setup` last set up (.nmtkit-venv), then an active conda env holding the kit, else .venv. Also: make leaves
TF_CPP_MIN_LOG_LEVEL alone (it hid "Cannot dlopen some GPU libraries" on GPU nodes)."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


@pytest.fixture
def kit(tmp_path):
    """A copy of the Makefile with a scripts/setup.sh that only reports the VENV it was given."""
    kit = tmp_path / "kit"
    (kit / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", kit / "Makefile")
    (kit / "scripts" / "setup.sh").write_text('echo "setup.sh VENV=$VENV"\n')
    return kit


def _env_dir(path: Path, with_kit: bool = True) -> Path:
    """A fake Python environment; with the kit, its bin/nmtkit prints what make's environment gives it."""
    (path / "bin").mkdir(parents=True)
    if with_kit:
        nmtkit = path / "bin" / "nmtkit"
        nmtkit.write_text('#!/bin/sh\necho "nmtkit $* TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL-unset} PATH=$PATH"\n')
        nmtkit.chmod(0o755)
    return path


def make(kit: Path, *args: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items()
            if k not in ("VENV", "CONDA_PREFIX", "TF_CPP_MIN_LOG_LEVEL", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "--no-print-directory", "-C", str(kit), *args], env={**base, **env},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _command(out: str, tool: str) -> str:
    """The recipe line that runs `tool` (e.g. bin/nmtkit course)."""
    return next(line for line in out.splitlines() if tool in line)


def test_without_a_choice_every_target_uses_dot_venv(kit, tmp_path):
    assert _command(make(kit, "-n", "demo"), "/bin/nmtkit course").startswith(".venv/bin/nmtkit")
    base = _env_dir(tmp_path / "miniconda3", with_kit=False)  # conda's base env, active but without the kit
    assert _command(make(kit, "-n", "lab", CONDA_PREFIX=str(base)), "jupyter lab").startswith(".venv/bin/jupyter")


def test_setup_remembers_the_env_for_every_later_target(kit, tmp_path):
    conda = _env_dir(tmp_path / "envs" / "nmtkit")
    out = make(kit, "setup", f"VENV={conda}")
    assert f"setup.sh VENV={conda}" in out
    assert (kit / ".nmtkit-venv").read_text().strip() == str(conda)
    assert not (kit / ".nmtkit-venv.tmp").exists()
    # later targets, no VENV= and no conda env active: the recorded env, including setup's own run
    demo = make(kit, "-n", "demo")
    assert _command(demo, "setup.sh").startswith(f"VENV='{conda}'")
    assert _command(demo, "bin/nmtkit course") == f"{conda}/bin/nmtkit course"
    assert _command(make(kit, "-n", "lab"), "jupyter lab").startswith(f"{conda}/bin/jupyter lab")
    assert _command(make(kit, "-n", "unit"), "pytest").startswith(f"{conda}/bin/python -m pytest")  # make test's
    assert _command(make(kit, "-n", "demo", "VENV=/elsewhere"), "bin/nmtkit course").startswith("/elsewhere/bin/")
    # really run: the recorded env's tools come first on PATH
    ran = make(kit, "demo")
    assert "[make] environment" in ran and ".nmtkit-venv" in ran
    assert _command(ran, "TF_CPP_MIN_LOG_LEVEL=").split("PATH=")[1].startswith(f"{conda}/bin:")
    # back to the default: the record goes
    make(kit, "setup", "VENV=.venv")
    assert not (kit / ".nmtkit-venv").exists()
    assert _command(make(kit, "-n", "demo"), "bin/nmtkit course").startswith(".venv/bin/nmtkit")


def test_an_active_conda_env_holding_the_kit_is_used_and_recorded(kit, tmp_path):
    conda = _env_dir(tmp_path / "envs" / "nmtkit")  # environment.yml's `-e .[dev]` puts bin/nmtkit there
    out = make(kit, "setup", CONDA_PREFIX=str(conda))
    assert f"setup.sh VENV={conda}" in out and "the active conda env" in out
    assert _command(make(kit, "-n", "lab"), "jupyter lab").startswith(f"{conda}/bin/jupyter lab")  # deactivated


def test_make_leaves_tf_cpp_min_log_level_alone(kit, tmp_path):
    env = _env_dir(tmp_path / "venv")
    assert "TF_CPP_MIN_LOG_LEVEL=unset" in _command(make(kit, "demo", f"VENV={env}"), "TF_CPP_MIN_LOG_LEVEL=")
    assert "TF_CPP_MIN_LOG_LEVEL=3" in _command(make(kit, "demo", f"VENV={env}", TF_CPP_MIN_LOG_LEVEL="3"),
                                                "TF_CPP_MIN_LOG_LEVEL=")
