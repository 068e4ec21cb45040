"""One set of pins: pyproject.toml, environment.yml, the doctor's verified versions and the setup script agree."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

from nmtkit import doctor

ROOT = Path(__file__).resolve().parents[1]


def _pyproject_pins() -> dict[str, str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in meta["optional-dependencies"].values():
        reqs += extra
    return dict(_split(r) for r in reqs)


def _split(req: str) -> tuple[str, str]:
    m = re.match(r"^([A-Za-z0-9_.\-]+)\s*(.*)$", req.strip())
    return m.group(1).lower(), m.group(2).replace(" ", "")


def test_environment_yml_pins_match_pyproject():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    conda_pkgs = [d for d in env["dependencies"] if isinstance(d, str)]
    assert any(p.startswith("python=3.11") for p in conda_pkgs)
    assert any(p.startswith("cmake") for p in conda_pkgs), "conda supplies cmake for the Horovod build"
    pins = _pyproject_pins()
    listed = [p for p in pip if not p.startswith("-")]
    assert listed, "environment.yml lists no pip pins"
    for line in listed:
        name, spec = _split(line)
        assert name in pins, f"environment.yml pins {name}, which pyproject.toml does not"
        assert spec == pins[name], f"{name}: environment.yml says {spec!r}, pyproject.toml says {pins[name]!r}"
    # every runtime dependency except horovod (built by scripts/setup.sh) is listed for conda users
    runtime = {_split(r)[0] for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert runtime <= {_split(line)[0] for line in listed}
    assert "-e .[dev]" in pip, "conda's pip section installs nmtkit with the same extras"


def test_doctor_verified_versions_match_the_pins():
    pins = _pyproject_pins()
    assert pins["tensorflow"] == f"=={doctor.TENSORFLOW_VERSION}"
    assert pins["horovod"] == f"=={doctor.HOROVOD_VERSION}"
    assert pins["tf-keras"].startswith(f"=={doctor.TF_KERAS_SERIES}")
    assert "tensorflow-cpu" not in pins, "tf-keras needs the distribution named tensorflow"
    assert "pynvml" not in pins and "nvidia-ml-py" in pins


def test_tensorflow_text_moves_with_tensorflow():
    """tensorflow-text's ops are compiled for one TensorFlow minor release; export names the same pin in its error."""
    from nmtkit.serving import TF_TEXT_PIN
    pins = _pyproject_pins()
    def series(spec):
        return spec.removeprefix("==").rsplit(".", 1)[0]
    assert series(pins["tensorflow-text"]) == series(pins["tensorflow"]) == "2.18"
    assert TF_TEXT_PIN == "tensorflow-text" + pins["tensorflow-text"]


def test_installed_stack_is_the_pinned_one():
    from importlib.metadata import version
    pins = _pyproject_pins()
    for name in ("tensorflow", "tf-keras", "horovod", "tensorflow-text"):
        assert f"=={version(name)}" == pins[name], f"{name} {version(name)} installed, pinned {pins[name]}"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
    assert "make test" in (ROOT / "README.md").read_text()


def test_setup_script_is_valid_bash_and_reads_pins_from_pyproject():
    subprocess.run(["bash", "-n", str(ROOT / "scripts" / "setup.sh")], check=True)
    text = (ROOT / "scripts" / "setup.sh").read_text()
    assert "2.18.1" not in text and "0.28.1" not in text, "pins belong in pyproject.toml only"
    assert "--no-build-isolation" in text and "HOROVOD_WITH_GLOO=1" in text
    # setuptools 81 dropped pkg_resources, which TensorBoard 2.18 imports: set-up installs the pin, never the latest
    assert "$(pin setuptools)" in text and '"$ST_PIN"' in text
    assert not re.search(r"install --upgrade[^\n]* setuptools\b", text)


def test_setuptools_pin_keeps_pkg_resources():
    pins = _pyproject_pins()
    assert pins["setuptools"].endswith("<81"), "TensorBoard 2.18 imports pkg_resources (gone in setuptools 81)"
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    # scripts/setup.sh's pin() reads the first "setuptools..." string: both must say the same
    assert f"setuptools{pins['setuptools']}" in build


def test_setup_is_idempotent_and_fast_when_done():
    # the fast path: stamp present and imports fine -> exits at once without touching pip
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(Path.home()),
           "VENV": str(Path(sys.executable).parents[1])}
    check = subprocess.run(["bash", "scripts/setup.sh", "--check"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120, env=env)
    if check.returncode:  # without --check this would install into the venv (a shared one, perhaps)
        pytest.skip("this venv was set up by another scripts/setup.sh or Horovod configuration: `make setup` first")
    r = subprocess.run(["bash", "scripts/setup.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "already set up" in r.stdout


def _bin_with(tmp_path, tools=("dirname", "cat", "sha256sum", "cut", "ls", "rm", "mv", "mkdir", "c++", "g++",
                                 "make", "grep")):
    """A PATH holding only these tools (a machine without Python, nvcc, ...)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        src = shutil.which(tool)
        if src:
            (bin_dir / tool).symlink_to(src)
    return bin_dir


def test_setup_gpu_mode_without_cuda_toolkit_says_what_to_do(tmp_path):
    bin_dir = _bin_with(tmp_path)
    r = subprocess.run([shutil.which("bash"), str(ROOT / "scripts" / "setup.sh")], cwd=ROOT, capture_output=True,
                       text=True, env={"PATH": str(bin_dir), "VENV": str(Path(sys.executable).parents[1]),
                                       "NMTKIT_GPU": "1", "CUDA_HOME": str(tmp_path / "no-cuda"),
                                       "HOME": str(tmp_path)})
    assert r.returncode != 0
    assert "cuda-nvcc-12-5 cuda-cudart-dev-12-5" in r.stderr and "NMTKIT_GPU=0" in r.stderr


def test_setup_names_a_missing_python(tmp_path):
    # a machine with coreutils but no Python 3.10-3.12 on PATH
    bin_dir = _bin_with(tmp_path)
    r = subprocess.run([shutil.which("bash"), str(ROOT / "scripts" / "setup.sh")], cwd=ROOT, capture_output=True,
                       text=True, env={"PATH": str(bin_dir), "VENV": str(tmp_path / "venv"), "PYTHON": "no-such-python",
                            "HOME": str(tmp_path)})
    assert r.returncode != 0
    assert "python3.11" in r.stderr and "apt-get install" in r.stderr
