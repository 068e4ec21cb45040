"""What the notebooks call to show things: the one module that imports IPython and ipywidgets. Students reach it
through `import nmtkit as nk` (nk.setup, nk.analyse, nk.panel, nk.translation_box, ...).

    cfg, run = nk.setup(run_name="baseline")     # the preamble: config, data directory, run directory
    summary = nk.train(cfg, run)                 # one process in this kernel; the summary shows as a table
    rep = nk.analyse(["baseline", "horovod"])    # a Report (figures, answers) or, with no runs, one that says so
    rep.figure("loss"); rep.verdict(10)        # the kit's verdict: instructors' cells only
    nk.panel(job)                                # a cluster Job's live progress
    nk.translation_box(translator.translate)

Everything else the notebooks use lives in the layers below and never needs a display.
"""
from __future__ import annotations

import html
import threading
import time
from pathlib import Path

import ipywidgets as widgets
import pandas as pd
from IPython import get_ipython
from IPython.display import Image, Markdown, display

import nmtkit.analysis.report as report
from nmtkit import config
from nmtkit.analysis.report import NO_RUNS, Report
from nmtkit.course import INSTRUCTOR_KIT
from nmtkit.runs import workspace


def setup(profile: str | None = None, run_name: str | None = None,
          overrides=None) -> tuple[config.Config, Path | None]:
    """The notebook preamble in one call: the config (`profile`, else $NMTKIT_PROFILE, else tiny; then
    `overrides`) with its data directory in <workspace>/data/<profile>, and the run directory
    <workspace>/runs/<run_name> (None without a run_name). Prints where they are, relative to the workspace.

    Introduced in notebook 01_data_prep_bpe."""
    ws = workspace()
    cfg = config.load(profile, overrides)
    cfg.data.dir = str(ws / "data" / cfg.profile)
    run = ws / "runs" / run_name if run_name else None
    where = (f"run directory <workspace>/{run.relative_to(ws)}" if run is not None
             else f"data in <workspace>/{Path(cfg.data.dir).relative_to(ws)}")
    print(f"profile {cfg.profile}; {where}")
    return cfg, run


def config_table(cfg: config.Config, *sections: str, exclude=("data.dir",)) -> pd.DataFrame:
    """The config's values in `sections` (e.g. "data", or "model", "train"), one row per key.

    Introduced in notebook 01_data_prep_bpe."""
    rows = [r for r in config.table(cfg) if r[0].split(".")[0] in sections and r[0] not in exclude]
    return pd.DataFrame(rows, columns=["key", "value"]).set_index("key")


class Summary(dict):
    """A run's summary: a dict, shown in a notebook as a readable table (nmtkit.analysis.report.summary_table)."""

    def _repr_html_(self) -> str:
        return report.summary_table(self).to_html()


def train(cfg: config.Config, run, *, data_dir=None, resume: bool = True, progress: bool | None = None,
          on_log=None) -> Summary:
    """Train (or resume) a run in this kernel, one process (nmtkit.training.loop.train): returns its summary, shown
    as a table. Inside a Slurm allocation (Jupyter under salloc/sbatch) the run stops at a checkpoint before the
    allocation ends. `run`: the run directory; `data_dir`: the prepared data (default cfg.data.dir); `resume`:
    from the last checkpoint; `progress`: a progress bar (default: when no `on_log`).

    Introduced in notebook 02_single_gpu_baseline."""
    from nmtkit.allocation import allocation_end
    from nmtkit.training.loop import train as train_loop
    return Summary(train_loop(cfg, run, data_dir=data_dir, resume=resume, progress=progress, on_log=on_log,
                              deadline=allocation_end()))


# --- the analysis report -----------------------------------------------------------------------------------

