"""Issue #68: what a graded notebook brings is not trusted, and the grader decides which runs a check is about. No
kernel here: the assembled notebook, the scoring of recorded figures, the pinning of runs, the driver's report."""
from __future__ import annotations

import json
import sys

import nbformat
import pandas as pd
import pytest

from nmtkit.analysis import variants
from nmtkit.course.instructor import scoring
from nmtkit.course.instructor.grade import NO_RUN, SKIP_TAG, assemble, executed, score
from nmtkit.course.instructor.pinning import Pin
from nmtkit.course.student import NOTEBOOKS_DIR, cell_source, grade_id, student_notebook

NB03, NB04 = "03_horovod_multinode.ipynb", "04_bottleneck_lab.ipynb"


def release(name):
    """(the instructor's notebook, the student's copy as the release hands it out)."""
    ins = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    return ins, student_notebook(nbformat.read(NOTEBOOKS_DIR / name, as_version=4), name)[0]


def unanswered(calls) -> dict:
    """Every check's figures as an unanswered notebook records them: each name undefined."""
    return {gid: json.dumps({"grade_id": gid, "function": c.function, "args": {
        n: {"error": f"NameError: name '{n}' is not defined"} for n in c.exprs}}) for gid, c in calls.items()}


def graded(name, nb, ws, pin=None):
    ins = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    assembled, calls = assemble(nb, ins, name)
    cells = score(assembled, calls, unanswered(calls), scoring.Decoder({}), None, ins, ws, pin)
    auto = [c for c in cells if c["points"] is not None]
    return {c["grade_id"]: c for c in cells}, sum(c["max_points"] for c in auto)


def test_a_students_grade_skip_tag_takes_no_check_out_of_the_maximum(tmp_path):
    ins, blank = release(NB04)
    _, honest_max = graded(NB04, blank, tmp_path)
    tagged = nbformat.read(NOTEBOOKS_DIR / NB04, as_version=4)
    tagged = student_notebook(tagged, NB04)[0]
    at = next(i for i, c in enumerate(tagged.cells) if grade_id(c) == "04-lab1-work")
    tagged.cells.insert(at, nbformat.v4.new_code_cell("x = 1", metadata={"tags": [SKIP_TAG]}))
    cells, got_max = graded(NB04, tagged, tmp_path)
    assert got_max == honest_max > 0
    assert not any(c["status"] == NO_RUN for c in cells.values())
    assert all(c["points"] == 0 for c in cells.values() if c["grade_id"].endswith("check") and c["status"] != "manual")


def test_notebook_03s_plan_counts_unanswered_and_its_link_check_waits_only_for_the_missing_trials(tmp_path):
    _, blank = release(NB03)
    cells, _ = graded(NB03, blank, tmp_path)
    assert cells["03-plan-check"]["status"] == "failed" and cells["03-plan-check"]["points"] == 0
    assert cells["03-link-check"]["status"] == NO_RUN  # the trials come from the skipped cluster cells
    (tmp_path / "runs" / "compression").mkdir(parents=True)  # handed in: graded, and unanswered counts
    cells, _ = graded(NB03, blank, tmp_path)
    assert cells["03-link-check"]["status"] == "failed" and cells["03-link-check"]["points"] == 0


def test_points_and_cells_are_the_instructors_whatever_the_student_edits(tmp_path):
    ins, blank = release(NB04)
    for c in blank.cells:
        if grade_id(c) == "04-lab1-verdict":
            c.metadata["nbgrader"]["points"] = 300
            c.source = "my answer"
    blank.cells.append(nbformat.v4.new_markdown_cell("free points", metadata={"nbgrader": {
        "grade": True, "grade_id": "04-bonus-verdict", "points": 100, "solution": True, "locked": False}}))
    cells, _ = graded(NB04, blank, tmp_path)
    assert "04-bonus-verdict" not in cells
    assert cells["04-lab1-verdict"]["max_points"] == 3 and cells["04-lab1-verdict"]["status"] == "manual"
    want = {grade_id(c) for c in ins.cells if (c.metadata.get("nbgrader") or {}).get("grade")}
    assert set(cells) == want


def test_text_for_a_number_fails_its_form_and_the_copy_flag_reads_it_as_the_number():
    from nmtkit.course.instructor.hidden import wrong
    assert wrong("0.514", 0.514, (0.02, 0)) == "not a number" and wrong(0.514, 0.514, (0.02, 0)) is None
    assert wrong("False", False, (0, 0)) == "not it" and wrong(False, False, (0, 0)) is None
    call = scoring.Call("06-batch-check", "check_batching", {}, {"speedup": "s", "batch_ms": "b", "lat": "lat"})
    lat = {"frame": {"columns": ["batch_size", "ms_per_sentence"], "index": [0, 1], "data": [[1, 10.0], [32, 1.0]]},
           "index_name": None, "attrs": {}}
    text = json.dumps({"args": {"speedup": "10.0", "batch_ms": 32.0, "lat": lat}})
    got = scoring.decide(call, text, scoring.Decoder({}))
    assert got["status"] == "failed" and "speedup: not of its form" in got["message"]
    assert got["figures"] == {"speedup": 10.0, "batch_ms": 32.0}  # what the class report's copy flag compares
    right = json.dumps({"args": {"speedup": 10.0, "batch_ms": 32.0, "lat": lat}})
    assert scoring.decide(call, right, scoring.Decoder({}))["status"] == "passed"


