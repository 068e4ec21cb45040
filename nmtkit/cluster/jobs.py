"""A distributed job in flight: results in rank order, stop, failures (a dead or raising rank is named and the
others are released), and the per-rank progress each engine publishes (a DataFrame).

A Job knows the engines only through `EngineControl` (which are alive, signal, release, is-local), which the
Cluster implements; it never imports the Cluster. No display code here: `nmtkit.notebook.panel(job)` is the
live widget, built on done, check(), headline() and progress().
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from nmtkit.cluster.plan import Engine
from nmtkit.cluster.rendezvous import Rendezvous
from nmtkit.errors import RankFailedError
from nmtkit.runlock import pid_alive
from nmtkit.runs import RunDir, projection_text


class EngineControl(Protocol):
    """What a Job needs of the engines it runs on (the Cluster provides it)."""

    def alive_ids(self) -> set[int]: ...          # engines the controller still has
    def is_local(self, engine: Engine) -> bool: ...  # its pid can be checked from this host
    def signal(self, ids: list[int], name: str) -> None: ...  # e.g. SIGINT: stop after a checkpoint
    def release(self, ids: list[int]) -> None: ...  # kill (hand-started: abort) and forget them, without waiting
    def cause(self) -> str: ...                     # what the launcher knows ended them, e.g. a Slurm job's state


@dataclass(frozen=True)
class RankResult:
    """What one rank's function returned, with where it ran; a job's results are these in rank order."""

    rank: int
    host: str
    pid: int
    value: Any


def take_session(run: RunDir) -> bool:
    """A notebook job's lock on its run directory, taken here unless the caller (the CLI driver) holds it. True
    when taken: then the Job releases it at its end, or end_session() when the launch fails before the Job."""
    took = not run.holds
    run.take()
    return took


def end_session(run: RunDir, took: bool) -> None:
    if took:
        run.release()


DIED = "its engine process died (killed, or out of memory) while training"


class Job:
    """wait() -> per-rank RankResults in rank order; stop(); check(); done (a property); progress(); headline()."""

    def __init__(self, control: EngineControl, engines: list[Engine], pending: list, rendezvous: Rendezvous,
                 t0: float, *, run: RunDir | None = None, owns_session: bool = False):
        self.control, self.engines, self.pending, self.rendezvous, self.t0 = control, engines, pending, rendezvous, t0
        self.error: RankFailedError | None = None
        self.stop_requested = False
        self.run = run                 # the run directory of a training job: its run.json learns of a failure
        self.owns_session = owns_session  # the job's launch took run's session for it: released at its end
        self._lock = threading.Lock()  # check() may run in a panel's thread and in wait() at once

    @property
    def done(self) -> bool:
        """Every rank returned, or the job failed (check() then raises)."""
        return self.error is not None or all(p.ready() for p in self.pending)

    def check(self) -> None:
        """Raise RankFailedError if a rank died or raised (and release the others); otherwise return."""
        with self._lock:
            if self.error is None:
                live = self.control.alive_ids()
                for e, p in zip(self.engines, self.pending):
                    dead = e.id not in live or (self.control.is_local(e) and not pid_alive(e.pid))
                    if dead and not p.ready():
                        self._fail(e, DIED)
                    elif p.ready() and not p.successful():
                        try:
                            p.get(0)
                        except Exception as err:  # noqa: BLE001  named in the RankFailedError
                            # the hub may fail the task of a dead engine before it drops the engine
                            self._fail(e, DIED if getattr(err, "ename", "") == "EngineError" else _short(err))
            if self.error is not None:
                raise self.error

    def wait(self, timeout: float | None = None, poll: float = 0.5) -> list[RankResult]:
        """Block until every rank returns; their results ordered by Horovod rank. Raises RankFailedError."""
        deadline = None if timeout is None else time.time() + timeout
        while waiting := [p for p in self.pending if not p.ready()]:
            self.check()
            if deadline is not None and time.time() > deadline:
                raise TimeoutError(f"job still running after {timeout} s:\n{self.progress().to_string()}")
            waiting[0].wait(poll)  # returns when that rank is done: a sleep would wait out the poll, every job
        self.check()
        self.rendezvous.stop()
        self._end_session()
        return sorted((RankResult(**p.get()) for p in self.pending), key=lambda r: r.rank)

    def _end_session(self) -> None:
        if self.run is not None:
            end_session(self.run, self.owns_session)
            self.owns_session = False

    def output_of_rank(self, rank: int = 0):
        """The AsyncResult of one rank: its `.stdout` grows with what the rank prints (its log lines)."""
        return self.pending[[e.slot.rank for e in self.engines].index(rank)]

    def results(self) -> list:
        """The per-rank return values (e.g. train()'s summaries), in rank order."""
        return [r.value for r in self.wait()]

    def summary(self) -> pd.DataFrame:
        """Every rank's returned record (e.g. train()'s summary) as a row, indexed by rank."""
        results = self.wait()
        return pd.DataFrame([r.value for r in results], index=[r.rank for r in results]).rename_axis("rank")

    def request_stop(self) -> None:
        """Ask every rank to stop (SIGINT: the training loop agrees across ranks, rank 0 checkpoints); at once."""
        self.stop_requested = True
        self.control.signal([e.id for e in self.engines], "SIGINT")

    def stop(self, timeout: float = 120) -> list[RankResult]:
        """request_stop(), then wait for every rank's result."""
        self.request_stop()
        return self.wait(timeout=timeout)

    def _who(self, e: Engine) -> str:
        node = f" (node {e.node})" if e.node != e.host else ""
        return f"rank {e.slot.rank} on host {e.host}{node}, engine {e.id}, pid {e.pid}"

    def _fail(self, e: Engine, why: str) -> None:
        if self.error is None:
            cause = self.control.cause()  # before the release: e.g. "Slurm job 7 was cancelled (CANCELLED)"
            why = f"{why}; {cause}" if cause else why
            self.error = RankFailedError(f"{self._who(e)}: {why}. The other ranks were released; the run can "
                                         f"resume from its last checkpoint with cluster.launch(...), which starts "
                                         f"fresh engines (same or different number of ranks)")
            if self.run is not None:  # rank 0, which keeps run.json, may be the one that died: the driver's
                self.run.failed(str(self.error), wait=2.0)  # session writes the end (rank 0 may be mid-write)
            self._release()
            self._end_session()

    def _release(self) -> None:
        """Free the ranks that may be blocked in a Gloo collective waiting for the dead one, without waiting:
        SIGKILL through each engine's nanny (a separate process, so it acts while the engine is stuck in C++; one
        ZMQ message, no SSH round trip). Fresh engines start at the next launch (Cluster.engines), so the error
        naming the rank comes first."""
        self.rendezvous.stop()
        try:
            self.control.release([e.id for e in self.engines])
        except Exception as err:  # noqa: BLE001  the error we raise is about the rank; note this one
            self.error.args = (self.error.args[0] + f" (releasing the other engines failed: {_short(err)})",)

    # progress: what each rank last published (remote.train_rank's on_log records)

    def progress(self) -> pd.DataFrame:
        """The latest record of every rank: state, step, loss, ms/step, tok/s; indexed by rank."""
        rows = []
        for e, p in zip(self.engines, self.pending):
            rec = (getattr(p, "data", None) or {}).get("record", {})
            state = "failed" if (p.ready() and not p.successful()) else ("done" if p.ready() else "running")
            step_time = rec.get("step_time")
            rows.append({"rank": e.slot.rank, "node": e.node, "state": state, "step": rec.get("step"),
                         "loss": rec.get("loss"),
                         "ms/step": None if step_time is None else round(1000 * float(step_time), 1),
                         "tok/s": rec.get("tokens_per_sec")})
        return pd.DataFrame(rows).set_index("rank")

    def headline(self) -> str:
        proj = projection_text(self.run.status()) if self.run is not None else ""
        return f"{len(self.engines)} ranks, {time.time() - self.t0:.0f} s" + (f"; projection: {proj}" if proj else "")


def _short(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[-1] if text else ''}"[:500]
