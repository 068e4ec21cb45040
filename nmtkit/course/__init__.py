"""The course wing: what runs, copies, checks and grades the course.

    runner.py     `nmtkit course`: the notebooks run headless, in order, in a fresh workspace
    student.py    the exercise convention (nbgrader metadata, grade ids) and student copies (`nmtkit student`)
    grade.py      `nmtkit grade`: a submission run with the instructor's check cells put back, no training
    targets.py    notebook 04's figures by name, with tolerances and hints
    exercises.py  `nk.check(rep, "qN", ...)`: graded by hidden.py in the instructor's kit, else its form only
    hidden.py     the graded comparison against decisions.py (instructor's kit only)
    judgments.py  the yes/no rules on the evidence: plateau, overfitting, busy, the network's bound and bottleneck
    release.py    `nmtkit release`: the student release, without hidden, decisions, judgments, verdicts, rubric
    practice.py   the checks of notebooks 01, 02, 03 and 05
    prose.py      the figures the notebooks' prose states, computed
    decisions.py  the deciding figures of each question (what the kit's answer rests on)
    verdicts.py   the kit's verdicts in words (the instructor's report, `rep.verdict(n)`)
    rubric.py     per question, what a full answer holds (instructors)

Sits above nmtkit.analysis (runs' files -> measurements -> figures -> report), which never imports it.
"""
