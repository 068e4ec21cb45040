"""Notebooks 04 and 05's closing summaries and Q4's memory readings (nmtkit.course.summaries), and the comparison
table naming the step each run's quality comes from (issue 71: "dev BLEU at step 100" held steps 75, 100, 80)."""
from __future__ import annotations

import re
from types import SimpleNamespace

import nbformat
import pandas as pd
import pytest
from synthruns import synth_run

from nmtkit import config
from nmtkit.analysis import report
from nmtkit.analysis.lab import lab_runs
from nmtkit.course import summaries
from nmtkit.course.student import NOTEBOOKS_DIR
from nmtkit.errors import CourseError
from nmtkit.model import memory


@pytest.fixture(scope="module")
def lab():
    return lab_runs(None)


def headings(name: str) -> set[str]:
    cells = nbformat.read(NOTEBOOKS_DIR / name, as_version=4).cells
    return {line.lstrip("#").strip() for c in cells if c.cell_type == "markdown"
            for line in c.source.splitlines() if line.startswith("#")}


def test_the_lab_summary_words_the_tables_own_figures_and_names_real_sections(lab):
    text = summaries.lab_summary(lab)
    bullets = text.splitlines()
    assert 3 <= len(bullets) <= 5 and all(b.startswith("- ") for b in bullets)
    same = lab[(lab.ranks == lab.ranks.max()) & (lab.compression == "none")].sort_values("link_mbit_s")
    fast, slow = same.iloc[-1], same.iloc[0]
    ring = 2 * (fast.ranks - 1) / fast.ranks * fast.params * fast.bytes_per_value
    for figure in (f"{slow.step_s:.2f} s", f"{fast.step_s:.2f} s", f"{ring * 8 / fast.exchange_s / 1e6:,.0f} Mbit/s",
                   f"{fast.link_peak_mbit_s:,.0f} Mbit/s", f"{ring * 8 / 0.1 / 1e6:,.0f} Mbit/s",
                   f"{fast.cpu_percent:.0f}%", f"{slow.cpu_percent:.0f}%"):
        assert figure in text, figure
    # each bullet names a heading of notebook 04 (its first parenthesis), so a renamed section fails here
    named = [re.search(r"\(([^;)]+\)?[^;)]*)[;)]", b).group(1) for b in bullets]
    have = headings("04_bottleneck_lab.ipynb")
    assert all(any(n.strip() in h or h in n for h in have) for n in named if n != "the same heading"), (named, have)


def test_the_lab_summary_refuses_a_table_that_is_not_the_labs(lab):
    with pytest.raises(CourseError, match="lacks"):
        summaries.lab_summary(lab.drop(columns=["exchange_s"]))
    with pytest.raises(CourseError, match="two runs"):
        summaries.lab_summary(lab[lab.ranks == 1])


def test_the_monitoring_summary_says_what_is_not_computed_and_words_what_is():
    run = SimpleNamespace(name="horovod", n_ranks=2)
    ref = SimpleNamespace(name="rehearsal-200mbit", status={"link_measured_mbit_s": 191.8})
    empty = summaries.monitoring_summary(run, ref)
    assert empty.count("(not computed)") == 5 and len(empty.splitlines()) == 4
    text = summaries.monitoring_summary(run, ref, step_s=0.2286, hours_to_target=19.05, mfu=0.0123,
                                        measured_over_bound=1.005, link_share=0.532)
    assert "(not computed)" not in text
    for figure in ("229 ms", "19.1 h", "1.2%", "1.005", "53%", "191.8 Mbit/s"):
        assert figure in text, figure
    for question in ("(Q1)", "(Q4)", "(Q5)", "(Q11)"):
        assert question in text


def test_memory_readings_follow_the_batch_and_precision_and_the_kits_projection():
    table = summaries.memory_readings(16160)
    gib = table.projected_gib
    assert (table.share_of_card == gib * 2 ** 30 / (16160 * 2 ** 20)).all()
    # the kit's planner on the same card agrees: one micro-batch exactly where the reading leaves its margin free
    cfg = config.profile("wmt16-base")
    for (batch, precision), share in table.share_of_card.items():
        cfg.data.batch_sentences = batch
        whole = memory.fit(cfg, cfg.data.vocab_size, 16160 * 2 ** 20, precision).count == 1
        assert whole == (share <= 1 - memory.MARGIN), (batch, precision, share)
    assert not table.share_of_card.between(1 - memory.MARGIN, 1).any()  # no row on the edge: the check decides
    assert (table.share_of_card <= 1 - memory.MARGIN).any() and (table.share_of_card > 1).any()  # both kinds
    for precision in ("float32", "mixed_float16"):
        assert gib[(32, precision)] < gib[(128, precision)] < gib[(256, precision)]
    assert (gib.xs("mixed_float16", level=1) < gib.xs("float32", level=1)).all()
    with pytest.raises(CourseError, match="device_mib"):
        summaries.memory_readings(0)


def test_the_comparison_names_the_step_each_runs_quality_comes_from(tmp_path):
    synth_run(tmp_path / "a", steps=100, eval_every=30)   # evaluates at 30, 60, 90
    synth_run(tmp_path / "b", steps=100, eval_every=40)   # at 40, 80: the step both reached is 80
    table = report.compare([tmp_path / "a", tmp_path / "b"])
    assert list(table["last eval <= step 80"]) == [60, 80]
    a = report.load_runs([tmp_path / "a"])[0]
    bleu = a.series("Eval_BLEU_Score")
    assert table["dev BLEU there"].iloc[0] == pytest.approx(float(bleu[bleu.step == 60].value.iloc[0]))
    assert not [c for c in table.columns if re.fullmatch(r"dev BLEU at step \d+", c)]
    assert isinstance(table, pd.DataFrame)
