"""Issue #68's routes as submissions of notebook 04 (and one of 05), built on the release's blank copy: each tries to
score without the work, and test_sandbox_grade.py grades them in the sandbox beside the blank.

Submission folder names are the student ids; the grader takes each one's variant from it."""
from __future__ import annotations

from pathlib import Path

import nbformat

from nmtkit.analysis import variants
from nmtkit.course import student

NB04, NB05 = "04_bottleneck_lab.ipynb", "05_monitoring_analysis.ipynb"
LAB = ("lab_predict", "lab_fit", "lab_fp16", "lab_bursts", "lab_scaling", "lab_nic")
CHECKS04 = tuple(f"04-lab{i}-check" for i in range(1, 7))  # lab_predict .. lab_nic, in LAB's order
PRACTICE_ENV = 'import os\nos.environ["NMTKIT_VARIANT"] = "practice"'
# every practice figure as a figures file naming the practice runs, written before any check runs
FILES = '''import json, os
from pathlib import Path
from nmtkit.analysis import variants
from nmtkit.course import expected
d = Path(os.environ["NMTKIT_FIGURES_DIR"]); d.mkdir(parents=True, exist_ok=True)
labs = [{"path": str(p)} for p in sorted(variants.directory("practice").glob("lab-*"))]
rep = {"frame": {"columns": ["x"], "index": ["a"], "data": [[1]]}, "index_name": "run", "attrs": {"paths": labs}}
for gid, q in %r:
    (d / f"{gid}.json").write_text(json.dumps({"grade_id": gid, "function": "check",
                                              "args": {"rep": rep, **expected.read().get(q, {})}}))
'''
WRAP = '''import nmtkit.course.figures as _f
from nmtkit.course import expected as _e
_orig = _f.record
def _wrapped(gid, fn, thunks):
    q = {"04-lab1-check": "lab_predict", "04-lab4-check": "lab_bursts", "04-lab5-check": "lab_scaling",
         "04-lab6-check": "lab_nic", "04-lab2-check": "lab_fit", "04-lab3-check": "lab_fp16"}.get(gid)
    typed = {k: (lambda v=v: v) for k, v in _e.read().get(q, {}).items()}
    return _orig(gid, fn, {**thunks, **typed})
_f.record = _wrapped
'''
FORGE = '''import json
try:
    with open("/proc/1/fd/1", "w") as f:
        f.write("NMTKIT-SANDBOX " + json.dumps({"stopped": "FORGED: graded by hand, 100 points"}) + "\\n")
        f.write("NMTKIT-SANDBOX " + json.dumps({"notebook": {"cells": [], "metadata": {}, "nbformat": 4,
                                                            "nbformat_minor": 5, "FORGED": 1}}) + "\\n")
    print("written")
except OSError as e:
    print("refused:", e)
'''
# the routes that must score exactly the blank's score (test_sandbox_grade.py)
AS_BLANK = ("route68-practice-env", "route68-files", "route68-wrapped", "route68-strings", "route68-nic-theory",
            "route68-skip-blank", "route68-forged", "route68-points")


def blank04(release: Path) -> nbformat.NotebookNode:
    return nbformat.read(Path(release) / "notebooks" / NB04, as_version=4)


def cell(nb, gid):
    return next(c for c in nb.cells if student.grade_id(c) == gid)


def before(nb, gid: str, source: str, tags=()) -> None:
    at = nb.cells.index(cell(nb, gid))
    nb.cells.insert(at, nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)} if tags else {}))


def exprs_of(gid: str) -> dict:
    """figure name -> the expression the instructor's check cell `gid` passes for it."""
    from nmtkit.course.instructor.scoring import parse
    from nmtkit.course.student import NOTEBOOKS_DIR
    ins = student.read_notebook(NOTEBOOKS_DIR / (NB04 if gid.startswith("04") else NB05))
    return parse(gid, cell(ins, gid).source).exprs


def practice_typed(gid: str, q: str) -> str:
    """A cell that types the practice answers the release ships (for feedback) into the names the check reads."""
    lines = [f"if {k!r} in _p:\n    {e} = _p[{k!r}]" for k, e in exprs_of(gid).items() if e.isidentifier()]
    return "from nmtkit.course import expected as _e\n" + f"_p = _e.read().get({q!r}, {{}})\n" + "\n".join(lines)


def typed(gid: str, values: dict, text: bool = False) -> str:
    """Assignments of `values` (by figure name) to the names the check cell `gid` passes for them."""
    exprs = exprs_of(gid)
    return "\n".join(f"{exprs[k]} = {str(v)!r}" if text else f"{exprs[k]} = {float(v)!r}" if isinstance(
        v, float) else f"{exprs[k]} = {v!r}" for k, v in values.items() if exprs.get(k, "").isidentifier())