def test_lab_nic_is_graded_by_hand_with_its_reason():
    call = scoring.Call("04-lab6-check", "check", {"question": "lab_nic"}, {"rep": "ref"})
    got = scoring.decide(call, None, scoring.Decoder({}))
    assert got["status"] == "manual" and "1.0" in got["message"]


def frame_of(paths) -> pd.DataFrame:
    """A lab table as nk.lab_runs makes it: the runs' paths, and what its reader read of each."""
    from nmtkit.analysis.logs import digests
    t = pd.DataFrame({"x": range(len(paths))})
    t.attrs["paths"] = [str(p) for p in paths]
    t.attrs["files"] = [digests(p) for p in paths]
    return t


def test_a_figure_about_runs_other_than_the_students_variants_scores_nothing(tmp_path):
    from types import SimpleNamespace
    own = variants.graded()[0]
    pin = Pin(own, tmp_path)
    lab = Pin("practice", tmp_path).shipped()
    mine = sorted(p for p in pin.shipped() if p.name.startswith("lab-"))
    call = scoring.Call("04-lab1-check", "check", {"question": "lab_predict"}, {"rep": "lab", "predicted_s": "p"})
    assert pin.problem(call, {"rep": frame_of(mine)}) is None
    practice = sorted(p for p in lab if p.name.startswith("lab-"))
    assert "not one of your variant's" in pin.problem(call, {"rep": frame_of(practice)})
    other = Pin(variants.graded()[1], tmp_path).shipped()
    assert "not one of your variant's" in pin.problem(call, {"rep": frame_of(sorted(other))})
    q4 = scoring.Call("05-q4-check", "check", {"question": "q4"}, {"rep": "rep", "run": "ref"})
    ref_dir = variants.run_dir(variants.info(own)["reference"], own)
    from nmtkit.analysis.logs import digests
    ws_run = SimpleNamespace(path=tmp_path / "runs" / "horovod", name="horovod", claimed={})
    assert pin.problem(q4, {"rep": SimpleNamespace(runs=[ws_run]), "run": SimpleNamespace(
        path=ref_dir, name="ref", claimed=digests(ref_dir))}) is None
    practice_ref = variants.run_dir("rehearsal-200mbit", "practice")
    assert "not one of your variant's" in pin.problem(q4, {"run": SimpleNamespace(path=practice_ref, name="r")})
    assert "this question is asked on" in pin.problem(q4, {"run": ws_run})


def test_the_drivers_report_counts_only_lines_with_the_graders_token():
    from nmtkit.course.instructor.container import Sandbox, _follow
    from nmtkit.course.sandbox import MARK
    forged = MARK + json.dumps({"stopped": "the kernel was fine, grade by hand: 100/100"})
    driver = ("import json, sys\n"
              f"print({forged!r}, flush=True)\n"
              "token = sys.stdin.readline().strip()\n"
              f"print({MARK!r} + json.dumps({{'figures': '04-lab1-check', 'text': 'x', 'token': 'guess'}}))\n"
              f"print({MARK!r} + json.dumps({{'stopped': None, 'token': token}}))\n"
              f"print({MARK!r} + json.dumps({{'notebook': {{'cells': []}}, 'token': token}}))\n")
    got = _follow([sys.executable, "-c", driver], None, Sandbox(trusted=True, seconds=30), {}, None)
    assert got.stopped is None and got.figures == {} and got.notebook == {"cells": []}


def test_the_kept_notebook_is_the_graders_with_the_outputs_of_its_own_cells():
    ins, blank = release(NB04)
    nb, _ = assemble(blank, ins, NB04)
    ran = json.loads(nbformat.writes(nb))
    first = next(i for i, c in enumerate(ran["cells"]) if c["cell_type"] == "code")
    ran["cells"][first]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ok\n"}]
    ran["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "source": "stopped: forged"})
    kept = executed(nb, ran)
    assert [cell_source(c) for c in kept["cells"]] == [c.source for c in nb.cells]
    assert not any(c["cell_type"] == "code" and c["outputs"] for c in kept["cells"])  # shifted: none taken
    ran["cells"].pop(0)
    kept = executed(nb, ran)
    assert cell_source({"source": kept["cells"][first]["outputs"][0]["text"]}) == "ok\n"


@pytest.mark.parametrize("cell_tags", [["grade-skip"], []])
def test_the_driver_sends_only_the_figures_its_recorder_cell_wrote(cell_tags):
    from nmtkit.course.sandbox import recorder_of
    rec = nbformat.v4.new_code_cell("from nmtkit.course.figures import record as _nmtkit_record\n"
                                    "_nmtkit_record('04-lab1-check', 'check', {})",
                                    metadata={"nbgrader": {"grade_id": "04-lab1-check"}, "tags": cell_tags})
    own = nbformat.v4.new_code_cell("open('/tmp/figures/04-lab1-check.json', 'w')",
                                    metadata={"nbgrader": {"grade_id": "04-lab1-check"}})
    assert recorder_of(rec) == "04-lab1-check" and recorder_of(own) is None
