"""The run directory's owner: status that tells the truth, progress read from the files of any run."""
import json
import os
import socket
import subprocess
import sys

from nmtkit import runs


def test_running_with_a_dead_pid_reads_failed(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    runs._write_status(tmp_path, status="running", pid=p.pid, host=socket.gethostname(), step=12)
    state = runs.live_status(tmp_path)
    assert state["status"] == "failed" and f"pid {p.pid}" in state["error"]
    runs._write_status(tmp_path, pid=os.getpid())
    assert runs.live_status(tmp_path)["status"] == "running"
    runs._write_status(tmp_path, pid=p.pid, host="some-other-vm")  # not checkable from here: as written
    assert runs.live_status(tmp_path)["status"] == "running"


def test_rank_progress_reads_only_the_tail_and_skips_a_torn_line(tmp_path):
    (tmp_path / runs.RANKS_DIR).mkdir()
    big = "".join(json.dumps({"step": i, "rank": 0, "loss": 1.0}) + "\n" for i in range(50_000))
    (tmp_path / runs.RANKS_DIR / "rank0.jsonl").write_text(big + '{"step": 50000, "ra')
    (tmp_path / runs.RANKS_DIR / "rank10.jsonl").write_text(json.dumps({"step": 3, "rank": 10}) + "\n")
    (tmp_path / runs.RANKS_DIR / "rank2.jsonl").write_text(json.dumps({"step": 4, "rank": 2}) + "\n")
    rows = runs.rank_progress(tmp_path)
    assert [r["rank"] for r in rows] == [0, 2, 10]
    assert rows[0]["step"] == 49_999


def test_status_and_best_round_trip_without_tensorflow(tmp_path):
    code = ("import sys; from nmtkit import runs, lr\n"
            f"runs.write_best({str(tmp_path)!r}, step=5, bleu=1.5, chrf=2.0)\n"
            f"assert runs.read_best({str(tmp_path)!r})['bleu'] == 1.5\n"
            "assert abs(lr.transformer_lr(4000, 512, 4000) - 512 ** -0.5 * 2 * 4000 ** -0.5) < 1e-12\n"
            "sys.exit('tensorflow' in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_run_is_followed_from_its_files(tmp_path):
    from nmtkit.analysis.live import RunWatch
    from nmtkit.errors import TrainError
    from nmtkit.files import append_jsonl
    w = RunWatch(tmp_path)
    assert not w.done and w.progress().empty and "not started" in w.headline()
    runs._write_status(tmp_path, status="running", pid=os.getpid(), host=socket.gethostname(), step=5,
                       total_steps=10, ranks=2)
    for r in (0, 1):
        append_jsonl(runs.rank_log(tmp_path, r), {"step": 5, "wall_time": 1.0, "step_time": 0.2, "loss": 3.0,
                                                  "tokens": 1000, "rank": r, "host": f"node{r}"})
    table = w.progress()
    assert list(table.index) == [0, 1] and table.loc[1, "tok/s"] == 5000 and table.loc[0, "ms/step"] == 200.0
    assert not w.done and "running, step 5 of 10" in w.headline()
    w.check()
    runs._write_status(tmp_path, status="failed", error="rank 1 on node1 died")
    assert w.done
    try:
        w.check()
        raise AssertionError("check() should raise for a failed run")
    except TrainError as e:
        assert "rank 1 on node1 died" in str(e)
