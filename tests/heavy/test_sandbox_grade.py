"""`nmtkit grade` in its sandbox (a container of the students' image, built once a session by the `image` fixture):
a class of notebook 05 submissions graded as an instructor grades one, `--class` with two at once.

- The instructor's solutions score full marks; the blank copy scores 0.
- Five routes that scored full marks when grading ran in the instructor's kit, each on the solutions with Q10 left
  undone: `nk.check` replaced, `nk.check` wrapped to swallow failures, the answers imported from the instructor's
  modules, a too-high/too-low bisection, a notebook that reads NMTKIT_GRADING. Each scores what its honest figures
  earn: everything but Q10.
- Honest mistakes of the homework's seed submissions (the MFU as a percentage, MB and MiB swapped, the graph's
  tracing steps kept in the mean, minutes for hours): each loses exactly its own check.
- One submission per sandbox limit (time, scratch, processes, output): stopped there, the reason in grades.csv, the
  checks recorded before it graded.
- Grading the same submissions twice gives the same grades.csv.
- Issue #68's routes (tests/heavy/routes68.py builds them), on notebooks 04 and 05: the practice variant's answers
  (practice-expected.json, shipped for feedback) typed in after setting NMTKIT_VARIANT=practice, written as figures
  files (naming the practice runs, or the student's own runs with their checksums, racing the recorder), or added
  by a wrapped recorder, each score exactly the blank's score; so do text for numbers, lab_nic from theory, the
  kernel writing the driver's report, and edited points. A half-done notebook with a grade-skip tag keeps its honest
  maximum, and so does notebook 03's plan check. A copy of another student's notebooks with one line setting
  NMTKIT_STUDENT_ID or NMTKIT_VARIANT to theirs scores as the copy without it, on notebooks 04 and 05.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

import nbformat
import pytest
from dockertools import TAG, why_not
from routes68 import NB04, blank04, ids, routes
from solutions import ROOT

from nmtkit.course import INSTRUCTOR_KIT, student

if not INSTRUCTOR_KIT:  # a student's release: grading is the instructor's kit's
    pytest.skip("grading needs the instructor's kit", allow_module_level=True)
pytestmark = pytest.mark.skipif(why_not() is not None, reason=why_not() or "")
NB05 = "05_monitoring_analysis.ipynb"
Q10 = "05-q10-work"
WRONG_Q10 = "mean_ms, tokens_per_step = 300.0, 3000.0  # no work: a guess"

ROUTES = {  # name -> (a cell put after the set-up, Q10's work cell)
    "replaced": ('nk.check = lambda *a, **k: print("✓")', WRONG_Q10),
    "wrapped": ("_check = nk.check\ndef _quiet(*a, **k):\n    try:\n        _check(*a, **k)\n    except Exception:\n"
                "        print('✓')\nnk.check = _quiet", WRONG_Q10),
    "imported": ("", "try:\n    from nmtkit.course.instructor.book import decide\n"
                     "    globals().update(decide(run)['q10'])\nexcept ImportError:\n    " + WRONG_Q10),
    "bisected": ("", "lo, hi = 1.0, 1e5\nfor _ in range(40):\n    mid = (lo * hi) ** 0.5\n    try:\n"
                     "        nk.check(rep, 'q10', run=run, mean_ms=mid, tokens_per_step=3000.0)\n        break\n"
                     "    except Exception as e:\n        if 'too high' in str(e):\n            hi = mid\n"
                     "        elif 'too low' in str(e):\n            lo = mid\n        else:\n            break\n"
                     "mean_ms, tokens_per_step = mid, 3000.0"),
    "environ": ("import os\nGRADING = os.environ.get('NMTKIT_GRADING')",
                "if GRADING:\n    from nmtkit.course.instructor.book import decide\n"
                "    globals().update(decide(run)['q10'])\nelse:\n    " + WRONG_Q10),
}
MISTAKES = {  # name -> (work cell, (old, new) in its solution): each loses its own check only
    "q4-percent": ("05-q4-work", ('["peak_flops"]\n', '["peak_flops"] * 100\n')),
    "q7-swapped": ("05-q7-work", ("size / 1e6, size / 2**20", "size / 2**20, size / 1e6")),
    "q10-tracing": ("05-q10-work", ("cumcount() >= 3]", "cumcount() >= 0]")),
    "q1-minutes": ("05-q1-work", ("/ 3600", "/ 60")),
}
LIMITS = {  # name -> (a cell put before Q1's work, the words of the reason)
    "time": ("while True:\n    pass", "the time limit"),
    "scratch": ("with open('/tmp/fill', 'wb') as f:\n    while True:\n        f.write(bytes(1_000_000))",
                "the scratch limit (128 MiB, full)"),
    "processes": ("import subprocess\nkids = []\nwhile True:\n    kids.append(subprocess.Popen(['sleep', '300']))",
                  "the process limit"),
    "output": ("for i in range(10**6):\n    print('x' * 200)", "the output limit"),
}


def solved(release_nb: Path, skip: set = frozenset()) -> nbformat.NotebookNode:
    """The release's notebook 05 with the instructor's answers in every work and verdict cell not in `skip`."""
    instructor = student.read_notebook(ROOT / "notebooks" / NB05)
    answers = {student.grade_id(c): c.source for c in instructor.cells
               if student.grade_id(c) and (student.role(c) or ("", "", ""))[2] != "check"}
    nb = nbformat.read(release_nb, as_version=4)
    for c in nb.cells:
        if student.grade_id(c) in answers and student.grade_id(c) not in skip:
            c.source = answers[student.grade_id(c)]
    return nb


def cell(nb, gid):
    return next(c for c in nb.cells if student.grade_id(c) == gid)


def put(nb, source: str, before: str | None = None) -> None:
    """A student's own cell: after the cell that names the runs (run, ref), or before the cell `before`."""
    at = (nb.cells.index(cell(nb, before)) if before else
          next(i for i, c in enumerate(nb.cells) if "run, ref = rep.mine" in c.source) + 1)
    nb.cells.insert(at, nbformat.v4.new_code_cell(source))


