"""Notebook 04 teaches the sampling interval (issue 71, item 1): a sample of length Delta holds at most one burst's
bytes, so a busiest sample is a ceiling 8B/Delta, never evidence of the link's rate or of a CPU bound. The relation
is displayed, it holds on the shipped unshaped run's own samples, and no paragraph argues a CPU bound from a peak."""
from __future__ import annotations

import re

import nbformat

from nmtkit.analysis.lab import lab_runs, link_samples
from nmtkit.course.student import NOTEBOOKS_DIR

NB04 = NOTEBOOKS_DIR / "04_bottleneck_lab.ipynb"


def paragraphs() -> list[str]:
    cells = nbformat.read(NB04, as_version=4).cells
    return [p.replace("\n", " ") for c in cells if c.cell_type == "markdown" for p in c.source.split("\n\n")]


def test_the_relation_is_displayed_under_the_allreduce_heading():
    cells = nbformat.read(NB04, as_version=4).cells
    at = next(i for i, c in enumerate(cells) if c.source.startswith("### A link's rate is not the allreduce's"))
    assert re.search(r"\$\$\s*r_\{\\text\{sample\}\}\s*\\le\s*\\frac\{8\\,B_\{\\text\{burst\}\}\}\{\\Delta\}",
                     cells[at].source)
    # the check right after the table: a code cell that reads the busiest sample's own length
    check = next(c for c in cells[at + 1:] if c.cell_type == "code" and "length_s" in c.source)
    assert "busiest sample" in "".join(o.get("text", "") for o in check.outputs)


def test_no_paragraph_argues_a_cpu_bound_from_a_peak_sample():
    bad = [p for p in paragraphs() if re.search(r"busiest|peak sample", p, re.I) and re.search(r"\bCPU", p)
           and not re.search(r"no evidence|cannot|not\b", p)]
    assert not bad, bad


def test_on_the_unshaped_run_every_sample_holds_at_most_one_steps_bytes():
    lab = lab_runs(None)
    fastest = lab[lab.exchange_s.notna()].link_mbit_s.idxmax()
    s = link_samples(fastest)
    s["length_s"] = s.groupby("host").t_s.diff()
    held = (s.mbit_s * 1e6 / 8 * s.length_s).dropna()
    per_step = s.attrs["bytes_per_step"]
    assert held.max() <= 1.02 * per_step                      # one burst at most: steps are samples apart
    assert held.max() >= 0.98 * per_step                      # and the busiest holds a whole step's exchange
    ceiling = per_step * 8 / s.attrs["interval_s"] / 1e6
    # the busiest sample passes the nominal ceiling only by its shorter length, not by more bytes
    top = s.loc[s.mbit_s.idxmax()]
    assert top.mbit_s > ceiling and top.length_s < s.attrs["interval_s"]
    assert top.mbit_s <= 1.02 * per_step * 8 / top.length_s / 1e6
