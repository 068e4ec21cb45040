"""Analysis of finished (or unfinished) runs from their files alone: runs' files -> measurements -> figures -> report.

    logs.py       the run directory's files -> a Run of DataFrames (run.json, config, data_stats.json through
                  their owners: nmtkit.runs and DataStats); the latest checkpoint's files and variables
    evidence.py   measurements of the learning, the data and the checkpoints -> numbers (Q1-3, Q6-10)
    bleu.py       dev BLEU's noise: one BLEU's bootstrap spread, two evaluations' paired bootstrap (Q2), from the
                  translations or a shipped run's per-sentence statistics
    machines.py   measurements of the machines from the monitor samples -> numbers (Q4, Q5, Q11); the one
                  estimator of bytes per step (counted between step ends)
    figures.py    PNG figures (matplotlib, Agg), written atomically
    questions.py  each question's record (the students' registry, book), evidence and figure, no verdict
    report.py     report.md / report.json for one or more runs, and the notebooks' no-display helpers
    tables.py     tables for people: one format per column, units in the headers, nested evidence flattened
    lab.py        the bottleneck lab's runs, one row each; a run's link samples and per-interface rates (notebook 04)
    reference.py  the reference run shipped with the kit (2 hosts x 2 ranks over a shaped link): reference_run()
    ablation.py   question 6's warm-up ablation: two shipped 1-rank runs differing only in the warm-up
    variants.py   which shipped runs a student reads: the practice variant or a graded one, chosen by student id
    live.py       a run followed from its files while it trains (the notebooks' panel, nmtkit.notebook.attach)

The verdicts in words, the decisions they rest on and the rubric are the course's (nmtkit.course). Never imports
nmtkit.training or TensorFlow (only checkpoint_info's variable listing does, when called): a run directory copied
from any machine is enough.
"""
from nmtkit.analysis.logs import Run, load_run, load_runs
from nmtkit.analysis.questions import Answer, Options, evidence_all
from nmtkit.analysis.reference import reference_run
from nmtkit.analysis.report import Report, analyse, write_report

__all__ = ["Answer", "Options", "Report", "Run", "analyse", "evidence_all", "load_run", "load_runs", "reference_run",
           "write_report"]
