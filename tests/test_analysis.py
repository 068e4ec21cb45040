"""Analysis on synthetic run directories whose properties are known by construction.

Each synthetic run is written in the run-dir layout of nmtkit/runs.py: scalars.jsonl, ranks/rank<R>.jsonl,
monitor/<host>-rank<R>.jsonl, config.json, data_stats.json, run.json and a real (small) TF checkpoint.
Then every question's answer is checked against the numbers the logs were built from.
"""
import json

import numpy as np
import pytest
from synthruns import synth_run

import nmtkit  # noqa: F401
from nmtkit import runs
from nmtkit.analysis import bleu, load_run
from nmtkit.analysis.logs import load_scalars, variable_kind
from nmtkit.errors import AnalysisError


def test_step_time_figure_keeps_the_steady_steps_in_view(tmp_path):
    from matplotlib.figure import Figure

    from nmtkit.analysis.figures import _clip_outliers
    ax = Figure().subplots()
    y = np.r_[np.full(200, 145.0), 10_000.0, 26_000.0]
    ax.plot(np.arange(len(y)), y, ".")
    _clip_outliers(ax)
    assert ax.get_ylim()[1] <= 3 * np.percentile(y, 90) + 1e-9
    assert any("2 steps above" in t.get_label() for t in ax.get_lines())


def test_empty_foreign_and_missing_dirs_are_clear_errors(tmp_path):
    with pytest.raises(AnalysisError, match="no such directory"):
        load_run(tmp_path / "nope")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("hello")
    with pytest.raises(AnalysisError, match="does not look like an nmtkit run directory"):
        load_run(tmp_path / "foreign")
    (tmp_path / "started" / "ranks").mkdir(parents=True)
    with pytest.raises(AnalysisError, match="no logs yet"):
        load_run(tmp_path / "started")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / runs.SCALARS).write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(AnalysisError, match=r"scalars.jsonl: line 2"):
        load_run(tmp_path / "bad")


def test_event_files_are_the_fallback(tmp_path):
    from nmtkit.keras2 import import_tf
    tf = import_tf()
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        for s in range(1, 26):  # more than the 10 events per tag EventAccumulator keeps by default
            tf.summary.scalar("train_loss", 10.0 / s, step=s)
    writer.close()
    (tmp_path / "monitor" / "tb").mkdir(parents=True)  # the sampler's own events are not training scalars
    df, source = load_scalars(tmp_path)
    assert source == "event files"
    loss = df[df["tag"] == "train_loss"].sort_values("step")
    assert len(loss) == 25 and loss["value"].iloc[-1] == pytest.approx(0.4)


def test_variable_kinds():
    assert variable_kind("optimizer/_variables/3/.ATTRIBUTES/VARIABLE_VALUE") == "optimizer"
    assert variable_kind("model/x/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE") == "optimizer"
    assert variable_kind("model/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE") == "weights"
    assert variable_kind("save_counter/.ATTRIBUTES/VARIABLE_VALUE") == "meta"


def test_report_side_by_side_and_cli(tmp_path, checkpoint_dir, capsys):
    ckpt, _ = checkpoint_dir
    synth_run(tmp_path / "baseline", ckpt=ckpt)
    synth_run(tmp_path / "horovod", ranks=2, hosts=("hostA", "hostB"), ckpt=ckpt)
    from nmtkit.cli import main
    assert main(["report", "--run", str(tmp_path / "baseline"), "--run", str(tmp_path / "horovod"),
                 "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    for n in range(1, 12):
        assert md.count(f"### {n}. ") == 2  # each question answered for both runs
    assert "## Side by side" in md and "| baseline | 1 | 1 |" in md and "| horovod | 2 | 2 |" in md
    for link in __import__("re").findall(r"!\[[^]]*\]\(([^)]+)\)", md):
        assert (tmp_path / "rep" / link).exists(), link
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert [a["number"] for a in data["horovod"]] == list(range(1, 12))
    assert main(["report", "--run", str(tmp_path / "nothing")]) == 1
    assert "nmtkit: " in capsys.readouterr().err


def test_bleu_bootstrap_from_sentence_statistics_equals_corpus_bleu_on_each_resample():
    import numpy as np
    import sacrebleu

    from nmtkit.analysis import reference_run
    run = load_run(reference_run())
    d = run.path / "translations"
    hyp = (d / "dev.480.de").read_text().splitlines()
    ref = (d / "dev.ref.de").read_text().splitlines()
    rng = np.random.default_rng(0)
    naive = [sacrebleu.corpus_bleu([hyp[i] for i in idx], [[ref[i] for i in idx]]).score
             for idx in rng.integers(0, len(ref), size=(20, len(ref)))]
    assert bleu._bootstrap(run, 20, 0)["bleu_bootstrap_std"] == pytest.approx(np.std(naive, ddof=1), rel=1e-9)
