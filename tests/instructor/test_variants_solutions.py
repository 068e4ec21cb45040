"""Graded variants (issue #55): with the instructor's solutions, every check cell of notebooks 04 and 05 that reads
shipped runs passes on every variant, the practice one included, the cells run as a student runs them (the variant
picked by $NMTKIT_VARIANT, as a student id picks it)."""
from __future__ import annotations

import re

import nbformat
import pytest

from nmtkit.analysis import variants
from nmtkit.analysis.questions import book
from nmtkit.course.student import NOTEBOOKS_DIR, is_instructor, role

pytestmark = pytest.mark.long  # the long tier (tests/conftest.py): make test leaves it out

LAB = ("lab_predict", "lab_fit", "lab_fp16", "lab_bursts", "lab_scaling", "lab_nic")
SHIPPED = ("q4", "q5", "q6", "q11")  # notebook 05's questions on shipped runs (the others read the student's own)

HAND = book.hand_graded()  # question -> why its check is graded by hand for now


def cells(name: str, keep) -> list[str]:
    nb = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code" and not is_instructor(c) and keep(c)]


def lab_cell(c) -> bool:
    r = role(c)
    return ("MY_RUNS = None" in c.source or "nk.variant()" in c.source
            or bool(r and r[1].startswith("lab") and r[2] in ("work", "check")))


def q_cell(c) -> bool:
    r = role(c)
    return ("run, ref = rep.mine, rep.reference" in c.source or "nk.warmup_runs()" in c.source
            or "nk.variant()" in c.source
            or bool(r and r[1] in SHIPPED and r[2] in ("work", "check")))


def passed(out: str, questions) -> tuple[set, set]:
    ok = set(re.findall(r"✓ (\w+):", out)) | set(re.findall(r"✎ (\w+): graded by hand", out))
    return ok & set(questions), set(questions) - ok


@pytest.mark.parametrize("name", [variants.PRACTICE, *variants.graded()])
def test_the_solutions_pass_every_check_on_shipped_runs_in_every_variant(name, tmp_path, monkeypatch, capsys):
    import matplotlib
    matplotlib.use("Agg")
    import nmtkit as nk
    monkeypatch.setenv(variants.ENV_VARIANT, name)
    monkeypatch.setenv("NMTKIT_WORKDIR", str(tmp_path))
    ns: dict = {"nk": nk, "ws": tmp_path}
    for src in cells("04_bottleneck_lab.ipynb", lab_cell):
        exec(src, ns)
    ns["rep"] = nk.analyse([], tmp_path / "report", reference=True)
    for src in cells("05_monitoring_analysis.ipynb", q_cell):
        exec(src, ns)
    import matplotlib.pyplot as plt
    plt.close("all")  # the cells' figures, one set a variant
    out = capsys.readouterr().out
    got, lacking = passed(out, LAB + SHIPPED)
    assert not lacking, (name, lacking, out[-2000:])
    assert "too " not in out and "not it" not in out, out  # hand-graded comparisons agree too
    assert {q for q in got if q in HAND} <= set(HAND)
    assert ns["ref"].path == variants.run_dir(variants.info(name)["reference"], name)