class Analysis:
    """A Report for the notebooks: every method works, and says why there is nothing, when no run was found.
    Built on first need (`make`): the figures and the 11 questions' evidence take seconds, and a notebook that
    only compares runs (03) needs neither."""

    def __init__(self, rep: Report | None, found: list[Path], make=None, loaded: list | None = None):
        self._report, self.found, self._make, self._loaded = rep, found, make, loaded

    @property
    def report(self) -> Report | None:
        if self._report is None and self._make is not None:
            self._report, self._make = self._make(), None
        return self._report

    def __bool__(self) -> bool:
        return self._report is not None or self._make is not None

    @property
    def runs(self) -> list:
        return self._report.runs if self._report else (self._loaded or [])

    @property
    def run(self):
        """The last run analysed, or None."""
        return self.runs[-1] if self.runs else None

    @property
    def reference(self):
        """The reference run shipped with the kit (2 hosts x 2 ranks over a real link), when analysed."""
        from nmtkit.analysis.reference import reference_run
        from nmtkit.errors import AnalysisError
        try:
            ref = reference_run().resolve()  # the active variant's (nmtkit.analysis.variants)
        except AnalysisError:
            return None
        return next((r for r in self.runs if r.path.resolve() == ref), None)

    @property
    def mine(self):
        """The student's own last run (notebook 05: the Horovod run), else the reference run."""
        own = [r for r in self.runs if r is not self.reference]
        return own[-1] if own else self.reference

    def comparison(self):
        if not self:
            return NO_RUNS
        if self._report is None:  # the table alone: question 1's evidence, no figures (report.compare)
            return report.readable(report.compare(self._loaded))
        return report.readable(self._report.comparison)

    def monitor(self, columns: str = "time|host|rank|cpu|gpu|net_", rows: int = 5):
        """The first sampler records of the last run (the columns matching `columns`): every interface the sampler
        counted, not a guessed few (a NIC named ens5 or nmt0 carries what lo or eth0 does not)."""
        return report.readable(self.run.monitor.filter(regex=columns).head(rows)) if self else NO_RUNS

    def figure(self, title: str) -> None:
        show_figure(self.report, title)

    def eval_mode_losses(self, run, batches: int = 10) -> str:
        """Question 3: the loss with dropout off on a training slice and on dev, from the run's checkpoint (loads
        TensorFlow; a few seconds on the tiny model), or why it cannot be measured."""
        from nmtkit.training.heldout import describe
        return describe(run, batches)

    def paired_bleu(self, run, step_a: int, step_b: int) -> dict:
        """Question 2: dev BLEU at evaluation step_b minus at step_a, with the 95% interval of a paired bootstrap
        over the dev sentences (seeded; nmtkit.analysis.evidence.paired_bleu says what it returns)."""
        from nmtkit.analysis.evidence import paired_bleu
        return paired_bleu(run, step_a, step_b)

    def listing(self, run, folder: str = "checkpoints") -> list[str]:
        """The files under `folder` of a run, relative to it (the reference run: as it was listed when frozen)."""
        return report.listing(run, folder)

    def recap(self, namespace: dict) -> pd.DataFrame:
        """Notebook 05's closing table: per question, the figures your own cells computed (read from `namespace`,
        the notebook's globals()), to read beside your verdicts; a figure you did not compute says so."""
        from nmtkit.analysis.questions import book
        def shown(v) -> str:
            if v is None:
                return "(not computed)"
            if isinstance(v, (bool, int, float)) or getattr(v, "ndim", None) == 0:  # numpy scalars too
                return str(bool(v)) if str(getattr(v, "dtype",
                                                   type(v).__name__)).startswith("bool") else f"{float(v):.4g}"
            return str(v)
        # the homework's questions only: the lab's figures are notebook 04's
        rows = [{"question": f"Q{q.number}. {q.title}", "figure": name, "yours": shown(namespace.get(name))}
                for q in book.homework() for name in q.targets]
        return pd.DataFrame(rows).set_index(["question", "figure"])

    def evidence(self, number: int):
        return report.evidence(self.report, number)

    def checkpoint_names(self):
        return report.checkpoint_names(self.report) if self.report else NO_RUNS

    def write(self, out_dir: str | Path | None = None) -> Path | None:
        """report.md (and report.json) for these runs; None when there are none. Into the directory they were
        analysed into, the analysis is written as it is (its figures are there); elsewhere they are analysed again."""
        if not self.report:
            return None
        if out_dir is None or Path(out_dir).resolve() == self.report.out_dir.resolve():
            return report.write_files(self.report)
        return report.write_report(self.found, out_dir)


def _verdict(self, number, rubric: bool = True, table=None) -> None:
    """The kit's verdict on question `number` for every run, and the grading rubric (instructors' cells);
    number "lab": the bottleneck lab's, on the runs of `table` (nk.lab_runs()'s; default the shipped ones)."""
    if number == "lab":
        from nmtkit.course.instructor.book import lab_rubric
        from nmtkit.course.instructor.verdicts import lab_verdict
        display(Markdown(f"**The lab.** {lab_verdict(table.attrs.get('paths') if table is not None else None)}"))
        if rubric:
            display(Markdown(f"**Rubric, the lab.** {lab_rubric()}"))
        return
    if self.report is None:
        return show_verdict(None, number, rubric)
    from dataclasses import replace

    from nmtkit.course.instructor.book import answer
    # the verdict's measurements without drawing its figure again: the report drew it (0.3-0.8 s a verdict)
    drawn = {r.name: self.report.answers[r.name][number - 1].figure for r in self.report.runs}
    show_verdict(self.report, number, rubric, {r.name: replace(answer(r, number), figure=drawn[r.name])
                                               for r in self.report.runs})


if INSTRUCTOR_KIT:  # a student's release has no verdicts
    Analysis.verdict = _verdict


