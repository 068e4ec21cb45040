"""The frozen reference run shipped in the package (nmtkit/reference/, made by tools.rehearsal.reference): small,
from 2 hosts x 2 ranks over a shaped and measured link, and analysed the same way every time without TensorFlow."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import nmtkit  # noqa: F401
from nmtkit.analysis import load_run, reference_run
from nmtkit.analysis.logs import Run, checkpoint_info
from nmtkit.analysis.machines import link_iface
from nmtkit.analysis.reference import FORBIDDEN, manifest
from nmtkit.errors import AnalysisError, NmtkitError
from nmtkit.files import sha256_file

ROOT = Path(__file__).resolve().parents[2]
REF = reference_run()

# Analyse the reference run in a fresh process and print every answer as JSON (figures too, into argv[1]).
ANALYSE = """
import json, sys
from nmtkit.analysis import analyse, reference_run
from nmtkit.course.instructor.book import answer_all, rubric_by_number
rep = analyse([reference_run()], out_dir=sys.argv[1], answers=answer_all, rubric=rubric_by_number())  # the instructor's
assert "tensorflow" not in sys.modules, "the analysis imported TensorFlow"
answers = [{"number": a.number, "answered": a.answered, "answer": a.answer, "missing": a.missing,
            "evidence": a.evidence, "figure": a.figure and a.figure.name} for a in rep.answers[rep.runs[0].name]]
print(json.dumps({"answers": answers, "comparison": rep.comparison.to_dict("records")}, sort_keys=True, default=str))
"""


def analyse_in_process(fig_dir: Path, hash_seed: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED=hash_seed)
    out = subprocess.run([sys.executable, "-c", ANALYSE, str(fig_dir)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """Two analyses in two processes with different hash seeds (set and dict iteration orders differ)."""
    before = sorted(str(p) for p in REF.rglob("*"))
    a = analyse_in_process(tmp_path_factory.mktemp("report1"), "1")
    b = analyse_in_process(tmp_path_factory.mktemp("report2"), "2")
    assert sorted(str(p) for p in REF.rglob("*")) == before, "the analysis wrote into the shipped directory"
    return a, b


def test_under_2_mb_and_manifest_matches_the_files():
    files = [p for p in REF.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    assert total < 2_000_000, f"{total:,} B"
    listed = manifest()["files"]
    assert set(listed) == {str(p.relative_to(REF)) for p in files} - {"manifest.json"}
    for name, rec in listed.items():
        assert (REF / name).stat().st_size == rec["bytes"] and sha256_file(REF / name) == rec["sha256"], name


def test_no_paths_of_the_making_machine():
    for p in REF.rglob("*"):
        if p.is_file():
            text = p.read_text(encoding="utf-8")
            assert not [f for f in FORBIDDEN if f in text], p.relative_to(REF)


def test_two_hosts_two_ranks_each():
    run = load_run(REF)
    assert run.n_ranks == 4 and run.status.get("ranks") == 4
    per_host = run.ranks.groupby("host")["rank"].unique()
    assert len(per_host) == 2 and sorted(len(r) for r in per_host) == [2, 2]
    assert sorted(run.monitor["host"].unique()) == sorted(per_host.index), "a monitor log per host"
    m = manifest()
    assert sorted(m["hosts"]) == sorted(per_host.index)
    assert {(r["rank"], r["host"]) for r in m["ranks"]} == {(int(r), h) for h, rs in per_host.items() for r in rs}


def test_link_was_shaped_and_measured():
    m, status = manifest(), load_run(REF).status
    assert m["tc_rate"] == "200mbit"
    assert [x["tc_rate"] for x in m["link_between_namespaces"]] == ["200mbit"]
    assert 170 <= m["link_between_namespaces"][0]["measured_mbit_s"] <= 210
    # preflight's transfer between an engine on each host, recorded in run.json where question 5 reads it
    assert 170 <= status["link_measured_mbit_s"] <= 210
    assert status["link_measured"]["from"] != status["link_measured"]["to"]
    assert all(m["checks"].values()), m["checks"]


def test_checkpoint_listing_stands_in_for_the_checkpoint():
    assert not list((REF / "checkpoints").glob("*.index")), "the checkpoint data is not shipped"
    info = checkpoint_info(REF)
    assert info.prefix is not None and info.files and info.total_bytes > 0
    assert info.weights_params == load_run(REF).status["params"]
    assert info.optimizer_params >= 2 * info.weights_params  # Adam's m and v


def test_q5_reports_measured_bytes_per_step_and_a_measured_link(answers):
    q = {a["number"]: a for a in answers[0]["answers"]}
    q5 = q[5]
    assert q5["answered"], q5["missing"]
    ev = q5["evidence"]
    assert ev["iface"] == "nmt0", ev["iface_choice"]
    assert ev["link_source"].startswith("measured by preflight"), ev["link_source"]
    assert abs(ev["link_gbps"] - 0.2) <= 0.03
    assert len(ev["hosts"]) == 2
    for h in ev["hosts"]:  # the gradients crossed the link: within 25% of the ring model, as the rehearsal checks
        assert 0.75 <= h["bytes_per_step"] / h["expected_bytes_per_step"] <= 1.25, h
        assert f"{h['bytes_per_step'] / 1e6:.2f} MB" in q5["answer"]
    assert "measured by preflight" in q5["answer"]
    # the monitor's 1 s samples agree with the rehearsal's own 0.1 s counters of the same link (manifest)
    counters = manifest()["bytes_per_step_by_counters"]["tx_bytes_per_step_per_host"]
    for h, c in zip(sorted(ev["hosts"], key=lambda h: h["host"]), counters):
        assert abs(h["bytes_per_step"] / c - 1) <= 0.05, (h, c)
        assert h["bytes_per_step_source"].startswith("the nmt0 counters"), h


def test_every_question_answered_and_network_from_the_data_link(answers):
    q = {a["number"]: a for a in answers[0]["answers"]}
    assert [n for n, a in q.items() if not a["answered"]] == [], {n: a["missing"] for n, a in q.items()}
    assert q[11]["evidence"]["iface"] == "nmt0"
    assert q[11]["evidence"]["pairs"] >= 5
    assert {d["host"] for d in q[4]["evidence"]["devices"]} == set(load_run(REF).hosts)


def test_two_analyses_are_identical(answers):
    a, b = answers
    assert len(a["answers"]) == 11 and len(a["comparison"]) == 1
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_missing_reference_is_a_kit_error(monkeypatch, tmp_path):
    from nmtkit.analysis import reference, variants
    monkeypatch.setattr(variants, "ROOT", tmp_path)  # an install without its package data: no variant, no runs
    monkeypatch.delenv(variants.ENV_VARIANT, raising=False)
    with pytest.raises(AnalysisError, match="not installed") as e:
        reference.reference_run()
    assert isinstance(e.value, NmtkitError)


def _run(hosts: list[str], link_Bps: float) -> tuple[Run, pd.DataFrame]:
    """Two ranks a host, two samples each: loopback carries 18 MB/s (the ring edge between a host's ranks, or all
    of them on one machine), nmt0 `link_Bps`."""
    ranks = pd.DataFrame({"rank": range(2 * len(hosts)), "host": [h for h in hosts for _ in (0, 1)],
                          "step": 1, "wall_time": 1.0})
    mon = pd.DataFrame([{"time": t, "host": h, "rank": 2 * i, "net_lo_sent_Bps": 9e6, "net_lo_recv_Bps": 9e6,
                         "net_nmt0_sent_Bps": link_Bps / 2, "net_nmt0_recv_Bps": link_Bps / 2,
                         "net_ctl0_sent_Bps": 1e4, "net_ctl0_recv_Bps": 1e4}
                        for i, h in enumerate(hosts) for t in (1.0, 2.0)])
    return Run(path=Path("."), name="x", ranks=ranks, monitor=mon), mon


def test_link_interface_is_not_loopback_across_hosts():
    run, mon = _run(["vm1", "vm2"], 17e6)  # the link carried about what lo did: lo is set aside
    assert link_iface(run, mon)[0] == "nmt0" and "apart from loopback" in link_iface(run, mon)[1]
    run, mon = _run(["vm1", "vm2"], 5e6)  # 4 ranks a host: lo carries 3 ring edges to the link's one
    assert link_iface(run, mon)[0] == "nmt0"
    run, mon = _run(["node0", "node1"], 2e4)  # local engines posing as nodes: everything went over lo
    assert link_iface(run, mon)[0] == "lo"
    run, mon = _run(["node0"], 17e6)  # one host: lo is a candidate like any interface
    assert link_iface(run, mon)[0] == "lo"


def fake_rehearsal(tmp_path: Path, ok: bool = True) -> Path:
    """A rehearsal's output directory whose run is a copy of the shipped one (its checkpoint listing stands in
    for the checkpoint), with a data path inside the rehearsal's directory in config.json, as training writes."""
    out = tmp_path / "rehearsal"
    shutil.copytree(REF, out / "run")
    (out / "run" / "manifest.json").unlink()
    cfg = json.loads((out / "run" / "config.json").read_text())
    cfg["data"]["dir"] = str(out / "node" / "data")
    (out / "run" / "config.json").write_text(json.dumps(cfg))
    report = json.loads(json.dumps({k: manifest()[k] for k in ("hosts", "ranks")}))
    (out / "report.json").write_text(json.dumps({"ok": ok, "checks": {"a check": {"ok": ok, "detail": ""}},
                                                 "hosts": [{"name": h} for h in report["hosts"]],
                                                 "ranks": report["ranks"], "reference": {"rate": "200mbit"}}))
    return out


