"""The course wing: what runs, copies, checks and grades the course.

    runner.py     `nmtkit course`: the notebooks run headless, in order, in a fresh workspace
    unanswered.py the runner's plan: unanswered exercises and the cells that need their answers
    student.py    the exercise convention (nbgrader metadata, grade ids) and student copies (`nmtkit student`)
    targets.py    notebook 05's figures by name, with tolerances and hints
    exercises.py  `nk.check(rep, "qN", ...)`: graded by instructor/hidden.py in the instructor's kit, else its form only
    practice.py   the checks of notebooks 01, 02, 03 and 05
    prose.py      the figures the notebooks' prose states, computed
    summaries.py  notebooks 04 and 05's closing bullets and Q4's memory readings, worded from the run's figures
    numbercheck.py every figure the prose states held against the outputs beside it (a test; later the grader's hints)
    expected.py   the practice variant's expected figures: its checks say right or wrong in a student's kit
    variant.py    `nk.variant()`: the student's variant, said in the notebook; the id asked for once and stored
    figures.py    the figures file: what a graded check cell reads, recorded where the notebook runs, decoded outside
    sandbox.py    the driver that runs a graded notebook within its limits (in the students' image, or trusted)

instructor/ (the instructor's half: grading, verdicts, rubric, the release; `nmtkit release` leaves the whole
folder out; INSTRUCTOR_KIT says whether it is here; its __init__ lists its modules)

Sits above nmtkit.analysis (runs' files -> measurements -> figures -> report), which never imports it.
"""
import importlib.util

# the one probe of the instructor's half: the CLI, the notebook helpers and the checks ask this, nothing else
INSTRUCTOR_KIT = importlib.util.find_spec("nmtkit.course.instructor") is not None
