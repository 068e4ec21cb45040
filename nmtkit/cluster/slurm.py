"""`cluster.launcher=slurm`: the engines as a Slurm job, started by ipyparallel's own SlurmEngineSetLauncher
(sbatch; scancel to stop), or, when the driver already runs inside an allocation (SLURM_JOB_ID set), as one `srun`
step of it. One engine per task: `cluster.engines` tasks, or one per GPU with `cluster.slurm_gpus_per_node`.

`SlurmLauncher` is that launcher, one object behind the seam (seam.py) as the local and SSH ones are (launchers.py,
whose make_launcher makes it). Only what Slurm alone knows lives here: the job's id, whether it waits in the queue,
why it ended (scancel, a lost node, its time limit), and when its time runs out. The rank plan, pinning, rendezvous,
lifeline and fault handling are the Cluster's, as for the other launchers. Two hooks reach the rest of the kit:
- `rank_env()` gives each rank NMTKIT_DEADLINE (the allocation's end, epoch seconds): rank 0's budget stops the run at
  a checkpoint before it (nmtkit.allocation holds the question; the loop's stop rule gets a plain deadline);
- `cause()` and `ended()` name the job and its state in the one line a fault gives (Job's RankFailedError, and the
  driver's line when the ranks stopped because Slurm signalled them).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ipyparallel.cluster.launcher import SlurmEngineSetLauncher
from traitlets import List, Unicode

from nmtkit.allocation import DEADLINE_ENV, job_end
from nmtkit.cluster.plan import controller_ip
from nmtkit.cluster.seam import RemoteLauncher, kit_path
from nmtkit.config import ClusterConfig
from nmtkit.errors import ClusterError

# srun --overlap shares GRES (GPUs) between steps from this release; before, CPUs only (srun(1), --overlap)
OVERLAP_SHARES_GRES = (21, 8)
INSTALL = "run on the cluster's login node with Slurm's commands on PATH (e.g. `module load slurm`)"
# job states that end a job, and what each means in the line the driver prints
ENDINGS = {"CANCELLED": "was cancelled by scancel or an administrator", "TIMEOUT": "reached its time limit",
           "NODE_FAIL": "lost a node", "PREEMPTED": "was preempted", "FAILED": "failed",
           "OUT_OF_MEMORY": "ran out of memory", "BOOT_FAIL": "could not boot its nodes",
           "DEADLINE": "passed its deadline", "COMPLETED": "ended", "REVOKED": "was revoked"}


class SlurmEngineSet(SlurmEngineSetLauncher):
    """ipyparallel's Slurm engine launcher, plus the config's extra #SBATCH lines, and sbatch/scancel failures as
    one ClusterError line (upstream lets a CalledProcessError through and prints sbatch's stderr elsewhere)."""

    extra = List(Unicode(), help="more sbatch options, one #SBATCH line each")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # one script per cluster: upstream's single name in the profile let two runs of one profile rewrite each
        # other's script while sbatch read it (a CI run: "sbatch: error: Batch script is empty!")
        root, ext = os.path.splitext(self.batch_file)
        self.batch_file = f"{root}-{self.cluster_id}{ext}" if self.cluster_id else self.batch_file

    def _insert_job_array_in_script(self):
        super()._insert_job_array_in_script()  # first: --ntasks-per-node would pass upstream's test for --ntasks
        if self.extra:  # braces escaped: the template is str.format'ed afterwards
            first, rest = self.batch_template.split("\n", 1)
            lines = [f"#SBATCH {o}".replace("{", "{{").replace("}", "}}") for o in self.extra]
            self.batch_template = "\n".join([first, *lines, rest])

    def _run_command(self, command, **kwargs):
        return run(command, env=kwargs.get("env"))

    def stop(self):
        try:
            return super().stop()
        except ClusterError as e:  # the job ended already (scancel, time limit): nothing left to stop
            self.notify_stop({"job_id": self.job_id, "output": str(e)})
            return str(e)
        finally:  # this cluster's own script (Slurm keeps its copy from the submission): one run, one file less
            Path(self.batch_file).unlink(missing_ok=True)


def run(cmd: list[str], env: dict | None = None, timeout: float = 30) -> str:
    """A Slurm command's stdout; a ClusterError naming the command and Slurm's own message when it fails."""
    if shutil.which(cmd[0]) is None:
        raise ClusterError(f"cluster.launcher=slurm: `{cmd[0]}` is not on PATH; {INSTALL}")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"`{' '.join(cmd)}` gave no answer in {timeout:.0f} s: is slurmctld up? (`sinfo`)") from None
    if r.returncode != 0:
        said = " ".join((r.stderr or r.stdout).split()) or f"exit {r.returncode}"
        raise ClusterError(f"`{' '.join(cmd)}` failed: {said}")
    return r.stdout