def test_freeze_copies_replaces_paths_and_lists_every_file(tmp_path):
    from tools.rehearsal.reference import freeze
    dest = freeze(fake_rehearsal(tmp_path), tmp_path / "frozen")
    assert json.loads((dest / "config.json").read_text())["data"]["dir"] == "<rehearsal>/node/data"
    m = json.loads((dest / "manifest.json").read_text())
    assert set(m["files"]) == {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()} - {"manifest.json"}
    assert checkpoint_info(dest).weights_params == checkpoint_info(REF).weights_params
    assert load_run(dest).n_ranks == 4
    freeze(fake_rehearsal(tmp_path / "again"), dest)  # an earlier freeze is ours to replace


def test_freeze_refuses(tmp_path):
    from tools.rehearsal.reference import RehearsalError, freeze
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(RehearsalError, match="not ours to replace"):
        freeze(fake_rehearsal(tmp_path / "a"), foreign)
    assert (foreign / "notes.txt").read_text() == "mine"
    with pytest.raises(RehearsalError, match="not green"):
        freeze(fake_rehearsal(tmp_path / "b", ok=False), tmp_path / "out-b")
    out = fake_rehearsal(tmp_path / "c")
    (out / "run" / "translations" / "dev.20.de").write_text("see " + "/".join(["", "root", "x"]) + "\n")
    dest = freeze(fake_rehearsal(tmp_path / "d"), tmp_path / "out-c")
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    with pytest.raises(RehearsalError, match="translations/dev.20.de: still names a path"):
        freeze(out, dest)
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before, "a failed freeze changed dest"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out-c")) == [], "staging left behind"
    assert issubclass(RehearsalError, NmtkitError)
