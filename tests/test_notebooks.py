"""Static checks on the committed notebooks (nbval executes them in `make test`; these read them as files)."""
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
