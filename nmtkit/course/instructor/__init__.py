"""The instructor's half of the course, which `nmtkit release` leaves out (nmtkit.course.INSTRUCTOR_KIT says
whether it is here):

    commands.py   the CLI's `nmtkit grade` and `nmtkit release`
    grade.py      `nmtkit grade`: a submission run with its check cells put back as recorders, no training
    container.py  where it runs: a container of the students' image (the sandbox), or trusted, a local process
    scoring.py    each check decided here, in the grader's process, on the figures the notebook recorded
    pinning.py    which runs a figure may be about: the student's variant's and workspace's, the grader's decision
    classgrade.py `nmtkit grade --class`: every submission of a class, one grades.csv and a class report
    roster.py     `nmtkit grade --roster`: the class's student ids; a submission id not on it is refused
    exchange.py   the hub's exchange: an assignment released, each student's own box collected, nbgrader's layout read
    hub_commands.py `nmtkit hub release|collect|feedback`: the hub's exchange driven from the host
    marks.py      the marks of the written answers and hand-graded checks: a SQLite store, merged into grades.csv
    flags.py      hints for the grader, never points: the misconceptions the kit can see in a written answer
    markpage.py   `nmtkit grade serve` and the hub's marking service: grading by question (markpage_static/)
    hidden.py     the graded comparison against decisions.py
    judgments.py  the yes/no rules on the evidence: plateau, overfitting, busy, the network's bound and bottleneck
    decisions.py  the deciding figures of each question (what the kit's answer rests on)
    mfu.py        question 4's FLOPs and MFU from a run's logged steps (record_flops, steady_mfu)
    verdicts.py   the kit's verdicts in words (the instructor's report, `rep.verdict(n)`)
    warmup.py     question 6's verdict: the run's own curve, then the warm-up ablation's gaps
    seeds.py      question 9: the class's three checkpoint sizes against the kit's measured bytes per parameter
    linkverdict.py notebook 03's link verdict: nk.link_table's frame in words
    book.py       the instructor's registry of questions: each question's decider, verdict, rubric items
    rubric.py     a rubric item's form (text, points, misconception) and its words
    release.py    `nmtkit release`: the student release, without this folder
    variant_answers.py each variant's answers from its own runs; the practice variant's expected figures
    copies.py     the class report's flag: figures that pass another variant's checks and fail their own
    variant_commands.py `nmtkit variant expected` and `nmtkit variant record`
"""