@pytest.fixture(scope="module")
def graded(image, tmp_path_factory):
    """The class, graded in the sandbox: grades.csv's rows by student, and the class's directory."""
    from nmtkit.course.instructor.classgrade import grade_class
    from nmtkit.course.instructor.container import Sandbox
    release_nb = image / "notebooks" / NB05
    cls = tmp_path_factory.mktemp("class")
    subs = {"solutions": solved(release_nb), "blank": nbformat.read(release_nb, as_version=4)}
    for name, (setup, q10) in ROUTES.items():
        nb = solved(release_nb, skip={Q10})
        if setup:
            put(nb, setup)
        cell(nb, Q10).source = q10
        subs[f"route-{name}"] = nb
    for name, (gid, (old, new)) in MISTAKES.items():
        nb = solved(release_nb)
        assert old in cell(nb, gid).source, (gid, old)
        cell(nb, gid).source = cell(nb, gid).source.replace(old, new)
        subs[f"mistake-{name}"] = nb
    for name, (source, _) in LIMITS.items():
        nb = solved(release_nb)
        put(nb, source, before="05-q2-work")
        subs[f"limit-{name}"] = nb
    for name, nb in subs.items():
        (cls / name).mkdir()
        nbformat.write(nb, cls / name / NB05)
    for name, files in {"blank04": {NB04: blank04(image)}, **routes(image)}.items():
        (cls / name).mkdir(exist_ok=True)
        for file, nb in files.items():
            nbformat.write(nb, cls / name / file)
    out = cls.parent / f"{cls.name}-out"
    sandbox = Sandbox(image=TAG, seconds=90, scratch_mb=128)
    frame, report = grade_class(cls, out, jobs=2, sandbox=sandbox)
    rows = {r["student"]: r for r in csv.DictReader((out / "grades.csv").open())}
    return rows, cls, out, sandbox


def checks(row) -> dict:
    return {k: float(v) for k, v in row.items() if re.fullmatch(r"\d\d-(q|lab)\d+", k) and v != ""}