def analyse(runs=("baseline", "horovod"), out_dir: str | Path | None = None, reference: bool = False) -> Analysis:
    """Figures and answers for runs: directories, or names under <workspace>/runs (each said found or MISSING
    with how to make it), and with reference=True the kit's reference run last. Figures go under out_dir
    (default: the first run).

    Introduced in notebook 02_single_gpu_baseline."""
    names = [r for r in runs if not isinstance(r, Path)]
    found = [Path(r) for r in runs if isinstance(r, Path)] + (report.find_runs(names) if names else [])
    if reference:
        from nmtkit.analysis.reference import reference_run
        found.append(reference_run())
        print(f"found   the reference run {found[-1].name} (2 hosts x 2 ranks over a shaped link, shipped with nmtkit)")
    if out_dir is None and found and reference and found[0] == found[-1]:  # the reference alone: never write into
        out_dir = workspace() / "runs" / "report"                          # the package, into the workspace
    if not found:
        return Analysis(None, found)
    loaded = report.load_runs(found)
    return Analysis(None, found, make=lambda: report.analyse(loaded, out_dir), loaded=loaded)


def show_figure(rep: Report | None, title: str) -> None:
    """One of the report's overview figures ("loss", "BLEU", "learning rate", ...), or why there is none."""
    if rep is None:
        print(NO_RUNS)
    elif title in rep.figures:
        display(Image(filename=str(rep.figures[title])))
    else:
        print(f"(no {title} figure: the logs hold nothing to draw)")


def show_verdict(rep: Report | None, number: int, rubric: bool = True, verdicts: dict | None = None) -> None:
    """Question `number` for every run: the kit's verdict in words (`verdicts`: run name -> Answer, else the
    report's own answers), its figure, then the rubric (instructors)."""
    if rep is None:
        print(NO_RUNS)
        return
    from nmtkit.course.instructor.book import rubric_by_number
    for run in rep.runs:
        a = verdicts[run.name] if verdicts else rep.answers[run.name][number - 1]
        body = a.answer if a.answered else f"**Not answered.** {a.answer}"
        display(Markdown(f"**{run.name}, Q{a.number}.** {body}"))
        if a.figure is not None:
            display(Image(filename=str(a.figure)))
    if rubric:
        display(Markdown(f"**Rubric, Q{number}.** {rubric_by_number()[number]}"))


# --- widgets -------------------------------------------------------------------------------------------------

def translation_box(translate, placeholder: str = "Type an English sentence and press Enter"):
    """A text box: type a sentence, press Enter, read the translation below it.

    `translate` is any fn(list[str]) -> list[str] (a Translator's .translate, or nmtkit.serving.load(path)). The
    widget only reacts to typing, so running the cell never blocks (nbval runs it fine).

    Introduced in notebook 06_inference_export."""
    box = widgets.Text(placeholder=placeholder, layout=widgets.Layout(width="80%"), continuous_update=False)
    out = widgets.HTML()

    def on_value(change):
        text = change["new"].strip()
        if text:
            out.value = f"<b>{html.escape(translate([text])[0])}</b>"
    box.observe(on_value, names="value")
    return widgets.VBox([box, out])


def panel(job, interval: float = 1.0):
    """A cluster Job's live progress (every rank's step, loss and step time), refreshed every `interval` seconds
    from a background thread until the job ends; a failed rank's error appears in red. Outside a notebook kernel:
    the progress table as text.

    Introduced in notebook 03_horovod_multinode."""
    if get_ipython() is None:
        return job.progress().to_string()  # a Job, or a RunWatch (attach)
    box = widgets.HTML(value=panel_html(job))
    threading.Thread(target=refresh, args=(job, box, interval), name="nmtkit-panel", daemon=True).start()
    return box


def panel_html(job) -> str:
    """A Job's (or RunWatch's) headline, its per-rank progress table and, in red, its failure."""
    table = job.progress().to_html(na_rep="-", float_format=lambda v: f"{v:.4g}")
    error = getattr(job, "error", None)
    failure = "" if error is None else f"<p style='color:#b00'><b>{html.escape(str(error))}</b></p>"
    return f"<p>{html.escape(job.headline())}</p>" + table + failure


def attach(run, interval: float = 2.0):
    """The live panel of a run from its directory's files: a run started with `nmtkit train --np` (nohup, tmux),
    in another kernel, or by this notebook before a kernel restart.

    Used by no notebook's cells (the kit's own and the CLI's)."""
    from nmtkit.analysis.live import RunWatch
    return panel(RunWatch(run), interval)


def refresh(job, box, interval: float) -> None:
    """Update box.value from panel_html(job) until the job is done or fails (the panel's thread runs this)."""
    while True:
        finished = job.done
        try:
            job.check()
            box.value = panel_html(job)
        except Exception as err:  # noqa: BLE001  RankFailedError, or the controller gone: show it, stop refreshing
            box.value += f"<p style='color:#b00'><b>{html.escape(str(err))}</b></p>"
            return
        if finished:
            return
        time.sleep(interval)
