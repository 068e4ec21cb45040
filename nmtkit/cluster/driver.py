"""`nmtkit train --np N [--hosts h1:2,h2:2] [--launcher local|ssh|manual|slurm]`: notebook 03's path, in the
foreground.

The homework's run lasts days: it must not need a live notebook kernel, a terminal, or luck. So this driver
- takes the run directory's session first (a second launch fails at once, naming the holder: RunDir.session),
- starts the same Cluster the notebook starts, runs preflight and the same `launch()`,
- prints rank 0's own output (its one-line log per interval, evaluations) as it comes,
- on Ctrl-C/SIGTERM asks every rank to stop after a checkpoint, then exits 0; a failed rank exits non-zero,
- under Slurm, names the job; when Slurm ends it (scancel, a lost node, its time limit) one error line names the
  job and why, after the ranks' last checkpoint,
- and if it is killed outright, the cluster's lifeline ends the engines and the controller (no orphans).
"""
from __future__ import annotations

import sys
import time
from typing import TextIO

from nmtkit.cluster.plan import parse_hosts
from nmtkit.config import Config
from nmtkit.errors import ClusterError
from nmtkit.runs import RunDir
from nmtkit.training.signals import caught


class _Echo:
    """Rank 0's stdout (one AsyncResult's), printed as it grows."""

    def __init__(self, result, out: TextIO):
        self.result, self.out, self.seen = result, out, 0

    def flush(self) -> None:
        text = getattr(self.result, "stdout", "") or ""
        if isinstance(text, list):
            text = text[0] if text else ""
        if len(text) > self.seen:
            self.out.write(text[self.seen:])
            self.out.flush()
            self.seen = len(text)


def check_ranks(np: int, hosts: str = "") -> None:
    """Refuse a rank count the hosts cannot hold, naming both numbers (before any engine or SSH starts)."""
    if np < 1:
        raise ClusterError(f"--np {np}: the number of ranks must be at least 1")
    slots = sum(h.slots for h in parse_hosts(hosts)) if hosts else None
    if slots is not None and np > slots:
        raise ClusterError(f"--np {np} asks for {np} ranks but --hosts {hosts} give {slots} slots: lower --np to "
                           f"{slots} or add slots (host:slots, e.g. {hosts.split(',')[0].split(':')[0]}:{np})")


def _start(cluster, say) -> None:
    """Start the engines. Ctrl-C here (a Slurm job still queued) leaves at once: the start ends what it began
    (scancel); the graceful stop (checkpoint first) applies once training runs."""
    try:
        cluster.start()
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C; SIGTERM (the CLI's handler raises SystemExit)
        also = cluster.backend.interrupted()
        say(f"interrupted before training began{f': {also}' if also else ''}")
        raise


def train_distributed(cfg: Config, run: RunDir, *, np: int, resume: bool = True, out: TextIO = sys.stdout,
                      poll: float = 0.5) -> int:
    """Run (or resume) a multi-rank training from the command line; returns the process exit code. `cfg` is
    settled by the caller (cluster.engines/hosts/launcher and an absolute data.dir, frozen) and `np` checked
    against the hosts (check_ranks) before anything started; `run` is the CLI's RunDir."""
    from nmtkit.cluster.engines import Cluster
    from nmtkit.errors import RankFailedError

    def say(text: str) -> None:
        print(f"[nmtkit] {text}", file=out, flush=True)

    hosts = cfg.cluster.hosts
    with run.session():  # the lock's owner for the CLI driver (docs/architecture.md, "Who holds the lock")
        say(run.message)
        cluster = Cluster(cfg)
        say(f"starting {np} engines ({cluster.launcher} launcher{', hosts ' + hosts if hosts else ''})")
        _start(cluster, say)
        try:
            with caught() as signals:
                where = cluster.backend.describe()  # e.g. the Slurm job, its nodes and time left
                if where:
                    say(where)
                job = cluster.launch(cfg, run, resume=resume, ranks=np)
                say(f"{np} ranks training into {run.path}")
                echo = _Echo(job.output_of_rank(0), out)
                while not job.done:
                    echo.flush()
                    if signals.requested and not job.stop_requested:
                        say(f"{signals.signal}: stopping every rank after a checkpoint (again: Ctrl-C to leave now)")
                        job.request_stop()
                    job.check()  # RankFailedError names the rank, host and pid
                    time.sleep(poll)
                results = job.wait()
                echo.flush()
                # Slurm's SIGTERM stopped the ranks (they checkpointed first), unless they ended by themselves
                own = results[0].value.get("status") == "finished" or results[0].value.get("reason") == "time limit"
                ended = None if own else cluster.allocation_ended()
                if ended:
                    run.record(allocation_end=ended)
                    raise ClusterError(f"{ended}: the ranks stopped at step {results[0].value.get('step')} after a "
                                       f"checkpoint; run the same command again to resume {run.path}")
        except RankFailedError:
            echo.flush()  # the job has marked run.json failed with the reason
            raise
        finally:
            cluster.stop()
    summary = results[0].value
    why = f" ({summary['reason']})" if summary.get("reason") else ""
    say(f"run {summary.get('status')}{why} at step {summary.get('step')}: {run.path}")
    sums = [r.value.get("weights_checksum") for r in results]  # the ranks stayed in sync: one value
    say(f"weights checksum {sums[0]!r} on all {len(sums)} ranks" if len(set(sums)) == 1 else
        f"weights differ across ranks (checksums {', '.join(map(repr, sums))}): the ranks fell out of sync")
    if summary.get("reason") == "time limit" and cluster.backend.time_limit_note():
        say(cluster.backend.time_limit_note())
    return 0 if summary.get("status") in ("finished", "stopped") else 1