def test_the_solutions_score_full_marks_and_the_blank_copy_nothing(graded):
    rows = graded[0]
    right, blank = rows["solutions"], rows["blank"]
    assert float(right["points"]) == float(right["max_points"]) > 0, right
    assert all("graded by hand" in n for n in right["notes"].split(" | ")), right["notes"]
    assert right["graded_in"] == f"sandbox {TAG}" and not right["stopped"]
    assert float(blank["points"]) == 0 and float(blank["max_points"]) == float(right["max_points"])


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_route_around_the_check_earns_only_the_honest_figures(graded, route):
    rows = graded[0]
    row, full = rows[f"route-{route}"], checks(rows["solutions"])
    got = checks(row)
    assert got["05-q10"] == 0 and "05-q10: " in row["notes"], row
    assert {k: v for k, v in got.items() if k != "05-q10"} == {k: v for k, v in full.items() if k != "05-q10"}
    assert float(row["points"]) == float(rows["solutions"]["points"]) - full["05-q10"]


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_each_seed_mistake_loses_exactly_its_own_check(graded, mistake):
    rows = graded[0]
    gid = MISTAKES[mistake][0][: -len("-work")]
    got, full = checks(rows[f"mistake-{mistake}"]), checks(rows["solutions"])
    lost = sorted(k for k in full if got.get(k) != full[k])
    assert lost == [gid], (lost, rows[f"mistake-{mistake}"]["notes"])


@pytest.mark.parametrize("limit", sorted(LIMITS))
def test_a_notebook_past_a_sandbox_limit_is_stopped_and_graded_on_what_it_wrote(graded, limit):
    rows = graded[0]
    row = rows[f"limit-{limit}"]
    assert row["stopped"].startswith(f"05: {LIMITS[limit][1]}"), row
    got, full = checks(row), checks(rows["solutions"])
    assert got["05-q1"] == full["05-q1"] > 0, got  # Q1's check ran before the limit: recorded
    assert got["05-q2"] == 0 and "not reached" in row["notes"] and not row["error"]


def test_grading_the_same_submissions_twice_gives_the_same_grades(graded, tmp_path):
    import shutil

    from nmtkit.course.instructor.classgrade import grade_class
    rows, cls, out, sandbox = graded
    again = tmp_path / "class"
    for name in ("solutions", "blank", "route-replaced", "mistake-q7-swapped"):
        shutil.copytree(cls / name, again / name)
    grade_class(again, tmp_path / "a", jobs=2, sandbox=sandbox)
    grade_class(again, tmp_path / "b", jobs=2, sandbox=sandbox)
    first = (tmp_path / "a" / "grades.csv").read_text()
    assert first == (tmp_path / "b" / "grades.csv").read_text()
    mine = {r["student"]: r for r in csv.DictReader(first.splitlines())}
    # and the same as in the whole class's run (whose grades.csv also has notebook 04's columns, empty here, so its
    # points columns are floats: 2.0 there for 2 here)
    assert all(checks(mine[s]) == checks(rows[s]) for s in mine)
    assert all(mine[s][k] == rows[s][k] for s in mine for k in mine[s] if k not in checks(mine[s]))


def test_an_image_of_another_commit_is_refused_in_one_line():
    from nmtkit.course.instructor.container import Sandbox, ready
    from nmtkit.errors import CourseError
    with pytest.raises(CourseError) as e:
        ready(Sandbox(image="debian:bookworm-slim"))
    assert "is the release of commit unknown" in str(e.value) and "\n" not in str(e.value)


def test_68_each_route_scores_the_blanks_score(graded):
    """Issue #68's routes on notebook 04: the practice answers (environment, figures files, a wrapped recorder), text
    for numbers, lab_nic from theory, forged reports and points: each scores what the blank scores, out of the same
    maximum."""
    from routes68 import AS_BLANK
    rows = graded[0]
    blank = rows["blank04"]
    assert float(blank["points"]) == 0 and float(blank["max_points"]) == 7, blank  # lab1, lab4, lab5, ceiling (1)
    for name in AS_BLANK:
        row = rows[name]
        assert (row["points"], row["max_points"], row["manual"]) == (
            blank["points"], blank["max_points"], blank["manual"]), (name, row)
        assert not row["stopped"] and not row["error"], (name, row)