def job_fields(job_id: str, strict: bool = False) -> dict[str, str]:
    """`scontrol show job -o ID` as a dict (JobState, Reason, NodeList, TimeLimit, ...); {} once Slurm forgot it
    (or, unless `strict`, when scontrol fails: a fault's message must not wait on it)."""
    try:
        out = run(["scontrol", "show", "job", "-o", str(job_id)])
    except ClusterError:
        if strict:
            raise
        return {}
    return dict(item.split("=", 1) for item in out.split() if "=" in item)


class SlurmLauncher(RemoteLauncher):
    """The engines as a Slurm job: one submitted by sbatch, or a step of the allocation the driver runs in."""

    name = "slurm"
    logical_hosts = False  # Slurm's nodes are real hosts: their engines share a host and pin its GPUs

    def __init__(self, hosts: list, cc: ClusterConfig | None = None, env: dict | None = None):
        if hosts:
            raise ClusterError("cluster.launcher=slurm: Slurm picks the nodes; leave cluster.hosts (--hosts) empty "
                               "and give the number of engines (--np, cluster.engines)")
        super().__init__(hosts, cc)
        env = os.environ if env is None else env
        self.cc = cc or ClusterConfig()
        self.inside = env.get("SLURM_JOB_ID") or None   # the driver's own allocation: engines as an srun step
        # the driver itself runs in a step (`srun --pty jupyter lab`), which holds the allocation's CPUs: the
        # engines' step must share them (the batch script's step, 4294967294, holds none)
        self.in_step = env.get("SLURM_STEP_ID", "") not in ("", "4294967294")
        self.step_gpus = env.get("SLURM_STEP_GPUS", "") if self.in_step else ""  # GPUs the driver's step holds
        self.job_id: str | None = self.inside
        self.deadline: float | None = None               # epoch seconds, once the job runs and has a limit
        for tool in ("srun" if self.inside else "sbatch", "squeue", "scancel", "scontrol"):
            if shutil.which(tool) is None:
                raise ClusterError(f"cluster.launcher=slurm: `{tool}` is not on PATH; {INSTALL}")

    # starting

    def listen_ip(self) -> str:
        """Where the controller listens by default: the local address that routes to slurmctld's host (the
        compute nodes reach the login node on that network)."""
        for line in run(["scontrol", "show", "config"]).splitlines():
            key, _, value = line.partition("=")
            if key.strip().startswith("SlurmctldHost"):  # SlurmctldHost[0] = name(addr) or name
                host = value.strip()
                addr = host[host.index("(") + 1:host.rindex(")")] if "(" in host else host
                return controller_ip([addr])
        raise ClusterError("`scontrol show config` names no SlurmctldHost: set cluster.listen to this machine's "
                           "address on the network the compute nodes reach")

    def options(self) -> list[str]:
        """The sbatch/srun options beyond the task count: GPUs, and the config's extra lines."""
        gpus = self.cc.slurm_gpus_per_node
        opts = [f"--ntasks-per-node={gpus}", "--gpus-per-task=1"] if gpus else []  # Slurm binds each task its GPU
        return opts + [o.strip() for o in self.cc.slurm_sbatch.split(";") if o.strip()]

    def engine_set(self, n: int, profile_dir: str) -> tuple[object, int, dict]:
        """(ipyparallel's engine launcher class, how many it starts, its keyword arguments)."""
        if self.inside:  # one srun step of n tasks in the allocation, run by ipyparallel's local launcher
            self.check_overlap()
            cmd = ["srun", f"--ntasks={n}", f"--job-name=ipengine-{Path(profile_dir).name}",
                   *(["--overlap"] if self.in_step else []), *self.options(),
                   sys.executable, "-m", "ipyparallel.engine"]
            return "local", 1, {"engine_cmd": cmd}
        extra = self.options()
        if not any(o.startswith(("--output", "-o")) for o in extra):  # sbatch's default is slurm-<id>.out in the cwd
            extra.append(f"--output={Path(profile_dir) / 'slurm-%j.out'}")
        return SlurmEngineSet, n, {
            "queue": self.cc.slurm_partition, "account": self.cc.slurm_account,
            "timelimit": self.cc.slurm_minutes or "", "extra": extra,
            # absolute, so that the batch script goes to the profile, not the driver's working directory
            "batch_file_name": str(Path(profile_dir) / "slurm_engines.sbatch")}

    def check_overlap(self) -> None:
        """The driver's own step (`srun --pty jupyter lab` with GPUs) holds GPUs the engines' step asks for: srun
        --overlap shares them from Slurm 21.08 (CPUs, memory and GRES); before, it shares CPUs only and the
        engines' step would wait for those GPUs as long as the driver runs. One line instead of that wait."""
        if not (self.step_gpus and self.cc.slurm_gpus_per_node):
            return
        m = re.search(r"(\d+)\.(\d+)", run(["srun", "--version"]))
        version = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
        if version < OVERLAP_SHARES_GRES:
            raise ClusterError(
                f"the driver runs in a step of job {self.inside} that holds its GPUs (SLURM_STEP_GPUS="
                f"{self.step_gpus}), and this Slurm ({'.'.join(map(str, version))}) shares only CPUs between steps: "
                "the engines' step would wait for those GPUs forever; start the driver's step without GPUs "
                "(`srun --pty --gres=none jupyter lab ...`), or run the driver in the batch script or salloc shell")

    def engine_env(self, n: int) -> dict[str, str]:
        """This checkout too (a shared filesystem); the cores are Slurm's to give."""
        return {**kit_path(), "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}

    def started(self, engine_set, lifeline, controller_pid: int) -> list[int]:
        """The job is submitted: learn its id from ipyparallel's launcher (sbatch's output), arm the driver's
        lifeline to scancel it (or to end the srun step, by its local pid), then wait while it is queued. Returns
        the srun step's local pids (none for a job of our own)."""
        if not self.inside:
            self.job_id = str(engine_set.job_id)
        lifeline.on_death = self.cancel_command() or []
        steps = [el.pid for el in getattr(engine_set, "launchers", {}).values() if getattr(el, "pid", None)]
        lifeline.reap([controller_pid] + steps)
        self.wait_running()
        return steps

    def cancel_command(self) -> list[str] | None:
        """What the lifeline runs if the driver dies: scancel of our own job (never of the user's allocation,
        where the lifeline's reaper ends the srun step by its pid)."""
        return None if self.inside or not self.job_id else ["scancel", self.job_id]

    def wait_running(self, out=sys.stdout) -> None:
        """Wait while the job is queued (no timeout: a queue can take hours; Ctrl-C leaves, and the lifeline
        cancels the job). Raises ClusterError naming the job when it ends before it runs."""
        said, t0 = False, time.time()
        while not self.inside:
            f = job_fields(self.job_id, strict=True)  # slurmctld unreachable: say so, never wait blind
            state = f.get("JobState", "")
            if state == "RUNNING":
                break
            if state in ENDINGS:
                raise ClusterError(f"Slurm job {self.job_id} {ENDINGS[state]} before its engines started "
                                   f"({state}, reason {f.get('Reason', '?')}); its output is in {f.get('StdOut', '?')}")
            if state == "PENDING" and not said and time.time() - t0 > 3:  # a moment's wait is no news
                print(f"[nmtkit] Slurm job {self.job_id} is queued ({f.get('Reason', '?')}); the engines start when "
                      f"it runs", file=out, flush=True)
                said = True
            time.sleep(0.5)
        self.refresh_deadline()

    def refresh_deadline(self) -> None:
        self.deadline = job_end(self.job_id, ask=run)  # squeue failing names itself (ClusterError)

    def rank_env(self) -> dict[str, str]:
        """What every rank adds to its environment: the allocation's end, when it has one."""
        return {} if self.deadline is None else {DEADLINE_ENV: f"{self.deadline:.0f}"}

    def describe(self) -> str:
        f = job_fields(self.job_id)
        left = "" if self.deadline is None else f", {max(0, self.deadline - time.time()) / 60:.0f} min left"
        where = "inside your allocation" if self.inside else "submitted by sbatch"
        return (f"Slurm job {self.job_id} ({where}): {f.get('JobState', '?')} on {f.get('NodeList', '?')}{left}; "
                f"`scancel {self.job_id}` stops it (the ranks checkpoint first)")

    # how it ended

    def interrupted(self) -> str:
        return f"Slurm job {self.job_id} cancelled" if self.job_id else ""

    def time_limit_note(self) -> str:
        return (f"Slurm job {self.job_id}'s time limit was near: stopped at a checkpoint before it; run the same "
                f"command again (a new job) to resume")

    def ended(self, hasten=None, wait: float = 60) -> str | None:
        """'Slurm job N was cancelled (...)' when the job is ending or ended, else None (it still runs).

        While a job completes Slurm shows COMPLETING, not why: its processes have KillWait seconds (30 by default)
        to exit. `hasten()` ends the engines so that the job's own end state shows; then wait up to `wait` s."""
        f = job_fields(self.job_id) if self.job_id else {}
        state = f.get("JobState", "")
        if state == "COMPLETING":
            if hasten is not None:
                hasten()
            until = time.time() + wait
            while state == "COMPLETING" and time.time() < until:
                time.sleep(0.5)
                f = job_fields(self.job_id)
                state = f.get("JobState", "")
            if state == "COMPLETING":
                return f"Slurm job {self.job_id} is ending (COMPLETING: cancelled, out of time or a node lost)"
        if state not in ENDINGS:
            return None
        reason = f.get("Reason", "None")
        return f"Slurm job {self.job_id} {ENDINGS[state]} ({state}{'' if reason == 'None' else ', ' + reason})"

    def cause(self, silent=lambda: [], hasten=None, settle_s: float = 6.0, node_wait_s: float = 30.0) -> str:
        """For a dead rank's error line: the job's state and, when a node was lost, which. A lost node shows first
        as its engines' silence (`silent()`: the hosts whose engines stopped answering the controller's heartbeat,
        known within `settle_s`), then in Slurm, as not responding once slurmctld's ping fails (every
        SlurmdTimeout/3) and down after SlurmdTimeout: wait up to `node_wait_s` for Slurm to say so."""
        if not self.job_id:
            return ""
        ended = self.ended(hasten, wait=20)
        if ended:
            return ended
        t0 = time.time()
        while True:
            f = job_fields(self.job_id)
            down, gone = nodes_down(f.get("NodeList", "")), silent()
            if down or f.get("JobState") in ENDINGS or time.time() - t0 > (node_wait_s if gone else settle_s):
                break
            time.sleep(1)
        said = f"Slurm job {self.job_id} {ENDINGS.get(f.get('JobState'), f.get('JobState', 'state unknown'))}"
        if down:
            return f"{said}; node(s) lost: {', '.join(down)}"
        if gone:
            hosts = ", ".join(dict.fromkeys(gone))
            return (f"{said}; the engine(s) on {hosts} stopped answering (a lost node or a killed process; Slurm "
                    f"has not marked the node down yet: `sinfo -n {hosts}`)")
        return said


def nodes_down(nodelist: str) -> list[str]:
    """The job's nodes Slurm sees down, failing, drained or not responding (state ending in *), as 'name state'."""
    if not nodelist or nodelist == "(null)":
        return []
    try:
        rows = run(["sinfo", "-h", "-N", "-n", nodelist, "-o", "%N %T"]).splitlines()
    except ClusterError:
        return []
    bad = ("DOWN", "NOT_RESPONDING", "FAIL", "DRAIN")
    return [" ".join(r.split()) for r in dict.fromkeys(rows)
            if r.split() and (any(b in r.upper() for b in bad) or r.rstrip().endswith("*"))]
