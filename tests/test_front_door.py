"""One front door (`import nmtkit as nk`), one error root, one writer of run.json, no import cycle, and the
CLI's one-line refusals of bad input."""
import ast
import importlib
import inspect
import json
import pkgutil
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import nmtkit

pytestmark = pytest.mark.long  # the long tier (tests/conftest.py): make test leaves it out

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SOURCES = sorted((ROOT / "nmtkit").rglob("*.py"))


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def test_notebooks_reach_the_kit_only_as_nk():
    bad = []
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            for line in "".join(cell["source"]).splitlines():
                if re.search(r"\bnmtkit\b", line) and line.strip() != "import nmtkit as nk":
                    bad.append(f"{path.name}: {line.strip()}")
    assert not bad, bad


def test_every_front_door_name_resolves_and_import_stays_light():
    code = ("import sys, nmtkit as nk; assert 'tensorflow' not in sys.modules; "
            "missing = [n for n in nk.__all__ if not hasattr(nk, n)]; print(missing)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert 20 <= len(nmtkit.__all__) <= 48 and "NmtkitError" in nmtkit.__all__  # 48: summaries, ceiling (#71)


def test_every_exception_class_of_the_kit_derives_from_nmtkit_error():
    from nmtkit.errors import NmtkitError
    bad, seen = [], 0
    for info in pkgutil.walk_packages(nmtkit.__path__, "nmtkit."):
        if info.name.endswith("__main__"):
            continue
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == mod.__name__:
                seen += 1
                if not issubclass(obj, NmtkitError):
                    bad.append(f"{mod.__name__}.{name}")
    assert seen >= 10 and not bad, bad  # 12 since one class per wing (tests/test_errors.py counts them)


WRITERS = {"atomic_write_json", "atomic_write_text", "write_text", "open", "update_status", "_write_status"}


def test_only_the_rundir_module_writes_run_json():
    bad = []
    for path in SOURCES:
        if path.name == "runs.py" and path.parent.name == "nmtkit":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and getattr(node, "id", getattr(node, "attr", "")) in (
                    "_write_status", "update_status"):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} names {ast.unparse(node)}")
            if isinstance(node, ast.Call):
                fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                text = ast.unparse(node)
                if fn in WRITERS and ("run.json" in text or re.search(r"\bSTATUS\b", text)):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {text[:80]}")
    assert not bad, bad


def test_rundir_writes_through_one_function(tmp_path, monkeypatch):
    from nmtkit import runs
    calls = []
    real = runs._write_status
    monkeypatch.setattr(runs, "_write_status", lambda run, **f: calls.append(f) or real(run, **f))
    rd = runs.RunDir(tmp_path / "r")
    with rd.session():  # the session's holder is the one writer
        rd.started(step=0, total_steps=10)
        rd.progress(5)
        rd.ended("stopped", 5, reason="budget")
        assert [c.get("status") for c in calls] == ["running", None, "stopped"]
        assert rd.status()["reason"] == "budget" and rd.status()["step"] == 5
        rd.failed("rank 1 died")
    assert rd.live_status()["status"] == "failed"


def test_the_import_graph_of_nmtkit_has_no_cycle():
    names = {module_name(p) for p in SOURCES}
    graph = {}
    for path in SOURCES:
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("nmtkit"):
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("nmtkit")]
            deps |= {t for t in targets if t in names}
        me = module_name(path)
        graph[me] = {d for d in deps if d != me and d != "nmtkit"}
    state, cycle = {}, []

    def visit(m, stack):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                cycle.append(stack + [d])
            elif d not in state:
                visit(d, stack + [d])
        state[m] = 2
    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert len(graph) > 40 and not cycle, cycle


def nmtkit_cli(*args, cwd):
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "nmtkit.cli", *args], capture_output=True, text=True, cwd=cwd,
                       timeout=120)
    return p, time.time() - t0


@pytest.mark.parametrize("np_", ["0", "-2"])
def test_np_below_one_is_refused_in_one_line(tmp_path, np_):
    p, _ = nmtkit_cli("train", "--np", np_, "--logdir", str(tmp_path / "run"), cwd=tmp_path)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert p.stderr.strip().count("\n") == 0 and f"--np {np_}" in p.stderr and "at least 1" in p.stderr
    assert not (tmp_path / "run").exists()


def test_more_ranks_than_slots_is_refused_before_any_engine_starts(tmp_path):
    p, _ = nmtkit_cli("train", "--np", "8", "--hosts", "localhost:2", "--logdir", str(tmp_path / "run"), cwd=tmp_path)
    line = p.stderr.strip()
    assert p.returncode != 0 and "\n" not in line and "Traceback" not in line
    assert "--np 8" in line and "give 2 slots" in line
    assert not (tmp_path / "run").exists()  # refused before the lock, the controller or any SSH


