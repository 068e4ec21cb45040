"""The course wing: what runs, copies, checks and grades the course.

    runner.py     `nmtkit course`: the notebooks run headless, in order, in a fresh workspace
    student.py    the exercise convention (nbgrader metadata, grade ids) and student copies (`nmtkit student`)
    targets.py    notebook 04's figures by name, with tolerances and hints
    exercises.py  `nk.check(rep, "qN", ...)`: graded by instructor/hidden.py in the instructor's kit, else its form only
    practice.py   the checks of notebooks 01, 02, 03 and 05
    prose.py      the figures the notebooks' prose states, computed

instructor/ (the instructor's half: `nmtkit release` leaves the whole folder out; INSTRUCTOR_KIT: is it here?)
    grade.py      `nmtkit grade`: a submission run with the instructor's check cells put back, no training
    classgrade.py `nmtkit grade --class`: every submission of a class, one grades.csv and a class report
    hidden.py     the graded comparison against decisions.py
    judgments.py  the yes/no rules on the evidence: plateau, overfitting, busy, the network's bound and bottleneck
    decisions.py  the deciding figures of each question (what the kit's answer rests on)
    verdicts.py   the kit's verdicts in words (the instructor's report, `rep.verdict(n)`)
    rubric.py     per question, what a full answer holds
    release.py    `nmtkit release`: the student release, without this folder

Sits above nmtkit.analysis (runs' files -> measurements -> figures -> report), which never imports it.
"""
import importlib.util

# the one probe of the instructor's half: the CLI, the notebook helpers and the checks ask this, nothing else
INSTRUCTOR_KIT = importlib.util.find_spec("nmtkit.course.instructor") is not None
