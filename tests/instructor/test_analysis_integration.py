"""The report from real tiny runs: a single-process baseline and a 2-rank Horovod run on two local engines.

Both train a few dozen steps with the sampler on; then `nmtkit report` must answer from the real files:
checkpoint layout and weights/optimizer split, the data stats, step times, CPU utilisation, and for the 2-rank
run the network question against the ring-allreduce estimate.
"""
import importlib.util
import json
import re

import pytest

from nmtkit import runs
from nmtkit.analysis import load_run, write_report
from nmtkit.analysis.evidence import Options
from nmtkit.course.instructor.book import answer_all

from conftest import small_config

pytestmark = [pytest.mark.long, pytest.mark.slow]  # the long tier (tests/conftest.py): make test leaves it out

SHORT = {"train.steps": 24, "train.warmup_steps": 8, "train.log_every": 4, "train.ckpt_every": 12,
         "eval.every": 6, "eval.dev_sentences": 8, "eval.test_sentences": 8, "eval.beam_size": 1,
         "eval.max_extra_len": 4, "monitor.enabled": True, "monitor.interval": 0.25}


@pytest.fixture(scope="module")
def baseline(nmt_data, tmp_path_factory):
    from nmtkit.training.loop import train
    run = tmp_path_factory.mktemp("analysis_runs") / "baseline"
    summary = train(small_config(**SHORT), run, data_dir=nmt_data, progress=False)
    assert summary["status"] == "finished"
    return run, summary


def test_report_on_a_real_baseline_run(baseline, tmp_path):
    run, summary = baseline
    a = {x.number: x for x in answer_all(load_run(run), tmp_path, Options(skip_steps=2))}
    unanswered = {n: x.missing for n, x in a.items() if not x.answered}
    assert set(unanswered) <= {11}, unanswered  # 11 may lack overlapping samples on a fast CPU run
    assert a[1].evidence["step"] == 24 and a[1].evidence["status"] == "finished"
    assert a[2].evidence["evaluations"] == 4  # evaluations at 6, 12, 18 and the final one at 24
    assert a[6].evidence["peak_step"] == 8  # the configured warmup (a logged step), read off the curve
    assert a[6].evidence["peak_lr"] == pytest.approx(a[6].evidence["predicted_peak_lr"], rel=1e-3)
    stats = json.loads((run / runs.DATA_STATS).read_text())
    assert a[7].evidence["lines"] == stats["files"]["train.en"]["lines"]
    assert a[7].evidence["bytes"] == stats["files"]["train.en"]["bytes"] + stats["files"]["train.de"]["bytes"]
    assert sorted(f["file"].split("/")[-1] for f in a[8].evidence["files"]) == \
        ["checkpoint", "ckpt-24.data-00000-of-00001", "ckpt-24.index"]
    assert a[9].evidence["weights_params"] == summary["params"]
    assert a[9].evidence["optimizer_to_weights"] == pytest.approx(2.0, abs=0.01)
    assert a[4].evidence["fully_utilised"] is None  # no GPU here: CPU utilisation instead
    assert a[4].evidence["devices"][0]["device"] == "cpu"
    assert a[5].answer.startswith("No: this is a single-rank run")
    assert 0 < a[10].evidence["mean_ms"] < 10_000
    md = write_report([run], tmp_path / "report")
    assert md.read_text().count("### ") == 11


@pytest.mark.skipif(not importlib.util.find_spec("horovod"), reason="Horovod is not installed")
def test_report_compares_baseline_and_two_ranks(baseline, nmt_data, tmp_path_factory, tmp_path):
    from nmtkit.cluster import Cluster
    base, _ = baseline
    run = tmp_path_factory.mktemp("analysis_runs") / "horovod"
    cfg = small_config(**SHORT).with_overrides({"data.dir": str(nmt_data)})
    with Cluster(engines=2, profile_dir=tmp_path_factory.mktemp("ipython") / "profile_nmtkit").start() as cluster:
        results = cluster.launch(cfg, run, data_dir=nmt_data, preflight=False).wait(timeout=300)
    assert [r.value["status"] for r in results] == ["finished", "finished"]
    h = load_run(run)
    assert h.n_ranks == 2 and sorted(h.monitor["rank"].unique()) == [0, 1]
    a = {x.number: x for x in answer_all(h, tmp_path, Options(skip_steps=2))}
    assert a[5].answered, a[5].missing
    ev = a[5].evidence
    assert ev["ranks"] == 2 and ev["params"] == results[0].value["params"]
    assert ev["allreduce_bytes_per_rank_per_step"] == pytest.approx(ev["params"] * 4)  # 2(n-1)/n = 1 for n = 2
    assert ev["iface"]  # the interface the ranks talked over was found in the samples
    if len(h.hosts) > 1:  # local engines posing as nodes (cluster.logical_hosts): their ring ran over loopback
        assert ev["iface"] == "lo", (h.hosts, ev["iface_choice"])
    md = write_report([base, run], tmp_path / "report").read_text()
    assert md.count("### 5. ") == 2 and "| horovod | 2 |" in md
    # notebook 05's last cell: the analysis written where it was drawn, as it is (not analysed again), says the same
    import nmtkit as nk
    analysed = nk.analyse([base, run], tmp_path / "again-dir")  # a name no prose holds ("against")
    stamp = re.compile(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d")  # two writes can fall either side of a minute
    again = analysed.write().read_text().replace("again-dir", "report")
    assert stamp.sub("Generated <when>", again) == stamp.sub("Generated <when>", md)
    # notebook 03's table: the comparison before anything else is asked is the same, without a figure drawn
    import pandas as pd
    fresh = nk.analyse([base, run], tmp_path / "fresh")
    table = fresh.comparison()
    assert fresh._report is None and not (tmp_path / "fresh").exists()  # built on first need: not yet
    assert table["ranks"].tolist() == [1, 2] and [r.name for r in fresh.runs] == ["baseline", "horovod"]
    pd.testing.assert_frame_equal(table, analysed.comparison())
    assert fresh.write() is not None and fresh._report is not None  # the rest when asked


def test_a_verdict_shows_the_figure_the_report_drew_without_drawing_it_again(baseline, tmp_path, monkeypatch):
    """Notebook 05's instructor cells: rep.verdict(n) states the course's verdict per run with the figure the
    report drew for that question (drawing it again cost 0.3-0.8 s a cell)."""
    from nmtkit import notebook as nb
    from nmtkit.course.instructor.book import answer
    run, _ = baseline
    rep = nb.analyse([run], tmp_path / "report")
    drawn = rep.report.answers[run.name][1].figure  # question 2's plateau figure
    assert drawn is not None and drawn.is_file()
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "report").rglob("*.png")}
    shown = []
    monkeypatch.setattr(nb, "display", shown.append)
    rep.verdict(2)
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "report").rglob("*.png")} == before  # nothing redrawn
    kinds = [type(x).__name__ for x in shown]
    assert kinds == ["Markdown", "Image", "Markdown"], kinds  # the verdict, its figure, the rubric
    assert shown[1].filename == str(drawn)
    assert shown[0].data.endswith(answer(load_run(run), 2).answer)  # the course's verdict, as answer() words it