def test_a_file_where_the_run_directory_belongs_is_named(tmp_path):
    f = tmp_path / "notadir"
    f.write_text("mine\n")
    p, _ = nmtkit_cli("train", "--logdir", str(f), cwd=tmp_path)
    line = p.stderr.strip()
    assert p.returncode != 0 and "\n" not in line and "a file, not a directory" in line and str(f) in line
    assert f.read_text() == "mine\n"  # nothing lost


def test_an_error_that_is_not_the_kits_is_called_a_bug_with_its_log(tmp_path, monkeypatch, capsys):
    from nmtkit import cli

    def boom(args):
        raise KeyError("oops")
    monkeypatch.setattr(cli, "cmd_report", boom)
    assert cli.main(["report", "--run", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "internal error (a bug" in err and "KeyError" in err and "nmtkit-error.log" in err
    assert "KeyError: 'oops'" in (tmp_path / "nmtkit-error.log").read_text()


def first_use():
    """Each front-door name a notebook's code cells use -> the first notebook that does."""
    first = {}
    for path in NOTEBOOKS:
        for c in json.loads(path.read_text())["cells"]:
            if c["cell_type"] == "code":
                for m in re.finditer(r"\bnk\.(\w+)", "".join(c["source"])):
                    first.setdefault(m.group(1), path.stem)
    return first


def test_each_front_door_name_says_in_its_source_which_notebook_introduces_it():
    first = first_use()
    assert len(first) >= 30, sorted(first)
    bad = []
    for name in nmtkit.__all__:
        module, attr = nmtkit._FRONT[name]
        source = inspect.getsource(getattr(importlib.import_module(module), attr))
        doc = ast.get_docstring(ast.parse(textwrap.dedent(source)).body[0]) or ""
        want = f"Introduced in notebook {first[name]}." if name in first else "Used by no notebook's cells"
        if want not in doc or (name not in first and "Introduced in notebook" in doc):
            bad.append(f"{name}: wants {want!r}")
    assert not bad, bad


def test_no_front_door_name_is_a_submodule_name():
    """`import nmtkit.X` sets the attribute nmtkit.X to the module: a name X at the front door would be hidden."""
    submodules = {m.name for m in pkgutil.iter_modules(nmtkit.__path__)}
    assert {"training", "serving", "cluster"} <= submodules
    assert not submodules & set(nmtkit.__all__), submodules & set(nmtkit.__all__)


def test_architecture_doc_counts_the_front_door_names():
    text = (ROOT / "docs" / "architecture.md").read_text()
    counts = re.findall(r"maps\s+(\d+)\s+names", text)
    assert counts == [str(len(nmtkit.__all__))], (counts, len(nmtkit.__all__))


def test_a_submodule_imported_first_does_not_change_what_a_front_door_name_is():
    """Each kit submodule imported first, then every front-door name resolved: the very object `_FRONT` names.

    tests/fresh_imports.py forks one child per submodule from a parent that loaded only `nmtkit` and the third-party
    modules (TensorFlow, ...), so each child is a fresh kit at a fraction of a new interpreter's cost."""
    p = subprocess.run([sys.executable, str(ROOT / "tests" / "fresh_imports.py")], capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert p.returncode == 0 and report["modules"] > 60 and not report["bad"], (report, p.stderr[-2000:])


def test_files_written_before_the_rename_name_no_moved_module():
    """The shipped runs and the training records were written before nmtkit/train/ became nmtkit/training/: what
    module paths they hold still import (a checkpoint stores variables, Keras's registry a package name, no path)."""
    from nmtkit.training import precision
    files = [p for p in (ROOT / "nmtkit" / "reference").rglob("*") if p.suffix in (".json", ".jsonl", ".md")]
    files += sorted((ROOT / "nmtkit" / "training").glob("*.json"))
    dotted = {m for p in files for m in re.findall(r"\bnmtkit(?:\.[a-z_0-9]+)+", p.read_text())}
    assert len(files) > 100 and dotted, (len(files), dotted)
    bad = []
    for path in sorted(dotted):
        parts = path.split(".")
        for i in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            try:
                for attr in parts[i:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                bad.append(path)
            break
    assert not bad, bad
    ratio, why = precision.bf16_speed(512, flags={"amx_bf16", "avx512_bf16"})  # the record, from its new home
    assert ratio is not None and ratio > 0 and "base shape" in why, why
