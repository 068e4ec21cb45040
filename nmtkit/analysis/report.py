"""`nmtkit report`: the figures and the 11 answers for one or more runs, as report.md (+ report.json).

    path = write_report(["runs/baseline", "runs/horovod"], out_dir="runs/report")
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

import nmtkit.analysis.figures as figures
import nmtkit.analysis.tables as tables
from nmtkit import runs as rundir
from nmtkit.analysis.evidence import Options, node_price, steady_steps, tokens_per_s
from nmtkit.analysis.logs import Run, load_runs
from nmtkit.analysis.questions import Answer, evidence_all
from nmtkit.errors import AnalysisError
from nmtkit.files import atomic_write_text

FIGURES_DIR = rundir.FIGURES


@dataclass
class Report:
    runs: list[Run]
    out_dir: Path
    figures: dict[str, Path] = field(default_factory=dict)          # overview figures (all runs together)
    answers: dict[str, list[Answer]] = field(default_factory=dict)  # run name -> its 11 answers
    comparison: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per run
    rubric: dict[int, str] | None = None  # question -> rubric: only where the course's verdicts made the answers
    options: Options | None = None  # the analysis's options (the price a caller gave: nmtkit.analysis.evidence)

    def markdown(self, instructor: bool = False) -> str:
        """The report; the kit's verdicts and the rubric only for instructors (students get the evidence)."""
        if instructor and self.rubric is None:
            raise AnalysisError("an instructor's report needs the course's verdicts: nmtkit.course.instructor.verdicts."
                                "write_instructor_report, or `nmtkit report --instructor` in the instructor's kit")
        # links that survive moving the folder
        def rel(p):
            return os.path.relpath(p, self.out_dir)
        names = ", ".join(r.name for r in self.runs)
        out = [f"# Training report: {names}", "",
               f"Generated {time.strftime('%Y-%m-%d %H:%M')} by `nmtkit report` from the runs' own logs "
               f"(nothing here is taken from the training code). "
               + ("Instructor's copy: verdicts and rubric included. " if instructor else
                  "The evidence only: the verdicts are yours to write. ") + "Runs:", ""]
        for r in self.runs:
            out.append(f"- **{r.name}**: {ending(r.status, r, self.options)}, step {r.last_step}, "
                       f"{r.n_ranks} rank(s), scalars from {r.scalars_source or 'nowhere'}"
                       + (f"; config: {r.config_problem}" if r.config_problem else ""))
        if not self.comparison.empty:
            out += ["", "## Side by side", "", _table(self.comparison)]
        if self.figures:
            out += ["", "## Figures", ""]
            out += [f"![{name}]({rel(p)})" for name, p in self.figures.items()]
        for run in self.runs:
            out += ["", f"## Answers: {run.name}", ""]
            for a in self.answers[run.name]:
                out += [f"### {a.number}. {a.title}", ""]
                if instructor:
                    out += [a.answer if a.answered else f"**Not answered.** {a.answer}", "",
                            f"**Rubric.** {self.rubric[a.number]}", ""]
                elif not a.answered:
                    out += [f"**Cannot be answered from these logs:** {a.missing}.", ""]
                if a.figure is not None:
                    out += [f"![Q{a.number}]({rel(a.figure)})", ""]
                if a.evidence:
                    out += ["<details><summary>evidence</summary>", "", "```json",
                            json.dumps(a.evidence, indent=1, default=_jsonable), "```", "</details>", ""]
        return "\n".join(out) + "\n"


def ending(status: dict, run: Run | None = None, options: Options | None = None) -> str:
    """How a run ended, in words: "stopped by its budget at step 20 of 100000", "finished", ... (run.json); with the
    run, its projection priced by the one price question 1 uses (nmtkit.analysis.evidence.node_price)."""
    state, reason = status.get("status", "unknown"), status.get("reason")
    where = f" at step {status.get('step')} of {status.get('total_steps')}" if state == "stopped" else ""
    why = {"budget": " by its budget", "plateau": " on a plateau of dev BLEU (early stopping)"}.get(
        reason, f" ({reason})" if reason else "")
    proj = status.get("projection") or {}
    pace = ""
    if proj.get("total_hours") is not None:
        pace = f"; projected {proj['total_hours']:.2f} h to train.steps"
        if run is not None:
            price, source = node_price(run, options or Options())
            nodes = proj.get("nodes") or max(len(run.hosts), 1)
            pace += (f", ${proj['total_hours'] * nodes * price:,.2f} at ${price:.2f} per node-hour x {nodes}"
                     if price else f" (no cost: {source})")
    return f"status {state}{why if state == 'stopped' else ''}{where}{pace}"