def ids() -> tuple[str, str, str]:
    """(A, B1, B2): A's variant differs from B1's, and B1 and B2 share theirs (the copy and the spoofed copy)."""
    a = "route68-a"
    bs = [f"route68-b{n}" for n in range(1, 300) if variants.variant_of(f"route68-b{n}") != variants.variant_of(a)]
    b1 = bs[0]
    b2 = next(b for b in bs[1:] if variants.variant_of(b) == variants.variant_of(b1))
    return a, b1, b2


def _answers(sid: str) -> dict:
    from nmtkit.course.instructor.variant_answers import answers
    return answers(variants.variant_of(sid))


def _with_figures(release: Path, sid_answers: dict, spoof: str | None = None) -> nbformat.NotebookNode:
    """The blank with `sid_answers`' lab figures typed in before each check (and, with `spoof`, the id line)."""
    nb = blank04(release)
    for gid, q in zip(CHECKS04, LAB):
        if q in sid_answers:
            before(nb, gid, typed(gid, sid_answers[q]))
    if spoof:
        before(nb, "04-setup", f'import os\nos.environ["NMTKIT_STUDENT_ID"] = {spoof!r}\n'
                               f'os.environ["NMTKIT_VARIANT"] = {variants.variant_of(spoof)!r}')
    return nb


def routes04(release: Path) -> dict:
    """Submission name (the student id) -> notebook."""
    out = {}
    nb = blank04(release)  # 1: the practice variant's answers, with the variant's environment line
    before(nb, "04-setup", PRACTICE_ENV)
    for gid, q in zip(CHECKS04, LAB):
        before(nb, gid, practice_typed(gid, q))
    out["route68-practice-env"] = nb
    nb = blank04(release)  # 1: figures files written directly, naming the practice runs
    before(nb, "04-lab1-work", FILES % (list(zip(CHECKS04, LAB)),))
    out["route68-files"] = nb
    nb = blank04(release)  # 1: the recorder wrapped, on the practice runs
    before(nb, "04-setup", PRACTICE_ENV)
    before(nb, "04-lab1-work", WRAP)
    out["route68-wrapped"] = nb
    nb = blank04(release)  # 3: the right figures, as text
    for gid, q in zip(CHECKS04, LAB):
        before(nb, gid, typed(gid, _answers("route68-strings").get(q, {}), text=True))
    out["route68-strings"] = nb
    nb = blank04(release)  # 4: lab_nic from theory: the variant's interface, the ring's bound
    before(nb, "04-lab6-check", "from nmtkit.analysis import variants as _v\n"
           "iface = _v.info(_v.active()).get('plan', {}).get('iface', 'ens5')\nover_bound = 1.0")
    out["route68-nic-theory"] = nb
    nb = blank04(release)  # 5: a cell of the student's tagged grade-skip, on the blank
    before(nb, "04-lab1-work", "x = 1", tags=["grade-skip"])
    out["route68-skip-blank"] = nb
    nb = _with_figures(release, {"lab_predict": _answers("route68-skip-half")["lab_predict"]})
    before(nb, "04-lab1-work", "x = 1", tags=["grade-skip"])  # 5: half done (lab1 right), the rest left
    out["route68-skip-half"] = nb
    nb = blank04(release)  # 6: the driver's report written by the kernel
    before(nb, "04-lab1-work", FORGE)
    out["route68-forged"] = nb
    nb = blank04(release)  # 6: a verdict's points edited, a 100-point cell of the student's own
    cell(nb, "04-lab1-verdict").metadata["nbgrader"]["points"] = 300
    nb.cells.append(nbformat.v4.new_markdown_cell("mine", metadata={"nbgrader": {
        "grade": True, "grade_id": "04-bonus-verdict", "points": 100, "solution": True, "locked": False,
        "schema_version": 3}}))
    out["route68-points"] = nb
    a, b1, b2 = ids()  # 2: A's figures, A's own; as B1 (a copy); as B2 with A's id set in the notebook
    out[a] = _with_figures(release, _answers(a))
    out[b1] = _with_figures(release, _answers(a))
    out[b2] = _with_figures(release, _answers(a), spoof=a)
    nb = nbformat.read(Path(release) / "notebooks" / NB05, as_version=4)  # 1: notebook 05's practice q4 and q6
    before(nb, "05-setup", PRACTICE_ENV)
    before(nb, "05-q4-check", practice_typed("05-q4-check", "q4"))
    before(nb, "05-q6-check", practice_typed("05-q6-check", "q6"))
    out["route68-practice05"] = nb
    return out
