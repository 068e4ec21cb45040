"""`nmtkit grade`: the instructor's checks run whatever the student did to theirs, a wrong figure fails with a hint
in words, and notebook 05 grades from the shipped reference run without training, in under 2 minutes. These run
with --trust-submissions (a local kernel: make test needs no Docker); tests/heavy/test_sandbox_grade.py grades in the
students' image."""
import copy
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from nmtkit.course.instructor.container import Sandbox
from nmtkit.course.instructor.grade import SKIP_TAG, assemble, grade
from nmtkit.course.student import NOTEBOOKS_DIR, exercises, grade_id, is_instructor, student_notebook

pytestmark = pytest.mark.long  # the long tier (tests/conftest.py): make test leaves it out

NB05 = NOTEBOOKS_DIR / "05_monitoring_analysis.ipynb"
CODE = re.compile(r"\w\(|\w\.\w|=|\[|\bimport\b")  # a call, an attribute, an assignment, an index
TRUSTED = Sandbox(trusted=True)


def instructor():
    return nbformat.read(NB05, as_version=4)


def cell_of(nb, gid):
    return next(c for c in nb.cells if grade_id(c) == gid)


def submission():
    """A student who solved every exercise (the instructor's solutions, instructor cells gone), then: deleted the
    Q10 check and got Q10 wrong, deleted the Q7 check (right answer), and replaced the Q3 check by `pass` with a
    wrong Q3."""
    nb = instructor()
    nb.cells = [c for c in nb.cells if not is_instructor(c) and grade_id(c) not in ("05-q10-check", "05-q7-check")]
    work = cell_of(nb, "05-q10-work")
    work.source = work.source.replace("cumcount() >= 3]", "cumcount() >= 0]")  # the graph's tracing steps kept
    cell_of(nb, "05-q3-work").source += "\nloss_up = loss_up + 0.5"
    cell_of(nb, "05-q3-check").source = "pass  # nothing to see here"
    return nb


def test_assemble_puts_the_instructors_checks_back_and_skips_what_grading_skips():
    ins, nb = instructor(), submission()
    nb.cells.insert(2, nbformat.v4.new_code_cell("nk.train(cfg, run)", metadata={"tags": [SKIP_TAG]}))
    cell_of(nb, "05-setup").source = "import nmtkit as nk\nws = '/somewhere/else'"  # the locked set-up, edited
    graded, calls = assemble(nb, ins, NB05.name)
    assert cell_of(graded, "05-setup").source == cell_of(ins, "05-setup").source  # put back as it ships
    nb.cells.remove(cell_of(nb, "05-setup"))  # and, deleted, put back before every other code cell
    again, _ = assemble(nb, ins, NB05.name)
    assert next(c for c in again.cells if c.cell_type == "code").source == cell_of(ins, "05-setup").source
    ids = [grade_id(c) for c in graded.cells]
    assert all(ids.count(f"05-q{q}-check") == 1 for q in range(1, 12))
    # a deleted check follows its work cell; a tampered one is the instructor's again, as a recorder of its figures
    assert ids.index("05-q10-check") == ids.index("05-q10-work") + 1
    assert ids.index("05-q7-check") == ids.index("05-q7-work") + 1
    q3 = cell_of(graded, "05-q3-check").source
    assert "_nmtkit_record('05-q3-check', 'check'" in q3 and "'loss_up': lambda: loss_up" in q3 and "pass" not in q3
    # the question is the instructor's literal, never evaluated where the student's code runs
    assert calls["05-q3-check"].literals == {"question": "q3"} and "'q3'" not in q3
    assert not any("nk.check" in c.source for c in graded.cells if grade_id(c) and grade_id(c).endswith("-check"))
    assert not any(is_instructor(c) for c in graded.cells)
    # the student's own grade-skip tag skips nothing: their cell runs, its tag gone (the skips are the instructor's)
    [own] = [c for c in graded.cells if "nk.train(" in c.source]
    assert SKIP_TAG not in own.metadata.get("tags", []) and "nbgrader" not in own.metadata
    assert exercises(graded).keys() == exercises(ins).keys()


def test_hints_point_in_words_and_never_give_code_or_the_value():
    from nmtkit.analysis.questions import book
    for q, record in book.items():
        for name, (_, hint) in record.targets.items():
            assert not CODE.search(hint), f"{q} {name}: the hint reads like code: {hint}"


def test_a_wrong_figure_fails_with_a_hint_that_holds_no_code_and_no_answer():
    from nmtkit.analysis import load_run, reference_run
    from nmtkit.course.exercises import check
    from nmtkit.course.instructor.book import decide
    from nmtkit.errors import ExerciseError
    ref = load_run(reference_run())
    rep = type("Rep", (), {"runs": [ref]})
    want = decide(ref)["q10"]
    check(rep, "q10", **want)
    with pytest.raises(ExerciseError) as e:
        check(rep, "q10", mean_ms=want["mean_ms"] * 1.2, tokens_per_step=want["tokens_per_step"])
    msg = str(e.value)
    assert msg.startswith("✗ q10 mean_ms: too high. Hint: ")
    assert not CODE.search(msg.split("Hint: ")[1]) and f"{want['mean_ms']:.4g}" not in msg
    with pytest.raises(ExerciseError, match="q10 tokens_per_step: missing"):
        check(rep, "q10", mean_ms=want["mean_ms"])