def _jsonable(x):
    if hasattr(x, "item"):
        return x.item()
    return str(x)


def _table(df: pd.DataFrame) -> str:
    df = tables.readable(df)
    head = "| " + " | ".join(df.columns) + " |"
    sep = "|" + "---|" * len(df.columns)
    rows = ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *rows])


def readable(df: pd.DataFrame) -> pd.DataFrame:
    """A table for people (nmtkit.analysis.tables.readable): each number column in one format, seconds in
    seconds, epoch times as seconds since the first row."""
    return tables.readable(df)


_SUMMARY_UNITS = {  # summary key -> (unit, scale); the rest: unit-less, as they are
    "peak_flops": ("GFLOP/s", 1e-9), "mfu": ("%", 100.0), "wall_time": ("s", 1.0), "test_seconds": ("s", 1.0),
    "avg_step_time": ("s", 1.0), "spent_hours": ("h", 1.0), "tokens_per_sec": ("tokens/s", 1.0),
}


def summary_table(summary: dict) -> pd.DataFrame:
    """A run's summary (nk.train's return, run.json's "summary") for people: a value and a unit column (FLOP/s in
    GFLOP/s, MFU in %, times in s), each number to about 4 significant digits; signatures left out."""
    rows, units = {}, {}
    for k, v in summary.items():
        if k.endswith("_signature"):
            continue
        unit, scale = _SUMMARY_UNITS.get(k, ("", 1.0))
        if isinstance(v, float):
            v = tables.format_numbers([v * scale])[0]
        rows[k], units[k] = (tables.NA if v is None else v), unit
    return pd.DataFrame({"value": pd.Series(rows, dtype=object), "unit": pd.Series(units, dtype=object)})


def comparison(runs: list[Run], answers: dict[str, list[Answer]]) -> pd.DataFrame:
    """One row per run. Quality at each run's last evaluation at or before a step every run reached, with that
    evaluation's step (the runs differ in length and in how often they evaluate: a best BLEU at step 600 beside one
    at step 200 compares nothing)."""
    lasts = [int(r.series("eval_loss")["step"].max()) for r in runs if r.has("eval_loss")]
    common = min(lasts) if lasts else None

    def at(run, tag):  # (value, step) of the run's last evaluation at or before `common`: steps differ by run
        s = run.series(tag)
        s = s[s["step"] <= common] if common is not None else s.iloc[0:0]
        return (float(s["value"].iloc[-1]), int(s["step"].iloc[-1])) if not s.empty else (float("nan"), None)
    rows = []
    for run in runs:
        a = {x.number: x for x in answers[run.name]}
        st = steady_steps(run, Options().skip_steps)
        tok = tokens_per_s(st) if not st.empty and "tokens" in st else float("nan")
        rows.append({
            "run": run.name, "ranks": run.n_ranks, "nodes": max(len(run.hosts), 1),
            "status": run.status.get("status", "unknown"), "steps": run.last_step,
            "elapsed (s)": a[1].evidence.get("elapsed_s", float("nan")),
            "steps/s": a[1].evidence.get("steps_per_s", float("nan")), "tokens/s total": tok * run.n_ranks,
            f"last eval <= step {common}": at(run, "eval_loss")[1],
            "dev BLEU there": at(run, "Eval_BLEU_Score")[0], "eval loss there": at(run, "eval_loss")[0],
        })
    return pd.DataFrame(rows)


def compare(runs) -> pd.DataFrame:
    """comparison() alone, from question 1's evidence: no figures and no checkpoint read (TensorFlow), which are
    most of analyse()'s seconds, for a notebook that only compares runs (03)."""
    loaded = runs if runs and all(isinstance(r, Run) for r in runs) else load_runs(runs)
    return comparison(loaded, {run.name: evidence_all(run, numbers=(1,)) for run in loaded})


