"""The Slurm launcher's decisions without a Slurm: which GPU each engine pins (faked CUDA_VISIBLE_DEVICES), Slurm's
time formats, the allocation's end as a stop rule, the batch script ipyparallel's launcher writes from the config,
the srun step inside an allocation, the config's rules and one-line errors, and the lifeline's scancel on the
driver's death. tests/instructor/test_slurm.py runs the real thing."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from nmtkit import config
from nmtkit.allocation import parse_time_left
from nmtkit.cluster.plan import device_indices
from nmtkit.cluster.slurm import SlurmEngineSet, SlurmLauncher
from nmtkit.errors import ClusterError, ConfigError
from nmtkit.training.budget import DEADLINE_MARGIN_S, outlives


@pytest.mark.parametrize("hosts, visible, expected", [
    (["a", "a", "b", "b"], [None] * 4, [0, 1, 0, 1]),            # nothing bound: the kit's index per host
    (["a", "a", "b"], ["0", "1", "0"], [0, 0, 0]),               # --gpus-per-task: each pins its first visible
    (["a", "a"], ["2,3", "0,1"], [0, 0]),                        # two GPUs bound to each engine: its first
    (["a", "a"], ["0,1", "0,1"], [0, 1]),                        # one list shared by the host's engines
    (["a", "a"], ["0", ""], [0, 1]),                             # one engine bound nothing: not per-task binding
    (["a", "a", "b", "b"], ["0", "1", "0,1", "0,1"], [0, 0, 0, 1]),  # decided per host
])
def test_each_engine_pins_its_first_bound_gpu_else_its_place_on_the_host(hosts, visible, expected):
    assert device_indices(hosts, visible) == expected


def test_an_engine_with_its_own_gpu_pins_it_though_its_host_runs_two_ranks(monkeypatch):
    """Slurm's --gpus-per-task: two ranks on a node, each sees one GPU (CUDA_VISIBLE_DEVICES 0 and 1): each pins
    the first it sees, where the kit's own rule (local rank among the host's GPUs) would refuse 2 ranks on 1 GPU."""
    from test_gpu_pinning import FakeConfig

    from nmtkit.cluster.plan import assign_slots, bound_hosts, rank_env
    from nmtkit.cluster.remote import engine_identity, pin_args
    from nmtkit.errors import StackError
    from nmtkit.training.dist import pin_devices
    idents = []
    for gpu in ("0", "1"):  # what each engine reports, under the environment Slurm gave it
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpu)
        idents.append(dict(engine_identity(), host="gpu-node1"))
    hosts, visible = [d["host"] for d in idents], [d["cuda_visible"] for d in idents]
    assert visible == ["0", "1"] and bound_hosts(hosts, visible) == {"gpu-node1"}
    for slot, device in zip(assign_slots(hosts), device_indices(hosts, visible)):
        env = rank_env(slot, addr="10.0.0.1", port=1, iface="ib0", device_index=device, gpus_bound=True)
        cfg = FakeConfig(1)  # the one GPU this task sees
        pin_devices(*pin_args(env), config=cfg, cores=4, env={})
        assert cfg.visible == [cfg.gpus[0]] and slot.local_size == 2
        unbound = rank_env(slot, addr="10.0.0.1", port=1, iface="ib0", device_index=device)
        assert "NMTKIT_GPUS_BOUND" not in unbound
        with pytest.raises(StackError, match="2 ranks on this machine but 1 GPU"):  # nothing bound: refused
            pin_devices(*pin_args(unbound), config=FakeConfig(1), cores=4, env={})


@pytest.mark.parametrize("text, seconds", [("59", 59), ("1:00", 60), ("0:45", 45), ("2:03:04", 7384),
                                           ("1-00:00:10", 86410), ("UNLIMITED", None), ("NOT_SET", None),
                                           ("INVALID", None), ("", None)])
def test_slurm_time_left(text, seconds):
    assert parse_time_left(text) == seconds


def test_the_allocation_end_stops_the_run_when_the_next_checkpoint_would_pass_it():
    now, step_s = 1000.0, 0.5
    # 10 steps to the next checkpoint = 5 s, + 2 s reserve + the margin
    room = 5 + 2 + DEADLINE_MARGIN_S
    assert not outlives(now + room + 1, now, 30, step_s, 40, 1000, reserve_s=2)
    assert outlives(now + room - 1, now, 30, step_s, 40, 1000, reserve_s=2)
    assert not outlives(None, now, 30, step_s, 40, 1000)           # no limit, no stop
    assert outlives(now + DEADLINE_MARGIN_S - 1, now, 0, None, 40, 1000)  # unmeasured pace: the margin alone
    assert not outlives(now + room - 1, now, 995, step_s, 40, 1000, 2)  # the end (5 steps) comes before


def test_until_an_evaluation_is_timed_the_finish_is_reserved_at_the_first_steps_time():
    """An evaluation traces its graphs as the first step did: before any evaluation was timed, the time-limit stop
    keeps the first step's time for a dev evaluation that may fall due (the budget twice: the final dev + test)."""
    import types

    from nmtkit.training.budget import Budget, Plateau
    from nmtkit.training.loop import Spend
    t = types.SimpleNamespace(ckpt_every=10, steps=1000)
    p = types.SimpleNamespace(step=20)
    now = time.time()
    spend = Spend(Budget(0.0, 0.0, 0.0, 1), Plateau(0, 0.0), 0.0, step_s=0.01, deadline=now + DEADLINE_MARGIN_S + 12)
    assert spend.stop_reason(p, t) is None  # nothing to reserve: 0.1 s to the checkpoint fits
    spend.first_s = 8.0  # a first step of 8 s: 8 s reserved, 0.1 + 8 s fit in 12
    assert spend.stop_reason(p, t) is None
    spend.first_s = 13.0
    assert spend.stop_reason(p, t) == "time limit"
    spend.eval_s = 1.0  # once an evaluation was timed, its time counts
    assert spend.stop_reason(p, t) is None
    spend.budget = Budget(max_hours=(time.time() - now + 30) / 3600, max_cost=0.0, price=0.0, nodes=1)
    # the budget keeps room for the final dev and test evaluations: 2 x 20 s
    spend.deadline, spend.t0, spend.eval_s = None, now, 20.0
    assert spend.stop_reason(p, t) == "budget"
    spend.eval_s = 10.0
    assert spend.stop_reason(p, t) is None


