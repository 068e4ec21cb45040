"""Question 4's decision (the instructor's kit) counts what the training log and runs.json count."""
from __future__ import annotations

import pytest


def test_the_log_lines_mfu_runs_json_and_q4_are_one_count(trained_run):
    """Every MFU the kit shows is nmtkit.model.flops over named steps: each log line's (the mfu scalar) over its
    window of rank-log records, run.json's over the steps it names, and question 4's derivation (within 1%)."""
    from nmtkit.analysis import load_run
    from nmtkit.analysis.evidence import Options
    from nmtkit.course.instructor.decisions import q4
    from nmtkit.course.instructor.mfu import steady_mfu
    run_dir, _ = trained_run
    run = load_run(run_dir)
    s, every = run.status["summary"], run.config.train.log_every
    recs = run.ranks.to_dict("records")
    assert {"src_tokens", "tgt_tokens", "src_len", "tgt_len"} <= set(recs[0])
    assert all(r["tokens"] == r["src_tokens"] + r["tgt_tokens"] for r in recs)
    model, vocab, peak = run.config.model, s["vocab_size"], s["peak_flops"]
    lines = run.series("mfu")
    assert len(lines) >= 10
    for step, mfu in zip(lines["step"], lines["value"]):
        window = [r for r in recs if step - every < r["step"] <= step]
        assert mfu == pytest.approx(steady_mfu(window, model, vocab, peak), rel=1e-6), step
    named = [r for r in recs if s["mfu_first_step"] <= r["step"] <= s["mfu_last_step"]]
    assert (s["mfu_first_step"], s["mfu_last_step"]) == (4, 400)
    assert s["mfu"] == pytest.approx(steady_mfu(named, model, vocab, peak), rel=1e-6)
    assert q4(run, Options())["mfu"] == pytest.approx(s["mfu"], rel=0.01)