def analyse(runs, out_dir: str | Path | None = None, options: Options | None = None, answers=evidence_all,
            rubric: dict[int, str] | None = None) -> Report:
    """Load the runs, draw the overview figures and each question's evidence (figures under out_dir/figures);
    `answers(run, fig_dir, options) -> [Answer]` words them too where the caller has the verdicts (the course)."""
    loaded = runs if runs and all(isinstance(r, Run) for r in runs) else load_runs(runs)
    out_dir = Path(out_dir) if out_dir is not None else loaded[0].path
    fig_dir = out_dir / FIGURES_DIR
    rep = Report(loaded, out_dir, rubric=rubric, options=options)
    warmup = loaded[0].config.train.warmup_steps if loaded[0].config else None
    overview = {  # title -> (file name, drawing)
        "BLEU": ("bleu", lambda p: figures.bleu(loaded, p)),
        "loss": ("loss", lambda p: figures.losses(loaded, p)),
        "learning rate": ("lr", lambda p: figures.learning_rate(loaded, p, warmup)),
        "step time and tokens/s": ("steptime", lambda p: figures.step_time(loaded, p)),
        "utilisation": ("utilisation", lambda p: figures.device_utilisation(loaded, p)),
        "network": ("network", lambda p: figures.network(loaded, p)),
    }
    for title, (slug, draw) in overview.items():
        path = draw(fig_dir / f"overview-{slug}.png")
        if path is not None:
            rep.figures[title] = path
    for run in loaded:
        rep.answers[run.name] = answers(run, fig_dir, options)
    rep.comparison = comparison(loaded, rep.answers)
    return rep


def write_report(runs, out_dir: str | Path | None = None, options: Options | None = None,
                 instructor: bool = False, answers=evidence_all, rubric: dict[int, str] | None = None) -> Path:
    """Write report.md (and report.json, the answers as data) for one or more run directories; returns report.md.
    Both hold the evidence; the verdicts and the rubric only with `instructor`, where the course passes its
    `answers` and `rubric` (nmtkit.course.instructor.verdicts.write_instructor_report)."""
    if isinstance(runs, (str, Path)):
        runs = [runs]
    if not runs:
        raise AnalysisError("no run directories given: pass --run DIR (repeat it to compare runs)")
    return write_files(analyse(list(runs), out_dir, options, answers, rubric), instructor)


def write_files(rep: Report, instructor: bool = False) -> Path:
    """report.md and report.json of an analysed Report, into its out_dir (its figures are there already)."""
    rep.out_dir.mkdir(parents=True, exist_ok=True)
    md = atomic_write_text(rep.out_dir / rundir.REPORT, rep.markdown(instructor))
    data = {name: [{**asdict(a), "figure": str(a.figure) if a.figure else None,
                    **({"rubric": rep.rubric[a.number]} if instructor else {"answer": ""})} for a in answers]
            for name, answers in rep.answers.items()}
    atomic_write_text(rep.out_dir / "report.json", json.dumps(data, indent=1, default=_jsonable) + "\n")
    return md


# --- for notebooks: one-line cells that never crash when a run is missing (display: nmtkit.notebook) -------

NO_RUNS = "(no runs to analyse: run notebooks 02 and 03 first, then rerun this notebook)"


def find_runs(names=("baseline", "horovod"), root: str | Path | None = None) -> list[Path]:
    """The runs under <workspace>/runs that exist; says clearly which are missing and how to make them."""
    ws = rundir.workspace()
    root = Path(root) if root is not None else ws / "runs"
    found = []
    for name in names:
        p = root / name
        rel = os.path.relpath(p, ws)
        if any((p / name).exists() for name in (rundir.STATUS, rundir.SCALARS, rundir.RANKS_DIR)):
            found.append(p)
            print(f"found   {rel}")
        else:
            print(f"MISSING {rel}: " + {"baseline": "run notebook 02 (single-process baseline) first",
                                        "horovod": "run notebook 03 (Horovod on two engines) first"}
                  .get(name, "train a run into this directory first"))
    return found


def evidence(rep: Report | None, number: int) -> pd.DataFrame | str:
    """The numbers behind question `number`: one row per quantity, its unit in the row's name, one column per
    run (nested records flattened to rows; nmtkit.analysis.tables.evidence_table)."""
    if rep is None:
        return NO_RUNS
    return tables.evidence_table({run.name: rep.answers[run.name][number - 1].evidence for run in rep.runs})


def checkpoint_names(rep: Report) -> dict[str, list[str]]:
    """run name -> the files of its latest checkpoint (names only: deterministic for a given run length)."""
    out = {}
    for run in rep.runs:
        ev = rep.answers[run.name][7].evidence
        out[run.name] = [Path(f["file"]).name for f in ev.get("files", [])]
    return out


def listing(run, folder: str = "checkpoints") -> list[str]:
    """The files under `folder` of a run, relative to the run (sorted); for the shipped reference run, whose
    checkpoint data is left out, the files its checkpoints/listing.json recorded when it was frozen."""
    root = Path(getattr(run, "path", run))
    frozen = root / folder / "listing.json"
    if frozen.is_file() and not any(p.suffix == ".index" for p in (root / folder).iterdir()):
        return sorted(f for f, _ in json.loads(frozen.read_text())["files"])
    return sorted(str(p.relative_to(root)) for p in (root / folder).rglob("*") if p.is_file())