def test_the_batch_script_carries_partition_account_time_gpus_and_extra_lines(tmp_path):
    cfg = config.load("tiny", {"cluster.launcher": "slurm", "cluster.slurm_partition": "gpu",
                               "cluster.slurm_account": "nlp101", "cluster.slurm_minutes": 90,
                               "cluster.slurm_gpus_per_node": 2, "cluster.slurm_sbatch": "--qos=short;--comment={x}"})
    job = SlurmLauncher.__new__(SlurmLauncher)  # what the Cluster builds, without asking for sbatch on PATH
    job.hosts, job.cc, job.inside, job.in_step, job.job_id, job.deadline = [], cfg.cluster, None, False, None, None
    cls, count, kwargs = job.engine_set(4, str(tmp_path))
    assert cls is SlurmEngineSet and count == 4
    launcher = cls(profile_dir=str(tmp_path), cluster_id="c1", **kwargs)  # ipyparallel's own, plus the extras
    launcher.write_batch_script(4)
    # each cluster its own script: two runs of one profile never write (or sbatch) the other's
    other = cls(profile_dir=str(tmp_path), cluster_id="c2", **kwargs)
    other.write_batch_script(2)
    assert sorted(p.name for p in tmp_path.glob("*.sbatch")) == ["slurm_engines-c1.sbatch", "slurm_engines-c2.sbatch"]
    assert launcher.find_args()[-1] == str(tmp_path / "slurm_engines-c1.sbatch")
    script = (tmp_path / "slurm_engines-c1.sbatch").read_text()
    lines = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    for want in ("--partition=gpu", "--account=nlp101", "--time=90", "--ntasks=4", "--ntasks-per-node=2",
                 "--gpus-per-task=1", "--qos=short", "--comment={x}", "--job-name=ipengine-c1"):
        assert any(line.endswith(want) for line in lines), (want, script)
    # the job's output goes to the profile, not slurm-<id>.out in whatever directory the driver runs in
    assert f"#SBATCH --output={tmp_path}/slurm-%j.out" in lines
    assert script.splitlines()[0].startswith("#!") and script.splitlines()[-1].startswith("srun ")
    job.cc = config.load("tiny", {"cluster.launcher": "slurm", "cluster.slurm_sbatch": "-o /scratch/%j.log"}).cluster
    assert [o for o in job.engine_set(2, str(tmp_path))[2]["extra"] if o.startswith(("-o", "--output"))] == [
        "-o /scratch/%j.log"]  # the user's own output path wins