PRACTICE = {  # route 1: the practice variant's answers (nmtkit/reference/practice-expected.json) on a graded variant
    "route68-practice-env": ("blank04", "os.environ['NMTKIT_VARIANT'] = 'practice', then the practice answers typed"),
    "route68-files": ("blank04", "figures files written with the practice answers and the practice runs' paths"),
    "route68-files-race": ("blank04", "figures files with the practice answers on the student's own runs and their "
                                      "checksums, rewritten by a thread while the recorder runs"),
    "route68-wrapped": ("blank04", "NMTKIT_VARIANT=practice, nmtkit.course.figures.record wrapped to add them"),
    "route68-practice05": ("blank", "notebook 05: NMTKIT_VARIANT=practice, the practice q4 and q6 typed"),
}


@pytest.mark.parametrize("route", sorted(PRACTICE))
def test_68_the_practice_answers_earn_nothing_on_a_graded_variant(graded, route):
    rows = graded[0]
    row, blank = rows[route], rows[PRACTICE[route][0]]
    assert float(row["points"]) == float(blank["points"]) == 0, (PRACTICE[route][1], row)
    assert float(row["max_points"]) == float(blank["max_points"]) > 0 and not row["error"], row
    if route in ("route68-practice-env", "route68-practice05"):
        assert "not one of your variant's" in row["notes"], row["notes"]


def test_68_a_grade_skip_tag_leaves_the_honest_maximum(graded):
    rows = graded[0]
    half = rows["route68-skip-half"]
    assert (float(half["points"]), float(half["max_points"])) == (2, 7), half  # lab1, lab4, lab5, ceiling (1)


def test_68_notebook_03s_plan_check_counts_answered_or_not(graded):
    """Without any tag, notebook 03's plan check (after the skipped cluster cells) is in the maximum: 0 unanswered."""
    rows = graded[0]
    blank, plan = rows["route68-nb03-blank"], rows["route68-nb03-plan"]
    assert (blank["03-plan"], plan["03-plan"]) == ("0.0", "2.0"), (blank, plan)
    assert float(blank["max_points"]) == float(plan["max_points"]) >= 2 and float(plan["points"]) == 2, plan
    assert float(blank["points"]) == 0, blank


ON_SHIPPED = {"04": {"04-lab1", "04-lab4", "04-lab5"}, "05": {"05-q4", "05-q6"}}  # the automatic, variant-graded checks


@pytest.mark.parametrize("spoof", ["NMTKIT_STUDENT_ID", "NMTKIT_VARIANT"])
@pytest.mark.parametrize("nb", sorted(ON_SHIPPED))
def test_68_a_one_line_spoof_scores_as_the_plain_copy(graded, nb, spoof):
    """A's figures handed in as B: without the line (the copy) and with `os.environ[spoof] = A's` (the spoof), B's
    variant decides; the spoof scores exactly as the copy, and grades.csv says B's variant."""
    rows, who = graded[0], ids()
    a, copy, spoofed = rows[who["a"]], rows[who["copy"]], rows[who[spoof]]
    mine = {k for k, v in checks(a).items() if k.startswith(nb) and v > 0}
    assert mine == ON_SHIPPED[nb], a  # the typed figures are right for A
    assert copy["variant"] == spoofed["variant"] != a["variant"]

    def of(row):
        return {k: v for k, v in checks(row).items() if k.startswith(nb)}
    assert of(spoofed) == of(copy) and all(of(copy)[k] == 0 for k in mine), (copy, spoofed)
    assert float(spoofed["points"]) == float(copy["points"]) == 0, spoofed
    if spoof == "NMTKIT_VARIANT":  # the kit then read A's variant's runs: about no run of B's
        assert "not one of your variant's" in spoofed["notes"], spoofed


def test_68_the_kernel_cannot_write_the_drivers_report(graded):
    rows, _, out, _ = graded
    row = rows["route68-forged"]
    assert "FORGED" not in row["stopped"] and not row["stopped"]
    kept = (out / "students" / "route68-forged-executed" / NB04).read_text()
    assert "refused" in kept and '"FORGED": 1' not in kept
