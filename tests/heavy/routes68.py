"""Issue #68's routes as submissions of notebooks 04 and 05 (and 03's plan), built on the release's blank copies: each
tries to score without the work, and test_sandbox_grade.py grades them in the sandbox beside the blank.

Submission folder names are the student ids; the grader takes each one's variant from it."""
from __future__ import annotations

from pathlib import Path

import nbformat

from nmtkit.analysis import variants
from nmtkit.course import student

NB03, NB04, NB05 = "03_horovod_multinode.ipynb", "04_bottleneck_lab.ipynb", "05_monitoring_analysis.ipynb"
LAB = ("lab_predict", "lab_fit", "lab_fp16", "lab_bursts", "lab_scaling", "lab_nic")
CHECKS04 = tuple(f"04-lab{i}-check" for i in range(1, 7))  # lab_predict .. lab_nic, in LAB's order
CHECKS05 = {"05-q4-check": "q4", "05-q6-check": "q6"}  # notebook 05's checks on the variant's shipped runs
SPOOFS = ("NMTKIT_STUDENT_ID", "NMTKIT_VARIANT")  # the one line a copy adds: A's id, or A's variant
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
# figures files forged on the student's OWN variant's lab runs, with the checksums the kit's reader would record,
# and the practice answers; rewritten every few ms by a thread of the kernel's, so that the file the driver sends after
# a check cell is (or races) the forged one: the grader's check on its own copy of those runs decides, as if the
# numbers had been typed in
RACE = '''import json, os, threading, time
from pathlib import Path
from nmtkit.analysis import variants
from nmtkit.analysis.logs import digests
from nmtkit.course import expected
d = Path(os.environ["NMTKIT_FIGURES_DIR"]); d.mkdir(parents=True, exist_ok=True)
labs = sorted(p for p in variants.directory(variants.active()).glob("lab-*") if p.is_dir())
rep = {"frame": {"columns": ["x"], "index": ["a"], "data": [[1]]}, "index_name": "run",
       "attrs": {"paths": [{"path": str(p)} for p in labs], "files": [digests(p) for p in labs]}}
answers = expected.read()
def forge():
    while True:
        for gid, q in %r:
            text = json.dumps({"grade_id": gid, "function": "check", "args": {"rep": rep, **answers.get(q, {})}})
            (d / f"{gid}.json").write_text(text)
        time.sleep(0.005)
threading.Thread(target=forge, daemon=True).start()
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
# notebook 04's routes that must score exactly the blank's score (test_sandbox_grade.py)
AS_BLANK = ("route68-practice-env", "route68-files", "route68-files-race", "route68-wrapped", "route68-strings",
            "route68-nic-theory", "route68-skip-blank", "route68-forged", "route68-points")


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
    ins = student.read_notebook(NOTEBOOKS_DIR / {"03": NB03, "04": NB04}.get(gid[:2], NB05))
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


def ids() -> dict:
    """{"a": A, "copy": B, and per spoof line (SPOOFS) a B of its own}: A's variant differs from B's, and every B
    shares the copy's variant (the plain copy, and each copy with a one-line spoof)."""
    a = "route68-a"
    bs = [f"route68-b{n}" for n in range(1, 400) if variants.variant_of(f"route68-b{n}") != variants.variant_of(a)]
    same = [b for b in bs if variants.variant_of(b) == variants.variant_of(bs[0])]
    return {"a": a, "copy": same[0], **dict(zip(SPOOFS, same[1:]))}


def _answers(sid: str) -> dict:
    from nmtkit.course.instructor.variant_answers import answers
    return answers(variants.variant_of(sid))


def blank(release: Path, name: str) -> nbformat.NotebookNode:
    return nbformat.read(Path(release) / "notebooks" / name, as_version=4)


def _with_figures(release: Path, sid_answers: dict, name: str = NB04, spoof: str | None = None,
                  of: str | None = None) -> nbformat.NotebookNode:
    """The blank notebook `name` with `sid_answers`' figures typed in before each check on shipped runs (and, with
    `spoof`, the one line that sets that variable to student `of`'s id or variant before the set-up)."""
    nb = blank(release, name)
    checks = dict(zip(CHECKS04, LAB)) if name == NB04 else CHECKS05
    for gid, q in checks.items():
        if q in sid_answers:
            before(nb, gid, typed(gid, sid_answers[q]))
    if spoof:
        value = of if spoof == "NMTKIT_STUDENT_ID" else variants.variant_of(of)
        before(nb, name[:2] + "-setup", f"import os\nos.environ[{spoof!r}] = {value!r}")
    return nb


def routes(release: Path) -> dict:
    """Submission name (the student id) -> {notebook file: notebook}."""
    out = {k: {NB04: nb} for k, nb in routes04(release).items()}
    nb = blank(release, NB05)  # 1: notebook 05's practice q4 and q6
    before(nb, "05-setup", PRACTICE_ENV)
    for gid, q in CHECKS05.items():
        before(nb, gid, practice_typed(gid, q))
    out["route68-practice05"] = {NB05: nb}
    who = ids()  # 2: A's figures, A's own; as B (a copy); as other B's with a one-line spoof of A's id or variant
    mine = _answers(who["a"])
    for sid, spoof in [(who["a"], None), (who["copy"], None), *[(who[s], s) for s in SPOOFS]]:
        out[sid] = {name: _with_figures(release, mine, name, spoof, who["a"]) for name in (NB04, NB05)}
    out["route68-nb03-blank"] = {NB03: blank(release, NB03)}  # 5: 03's plan check counts, answered or not
    nb = blank(release, NB03)
    ins = student.read_notebook(student.NOTEBOOKS_DIR / NB03)
    cell(nb, "03-plan-work").source = cell(ins, "03-plan-work").source
    out["route68-nb03-plan"] = {NB03: nb}
    return out


def routes04(release: Path) -> dict:
    """Notebook 04's routes: submission name (the student id) -> notebook."""
    out = {}
    nb = blank04(release)  # 1: the practice variant's answers, with the variant's environment line
    before(nb, "04-setup", PRACTICE_ENV)
    for gid, q in zip(CHECKS04, LAB):
        before(nb, gid, practice_typed(gid, q))
    out["route68-practice-env"] = nb
    nb = blank04(release)  # 1: figures files written directly, naming the practice runs
    before(nb, "04-lab1-work", FILES % (list(zip(CHECKS04, LAB)),))
    out["route68-files"] = nb
    nb = blank04(release)  # 1: figures files forged on the student's own runs, racing the recorder
    before(nb, "04-lab1-work", RACE % (list(zip(CHECKS04, LAB)),))
    out["route68-files-race"] = nb
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
    return out