def test_inside_an_allocation_the_engines_are_one_srun_step_of_it(tmp_path, monkeypatch):
    if shutil.which("srun") is None:
        pytest.skip("srun is not installed (apt-get install slurm-client)")
    cfg = config.load("tiny", {"cluster.launcher": "slurm"})
    job = SlurmLauncher([], cfg.cluster, env={"SLURM_JOB_ID": "4242"})
    cls, count, kwargs = job.engine_set(3, str(tmp_path))
    assert (cls, count, job.job_id) == ("local", 1, "4242")
    assert kwargs["engine_cmd"][:2] == ["srun", "--ntasks=3"] and kwargs["engine_cmd"][-2:] == ["-m",
                                                                                                "ipyparallel.engine"]
    assert job.cancel_command() is None  # the user's allocation is never scancel'ed: the srun step ends by its pid
    assert "--overlap" not in kwargs["engine_cmd"]
    step = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0"}  # the driver in `srun --pty jupyter lab`
    in_step = SlurmLauncher([], cfg.cluster, env=step)
    assert "--overlap" in in_step.engine_set(3, str(tmp_path))[2]["engine_cmd"]


def test_slurm_config_rules_and_one_line_errors(monkeypatch, tmp_path):
    assert "slurm" in config.choices("cluster.launcher")
    with pytest.raises(ConfigError, match=r"cluster\.slurm_sbatch=.*'qos=short' is no sbatch option"):
        config.load("tiny", {"cluster.slurm_sbatch": "--mem=1G;qos=short"})
    with pytest.raises(ConfigError, match=r"cluster\.slurm_minutes=-5: must be >= 0"):
        config.load("tiny", {"cluster.slurm_minutes": -5})
    from nmtkit.cluster import Cluster
    cfg = config.load("tiny", {"cluster.launcher": "slurm"})
    with pytest.raises(ClusterError, match="Slurm picks the nodes; leave cluster.hosts"):
        Cluster(cfg, hosts="10.0.0.5:2")
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm commands here
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(ClusterError, match=r"`sbatch` is not on PATH; run on the cluster's login node"):
        Cluster(cfg)