@pytest.mark.slow
def test_grading_a_submission_runs_the_real_checks_without_training(tmp_path):
    sub = tmp_path / "submission"
    sub.mkdir()
    nbformat.write(submission(), sub / NB05.name)
    t0 = time.time()
    [result] = grade(sub, out=tmp_path / "grades.json", sandbox=TRUSTED)
    seconds = time.time() - t0
    cells = {c["grade_id"]: c for c in result["cells"]}
    failed = sorted(g for g, c in cells.items() if c["status"] == "failed")
    assert failed == ["05-q10-check", "05-q3-check"], {g: cells[g]["message"] for g in failed}
    assert "q10 mean_ms: too high. Hint: " in cells["05-q10-check"]["message"]
    assert "q3 loss_up: too high" in cells["05-q3-check"]["message"]
    assert cells["05-q7-check"]["status"] == "passed"  # the deleted check ran, and the right answer passed
    # 11 questions' verdicts, and the questions' checks graded by hand for now (their records' hand_graded)
    from nmtkit.course.instructor.book import hand_graded
    from nmtkit.course.instructor.scoring import parse
    hand = [q for q in (f"q{n}" for n in range(1, 12)) if hand_graded(q, grader=True)]
    assert result["points"] == result["max_points"] - 4 and result["manual"] == 11 + len(hand)
    by_hand = {grade_id(c) for c in instructor().cells if grade_id(c) and grade_id(c).endswith("-check")
               and hand_graded(parse(grade_id(c), c.source).question or "", grader=True)}
    assert {g for g, c in cells.items() if c["status"] == "manual" and g.endswith("-check")} == by_hand
    # no training: the executed notebook holds no training log line, and grading took under 2 minutes
    executed = Path(result["executed"]).read_text()
    assert "ms/step | " not in executed and "fresh start" not in executed
    assert seconds < 120, f"grading notebook 05 took {seconds:.0f} s"
    assert (tmp_path / "grades.json").exists()


@pytest.mark.slow
def test_a_student_copy_left_as_handed_out_scores_nothing(tmp_path):
    copy_, _ = student_notebook(copy.deepcopy(instructor()), NB05.name)
    sub = tmp_path / "submission"
    sub.mkdir()
    nbformat.write(copy_, sub / NB05.name)
    [result] = grade(sub, sandbox=TRUSTED)
    assert result["points"] == 0 and result["max_points"] == 16  # less the checks graded by hand for now
    assert {c["status"] for c in result["cells"] if c["grade_id"].endswith("verdict")} == {"unanswered"}


def test_the_students_report_holds_evidence_and_the_instructors_adds_verdicts_and_rubric(tmp_path):
    import json

    from nmtkit.analysis import reference_run
    from nmtkit.analysis.report import write_report
    student = write_report([reference_run()], tmp_path / "student").read_text()
    from nmtkit.course.instructor.book import rubric_by_number, write_instructor_report
    staff = write_instructor_report([reference_run()], tmp_path / "staff").read_text()
    verdict_words = ("Yes.", "No:", "the network does hold steps back", "No cost")
    assert "evidence" in student and not any(w in student for w in verdict_words) and "Rubric" not in student
    assert all(json.loads((tmp_path / "student" / "report.json").read_text())[n][0]["answer"] == ""
               for n in json.loads((tmp_path / "student" / "report.json").read_text()))
    assert any(w in staff for w in verdict_words) and all(r in staff for r in rubric_by_number().values())


@pytest.mark.slow
def test_a_submission_without_its_workspace_is_graded_without_training_and_says_no_run(tmp_path):
    """Notebook 06's training cell carries grade-skip: with no run handed in, its run-dependent check says so."""
    from nmtkit.course.instructor.grade import NO_RUN, SKIP_TAG
    from nmtkit.course.student import NOTEBOOKS_DIR
    nb05 = NOTEBOOKS_DIR / "06_inference_export.ipynb"
    assert any(SKIP_TAG in c.metadata.get("tags", []) for c in nbformat.read(nb05, as_version=4).cells)
    sub = tmp_path / "submission"
    sub.mkdir()
    shutil.copy(nb05, sub / nb05.name)
    [result] = grade(sub, out=tmp_path / "grades.json", sandbox=TRUSTED)
    check = next(c for c in result["cells"] if c["grade_id"] == "06-batch-check")
    assert check["status"] == NO_RUN and check["points"] is None and "--workspace" in check["message"]
    assert result["max_points"] == 0 and "ms/step | " not in Path(result["executed"]).read_text()
