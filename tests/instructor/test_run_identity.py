"""Issue #68, Deliver 1: a graded figure carries the identity of the runs it was computed from (the kit's reader's
record: file -> sha256, nmtkit.analysis.logs.digests), and the grader scores it only if its own copy of those runs
holds exactly those files. No kernel: the recorder and the decoder, on a workspace run."""
from __future__ import annotations

import json
import shutil

import pytest

from nmtkit.analysis import variants
from nmtkit.analysis.logs import digests, load_run
from nmtkit.analysis.reference import reference_run
from nmtkit.course import figures
from nmtkit.course.instructor import scoring
from nmtkit.course.instructor.pinning import Pin

Q10 = scoring.Call("05-q10-check", "check", {"question": "q10"}, {"rep": "rep", "run": "run"})


@pytest.fixture
def workspace(tmp_path):
    """A workspace holding the reference run, as the notebook sees it (`seen`) and as the grader holds it."""
    seen, held = tmp_path / "seen", tmp_path / "held"
    for ws in (seen, held):
        shutil.copytree(reference_run(), ws / "runs" / "horovod")
    return seen, held


def recorded(run_dir, tmp_path, monkeypatch) -> dict:
    """The figures file the recorder writes for `run=load_run(run_dir)`, as the grader reads it back."""
    monkeypatch.setenv(figures.DIR_ENV, str(tmp_path / "figures"))
    run = load_run(run_dir)
    path = figures.record(Q10.grade_id, "check", {"run": lambda: run, "rep": lambda: run})
    return json.loads(path.read_text())["args"]


def test_the_reader_records_each_file_it_read_and_the_figure_carries_it(workspace, tmp_path, monkeypatch):
    seen, _ = workspace
    run = load_run(seen / "runs" / "horovod")
    assert {"config.json", "run.json", "scalars.jsonl"} <= set(run.files) and any(
        f.startswith("ranks/") for f in run.files) and run.files == digests(run.path)
    args = recorded(seen / "runs" / "horovod", tmp_path, monkeypatch)
    assert args["run"]["files"] == run.files and len(next(iter(run.files.values()))) == 64


def test_a_figure_scores_only_on_the_files_the_grader_holds(workspace, tmp_path, monkeypatch):
    seen, held = workspace
    args = recorded(seen / "runs" / "horovod", tmp_path, monkeypatch)
    pin, decode = Pin(variants.graded()[0], held), figures.Decoder({str(seen): held})
    assert pin.problem(Q10, {k: decode(v) for k, v in args.items()}) is None
    (held / "runs" / "horovod" / "scalars.jsonl").write_text("")  # the handed-in run is not the one read
    why = pin.problem(Q10, {k: decode(v) for k, v in args.items()})
    assert "its files differ from the grader's copy (scalars.jsonl" in why, why
    forged = {k: {kk: vv for kk, vv in v.items() if kk != "files"} for k, v in args.items()}  # typed, no record
    why = pin.problem(Q10, {k: decode(v) for k, v in forged.items()})
    assert "no record of the files it was read from" in why, why


def test_a_lab_table_carries_each_runs_files(tmp_path, monkeypatch):
    from nmtkit.analysis.lab import lab_runs
    own = variants.graded()[0]
    monkeypatch.setenv(variants.ENV_VARIANT, own)
    table = lab_runs()
    assert len(table.attrs["files"]) == len(table.attrs["paths"]) > 1
    enc = json.loads(json.dumps(figures.encode(table)))
    assert enc["attrs"]["files"] == table.attrs["files"]
    kit = str(variants.ROOT.parent)
    frame = figures.Decoder({kit: kit})(enc)
    call = scoring.Call("04-lab1-check", "check", {"question": "lab_predict"}, {"rep": "lab"})
    assert Pin(own, tmp_path).problem(call, {"rep": frame}) is None
    frame.attrs["files"][0] = {**frame.attrs["files"][0], "run.json": "0" * 64}
    assert "its files differ" in Pin(own, tmp_path).problem(call, {"rep": frame})


def test_a_shipped_run_is_accepted_as_this_kit_holds_it_or_as_the_release_ships_it(tmp_path):
    """The students' image holds the release's copy of each shipped run (run.json, scalars and manifest reduced,
    nmtkit.course.instructor.release): a figure read there carries those files' checksums."""
    from nmtkit.course.instructor.pinning import changed, released
    own = variants.graded()[0]
    run = variants.run_dir(variants.info(own)["reference"], own)
    raw, shipped = digests(run), released(run)
    assert set(raw) == set(shipped) and {f for f in raw if raw[f] != shipped[f]} >= {"run.json", "manifest.json"}
    assert changed(raw, run, shipped=True) is None and changed(shipped, run, shipped=True) is None
    assert "differ" in changed(shipped, run, shipped=False)  # a workspace run: only as the grader holds it
    mixed = {**shipped, "run.json": raw["run.json"]}
    assert "its files differ from the grader's copy (run.json)" in changed(mixed, run, shipped=True)
