"""Static checks on the committed notebooks (nbval executes them in `make test`; these read them as files)."""
import ast
import re
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import find_comment_markers

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXPECTED = ["01_data_prep_bpe", "02_single_gpu_baseline", "03_horovod_multinode", "04_monitoring_analysis",
            "05_inference_export"]


def code_cells(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_the_course_is_five_ordered_notebooks():
    assert [p.stem for p in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_with_outputs_of_a_run(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "nmtkit"
    ran = [c for c in code_cells(path) if "NBVAL_SKIP" not in c.source]
    assert ran and all(c.get("execution_count") for c in ran), "run `nmtkit course --publish` to refresh outputs"
    assert not any(o.get("output_type") == "error" for c in ran for o in c.outputs)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_nbval_markers_are_recognised(path):
    for cell in code_cells(path):
        for line in cell.source.splitlines():
            if "NBVAL" in line and line.strip().startswith("#"):
                assert list(find_comment_markers(line)), f"nbval ignores {line!r} (a marker must be alone on its line)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_cells_orchestrate_and_outputs_hold_no_machine_paths(path):
    text = path.read_text()
    assert not re.search(r"/(work|tmp|root|home)/[A-Za-z]", text), "show paths relative to the workspace"
    for cell in code_cells(path):
        code = [l for l in cell.source.splitlines() if l.strip() and not l.strip().startswith("#")]
        assert len(code) <= 15, f"a {len(code)}-line cell: logic belongs in nmtkit/"
        assert not any(l.lstrip().startswith(("def ", "class ")) for l in code), "define functions in nmtkit/"


# --- every nmtkit name a cell uses exists (catches a rename without running the notebooks) -------------------

ROOT = Path(__file__).resolve().parents[1]
# Modules that other parts of the same change bring; until they land, a notebook naming them is an expected failure.
PENDING = {"nmtkit.train.checkpoints": "load_model/checkpoint_files move there with the train/ split (issue 10)"}


def module_file(module: str) -> Path | None:
    base = ROOT / module.replace(".", "/")
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None)


def top_level_names(module: str) -> set[str]:
    """Names a module defines, imports or lazily exports (a `_LAZY` or `_FRONT` dict), plus its submodules."""
    path = module_file(module)
    tree = ast.parse(path.read_text())
    names = {p.stem for p in path.parent.glob("*.py")} | {p.name for p in path.parent.iterdir() if p.is_dir()} \
        if path.name == "__init__.py" else set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                    if target.id in ("_LAZY", "_FRONT") and isinstance(node.value, ast.Dict):
                        names.update(k.value for k in node.value.keys if isinstance(k, ast.Constant))
    return names


def nmtkit_uses(source: str) -> list[tuple[str, str]]:
    """(module, name) for `from nmtkit.x import name` and for `alias.name` on an imported nmtkit module."""
    code = "\n".join(l for l in source.splitlines() if not l.lstrip().startswith(("%", "!")))
    tree, uses, modules = ast.parse(code), [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "nmtkit":
            for a in node.names:
                uses.append((node.module, a.name))
                if module_file(f"{node.module}.{a.name}"):
                    modules[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            modules.update({a.asname: a.name for a in node.names if a.asname and a.name.startswith("nmtkit")})
    uses += [(modules[n.value.id], n.attr) for n in ast.walk(tree)
             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules]
    return uses


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_nmtkit_name_a_cell_uses_exists(path):
    modules_of_cells = {}
    for cell in code_cells(path):
        for module, name in nmtkit_uses(cell.source):
            modules_of_cells.setdefault(module, set()).add(name)
    problems = []
    for module, names in sorted(modules_of_cells.items()):
        if module_file(module) is None:
            problems.append((module, f"no module {module}"))
            continue
        problems += [(module, f"{module} has no {n}") for n in sorted(names - top_level_names(module))]
    real = [why for module, why in problems if module not in PENDING or module_file(module)]
    assert not real, real
    if problems:
        pytest.xfail("; ".join(f"{why}: {PENDING[m]}" for m, why in problems))
