"""The instructor's half of the course, which `nmtkit release` leaves out (nmtkit.course.INSTRUCTOR_KIT says
whether it is here):

    grade.py      `nmtkit grade`: a submission run with the instructor's check cells put back, no training
    classgrade.py `nmtkit grade --class`: every submission of a class, one grades.csv and a class report
    hidden.py     the graded comparison against decisions.py
    judgments.py  the yes/no rules on the evidence: plateau, overfitting, busy, the network's bound and bottleneck
    decisions.py  the deciding figures of each question (what the kit's answer rests on)
    verdicts.py   the kit's verdicts in words (the instructor's report, `rep.verdict(n)`)
    rubric.py     per question, what a full answer holds
    release.py    `nmtkit release`: the student release, without this folder
"""
