"""Analysis of finished (or unfinished) runs from their files alone: loading, figures, the 11 questions, the report.

Never imports nmtkit.train: a run directory copied from any machine is enough.
"""
from nmtkit.analysis.logs import AnalysisError, Run, load_run, load_runs  # noqa: F401
from nmtkit.analysis.questions import Answer, Options, answer_all  # noqa: F401
from nmtkit.analysis.report import Report, analyse, write_report  # noqa: F401