def test_the_factory_makes_one_slurm_launcher_that_is_its_job(tmp_path, monkeypatch):
    """One object: the launcher the Cluster asks is the job (its id, end, time limit), not a wrapper of another."""
    from nmtkit.cluster.launchers import make_launcher
    from nmtkit.cluster.seam import RemoteLauncher
    for tool in ("sbatch", "squeue", "scancel", "scontrol"):
        (tmp_path / tool).write_text("#!/bin/sh\nexit 1\n")
        (tmp_path / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    cc = config.load("tiny", {"cluster.launcher": "slurm", "cluster.slurm_partition": "gpu"}).cluster
    slurm = make_launcher("slurm", [], cc)
    assert type(slurm) is SlurmLauncher and isinstance(slurm, RemoteLauncher) and not hasattr(slurm, "job")
    assert slurm.cc is cc and slurm.engine_count(3) == 3 and slurm.logical_hosts is False
    assert slurm.engine_set(3, str(tmp_path))[2]["queue"] == "gpu" and slurm.interrupted() == ""
    slurm.job_id = "31"  # sbatch answered
    assert slurm.interrupted() == "Slurm job 31 cancelled" and slurm.time_limit_note().startswith("Slurm job 31's")
    assert slurm.cancel_command() == ["scancel", "31"] and "PYTHONPATH" in slurm.engine_env(3)


def test_the_lifeline_runs_its_command_when_the_driver_dies_and_not_after_a_clean_stop(tmp_path):
    def reaper(stdin: bytes, mark):
        subprocess.run([sys.executable, "-m", "nmtkit.cluster.lifeline", "1", "--", "touch", str(mark)],
                       input=stdin, timeout=30, check=True, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    reaper(b"", tmp_path / "died")          # EOF without "done": the driver is gone
    reaper(b"done\n", tmp_path / "clean")   # a clean stop
    assert (tmp_path / "died").exists() and not (tmp_path / "clean").exists()


def _fake_slurm(tmp_path, monkeypatch, state: str, nodes: str = "idle") -> SlurmLauncher:
    """scontrol and sinfo that answer from files (the job's state, the nodes' state), for the lines a fault gives."""
    (tmp_path / "state").write_text(state)
    (tmp_path / "nodes").write_text(nodes)
    for tool, body in (("scontrol",
                        f'echo "JobId=$4 JobState=$(cat {tmp_path}/state) Reason=NodeDown NodeList=n[1-2]"'),
                       ("sinfo", f"cat {tmp_path}/nodes")):
        (tmp_path / tool).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    job = SlurmLauncher.__new__(SlurmLauncher)
    job.hosts, job.cc, job.inside, job.job_id, job.deadline = [], config.ClusterConfig(), None, "7", None
    return job


def test_a_cancelled_or_failed_job_is_named_with_its_state(tmp_path, monkeypatch):
    job = _fake_slurm(tmp_path, monkeypatch, "NODE_FAIL")
    assert job.ended() == "Slurm job 7 lost a node (NODE_FAIL, NodeDown)"
    (tmp_path / "state").write_text("RUNNING")
    assert job.ended() is None
    t0 = time.time()
    assert job.cause(settle_s=1) == "Slurm job 7 RUNNING"  # every engine answers: a rank's own error, no wait
    assert time.time() - t0 < 5
    # an engine went silent and Slurm has not marked its node: the line says whose, after node_wait_s
    said = job.cause(silent=lambda: ["n2"], settle_s=1, node_wait_s=2)
    assert said.startswith("Slurm job 7 RUNNING; the engine(s) on n2 stopped answering (a lost node"), said
    (tmp_path / "nodes").write_text("n1 allocated\nn2 down*")  # Slurm's ping failed: the node is lost
    t0 = time.time()
    assert job.cause(silent=lambda: ["n2"], node_wait_s=30) == "Slurm job 7 RUNNING; node(s) lost: n2 down*"
    assert time.time() - t0 < 5  # no wait once Slurm says so


def test_a_completing_job_shows_why_once_its_engines_are_gone(tmp_path, monkeypatch):
    job = _fake_slurm(tmp_path, monkeypatch, "COMPLETING")
    ended = []
    def hasten():
        return (ended.append(1), (tmp_path / "state").write_text("TIMEOUT"))
    assert job.ended(hasten=hasten, wait=10) == "Slurm job 7 reached its time limit (TIMEOUT, NodeDown)"
    assert ended == [1]
    (tmp_path / "state").write_text("COMPLETING")
    assert job.ended(wait=1).startswith("Slurm job 7 is ending (COMPLETING")  # nobody ends the engines: say so


def test_train_without_np_inside_an_allocation_stops_at_a_checkpoint_before_its_end(nmt_data, tmp_path, monkeypatch):
    """`salloc -t 5 nmtkit train ...` (one process, no launcher): the loop asks squeue for the job's time left."""
    import json

    from nmtkit import cli
    from nmtkit.allocation import DEADLINE_ENV, allocation_end

    from conftest import small_config
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "squeue").write_text('#!/bin/sh\n[ "$3" = 99 ] && [ "$5" = "%L" ] && echo 0:18 || exit 1\n')
    (bin_ / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "98")
    assert allocation_end() is None  # squeue knows no job 98
    monkeypatch.setenv("SLURM_JOB_ID", "99")
    assert abs(allocation_end() - (time.time() + 18)) < 2
    run = tmp_path / "run"
    # the CLI's own route (it asks nmtkit.allocation and hands the loop a plain deadline), with small_config's values
    cfg = small_config(**{"train.steps": 100_000, "train.ckpt_every": 20})
    sets = [f"{sec}.{k}={v}" for sec, part in cfg.to_dict().items() if isinstance(part, dict) for k, v in part.items()
            if k != "dir"]
    args = cli.build_parser().parse_args(["train", "--profile", "tiny", "--data", str(nmt_data), "--logdir", str(run),
                                          *(a for kv in sets for a in ("--set", kv))])
    assert args.func(args) == 0
    status = json.loads((run / "run.json").read_text())
    assert status["status"] == "stopped" and status["reason"] == "time limit", status
    assert (run / "checkpoints" / f"ckpt-{status['step']}.index").exists(), status  # the stop's checkpoint
    assert "test_bleu" not in status["summary"], status  # no final evaluation: the next job resumes
