"""Notebook 04 teaches the sampling interval (issue 71, item 1): a sample of length Delta holds at most one burst's
bytes, so a busiest sample is a ceiling 8B/Delta, never evidence of the link's rate or of a CPU bound. The relation
is displayed, it holds on the shipped unshaped run's own samples, and no paragraph argues a CPU bound from a peak."""
from __future__ import annotations

import re

import nbformat
import pytest

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
    # after the exercise: a code cell that prints the student's two figures beside the busiest sample's own length
    check = next(c for c in cells[at + 1:] if c.cell_type == "code" and "length_s" in c.source and "print" in c.source)
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


def test_the_ceiling_exercise_passes_the_right_figures_and_refuses_the_trap(capsys):
    """04-ceiling: the ceiling 8B/Delta and the busiest sample's bytes in B, on the shipped lab's fastest link. The
    trap the exercise teaches is refused: the busiest sample's bytes taken over the nominal interval, not its own
    length (about 5% more than it holds)."""
    from nmtkit.course import practice
    from nmtkit.errors import ExerciseError
    lab = lab_runs()
    fastest = lab.link_mbit_s.idxmax()
    row = lab.loc[fastest]
    b = 2 * (row.ranks - 1) / row.ranks * row.params * row.bytes_per_value
    s = link_samples(fastest)
    top = s.mbit_s.idxmax()
    own = s.groupby("host").t_s.diff()[top]
    ceiling, held = b * 8 / s.attrs["interval_s"] / 1e6, s.mbit_s[top] * 1e6 / 8 * own / b
    practice.check_sample_ceiling(lab, ceiling_mbit_s=ceiling, held_over_b=held)
    assert "✓" in capsys.readouterr().out
    nominal = s.mbit_s[top] * 1e6 / 8 * s.attrs["interval_s"] / b
    assert abs(nominal / held - 1) > 0.02
    for wrong in ({"ceiling_mbit_s": ceiling / 8, "held_over_b": held},   # bytes, not bits
                  {"ceiling_mbit_s": ceiling, "held_over_b": nominal}):
        with pytest.raises(ExerciseError):
            practice.check_sample_ceiling(lab, **wrong)
    cells = nbformat.read(NB04, as_version=4).cells
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in cells]
    at = ids.index("04-ceiling-check")
    assert ids[at - 1] == "04-ceiling-work" and "nk.check_sample_ceiling(lab," in cells[at].source


def test_the_ceiling_check_reads_the_runs_the_table_was_read_from(monkeypatch, capsys):
    """The grader checks a graded variant's figures in a process whose own variant may be another: the check reads
    the fastest run from the table's own paths, not by name."""
    from nmtkit.analysis import variants
    from nmtkit.course import practice
    graded = variants.graded()[0]
    monkeypatch.setenv("NMTKIT_VARIANT", graded)
    lab = lab_runs()
    fastest = lab.link_mbit_s.idxmax()
    b = (2 * (lab.ranks - 1) / lab.ranks * lab.params * lab.bytes_per_value)[fastest]
    s = link_samples(fastest)
    top = s.mbit_s.idxmax()
    held = s.mbit_s[top] * 1e6 / 8 * s.groupby("host").t_s.diff()[top] / b
    monkeypatch.setenv("NMTKIT_VARIANT", variants.PRACTICE)
    assert abs(held / (link_samples(fastest).mbit_s.max() * 1e6 / 8 * 0.1 / b) - 1) > 1e-6  # the variants differ
    practice.check_sample_ceiling(lab, ceiling_mbit_s=b * 8 / s.attrs["interval_s"] / 1e6, held_over_b=held)
    assert "✓" in capsys.readouterr().out
