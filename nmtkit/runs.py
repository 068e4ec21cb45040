"""The run directory: its names and the readers/writers of its JSON files, the one contract between training
(which writes) and analysis (which reads). Importable without TensorFlow.

    <run>/config.json            the Config the run used (nmtkit.config)
    <run>/data_stats.json        copied from the data directory at the start of training
    <run>/events.out.tfevents.*  TensorBoard scalars (rank 0): see TAGS
    <run>/scalars.jsonl          the same scalars, one {"step","wall_time","tag","value"} per line
    <run>/ranks/rank<R>.jsonl    every rank, per step: {"step","wall_time","step_time","loss","tokens" (source +
                                 target),"src_tokens","tgt_tokens","src_len","tgt_len" (padded),"rank","host",
                                 "affinity" (the cores it could run on),"threads" (TensorFlow's intra, inter);
                                 mixed_float16: "loss_scale" (the step's), "overflow" (the step was skipped)}
    <run>/monitor/<host>-rank<R>.jsonl   sampler records (nmtkit.monitor)
    <run>/checkpoints/           tf.train.CheckpointManager files (rank 0); best/ holds the best by dev BLEU
    <run>/checkpoints/data/rank<R>/   every rank's input position (tf.data iterator checkpoint data-<step>,
                                 saved with each model checkpoint; nmtkit.training.checkpoints.DataPosition)
    <run>/translations/          decoded dev/test output (dev.<step>.de, test.<step>.de, dev.ref.de)
    <run>/bleu-stats.json        a shipped run's per-sentence BLEU statistics in place of its translations
    <run>/report.md, report.json `nmtkit report` (nmtkit.analysis.report), beside its figures/
    <run>/figures/               the report's and the questions' figures (PNG)
    <run>/saved_model/           `nmtkit export`'s SavedModel, strings in, strings out (nmtkit.serving)
    <run>/run.json               status: {"status": "running"|"finished"|"stopped"|"failed", "step", "ranks", ...}
    <run>/.lock                  one job per run directory: flock + owner {"pid","host","since","token"}; nmtkit.runlock
    <run>/.run.json.lock         held while run.json is written: a second writer at that moment is refused
    <run>/nmtkit-error.log       the `nmtkit` command's tracebacks (the terminal gets one line naming this file)
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from nmtkit.errors import RunDirError
from nmtkit.files import atomic_write_json, read_json
from nmtkit.runlock import RunLock, describe, pid_alive, read_owner, still_ours

CONFIG = "config.json"
DATA_STATS = "data_stats.json"
SCALARS = "scalars.jsonl"
RANKS_DIR = "ranks"
MONITOR_DIR = "monitor"
CHECKPOINTS = "checkpoints"
BEST = "checkpoints/best"
TRANSLATIONS = "translations"
BLEU_STATS = "bleu-stats.json"
DEV_REFERENCES = "dev.ref.de"  # under TRANSLATIONS: the dev references the dev.<step>.de hypotheses are scored against
STATUS = "run.json"
ERROR_LOG = "nmtkit-error.log"
REPORT, FIGURES, SAVED_MODEL = "report.md", "figures", "saved_model"
BEST_JSON = "checkpoints/best/best.json"
WRITING = ".run.json.lock"

# The TensorBoard tags the homework's students know, plus ours (loss_scale: mixed_float16 runs only).
TAGS = ("train_loss", "eval_loss", "Eval_BLEU_Score", "eval_chrF", "learning_rate", "global_step/sec",
        "tokens_per_sec", "step_time", "mfu", "loss_scale")


def rank_log(run: str | Path, rank: int) -> Path:
    return Path(run) / RANKS_DIR / f"rank{rank}.jsonl"


def monitor_log(run: str | Path, host: str, rank: int) -> Path:
    return Path(run) / MONITOR_DIR / f"{host}-rank{rank}.jsonl"


def read_status(run: str | Path) -> dict:
    """run.json as a dict ({} when the run has none yet)."""
    return read_json(Path(run) / STATUS, RunDirError, missing={}, hint="it is the run's status, written by training")


def _write_status(run: str | Path, **fields) -> dict:
    """Merge `fields` into run.json (atomically) and stamp `updated`. Only RunDir calls this: run.json has one
    writer, so its transitions (running -> finished | stopped | failed) all live in this file. A second process
    writing at the same moment is refused (RunDirError), never interleaved with this read-modify-write."""
    path = Path(run) / STATUS
    with _writing(Path(run)):
        try:
            state = read_status(run)
        except RunDirError:  # a torn or foreign run.json is replaced, not trusted
            state = {}
        state.update(fields, updated=time.time())
        atomic_write_json(path, state)
    return state


@contextlib.contextmanager
def _writing(run: Path):
    run.mkdir(parents=True, exist_ok=True)
    fd = os.open(run / WRITING, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(f"{run / STATUS}: another process of this job is writing it right now; the job's "
                              f"transitions come from one process at a time (a bug if you see this)") from None
        yield
    finally:
        os.close(fd)  # closing releases the flock


@dataclass(frozen=True)
class RunHandle:
    """What a rank of a distributed job gets of its driver's session, as an argument (picklable): the run
    directory and the lock's token. `open()` is the rank's RunDir: it may write run.json while the token is the
    directory's, and stops (check_ours) once another job has taken the directory over."""

    path: str
    token: str

    def open(self) -> "RunDir":
        return RunDir(self.path, token=self.token)


class RunDir:
    """One run directory and the session of the job that uses it: its paths, its lock, its config and the
    transitions of its run.json (the only writer).

        rd = RunDir("runs/baseline")
        with rd.session():                    # one job per directory: the lock, taken here and released here
            rd.started(step=0, ranks=2, ...)  # status "running"
            rd.progress(200)                  # after a checkpoint
            rd.ended("finished", 600, summary=...)  # or "stopped" with a reason; rd.failed(error) on the way out
        rd.handle()                           # for a rank on an engine: RunHandle(path, token), its .open()

    A transition from a process that holds neither the lock nor its token raises RunDirError.
    """

    def __init__(self, path: str | os.PathLike, token: str | None = None):
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise RunDirError(f"{self.path}: a file, not a directory; a run directory holds a run's config, logs "
                              f"and checkpoints: name a new or existing directory (e.g. --logdir runs/baseline)")
        self.token = token            # the session's token: set by take(), or given to a rank by its driver
        self.message = ""             # what take() did ("locked ...", "took over the lock of ... from ...")
        self._lock: RunLock | None = None

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS

    @property
    def error_log(self) -> Path:
        return self.path / ERROR_LOG

    def rank_log(self, rank: int) -> Path:
        return rank_log(self.path, rank)

    def monitor_log(self, host: str, rank: int) -> Path:
        return monitor_log(self.path, host, rank)

    # the session: the lock, its token, and whether the directory is still this job's
    @property
    def holds(self) -> bool:
        """This process holds the directory's lock (it took it)."""
        return self._lock is not None

    def take(self) -> "RunDir":
        """Take the directory's lock for this process (RunDirError names a live holder); see session()."""
        if self._lock is None:
            self._lock = RunLock(self.path).acquire()
            self.token, self.message = self._lock.token, self._lock.message
        return self

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @contextlib.contextmanager
    def session(self):
        """`with rd.session():` the lock for the block (kept if this process already held it)."""
        took = not self.holds
        self.take()
        try:
            yield self
        finally:
            if took:
                self.release()

    def handle(self) -> RunHandle:
        """The session for a rank of this job on an engine (an argument of its entry point, never the environment)."""
        if not self.token:
            raise RunDirError(f"{self.path}: no session to hand to the ranks; take the lock first (RunDir.take)")
        return RunHandle(str(self.path), self.token)

    def still_ours(self) -> bool:
        """False once another job has taken the directory over (always True for the lock's holder)."""
        return self.holds or (bool(self.token) and still_ours(self.path, self.token))

    def check_ours(self) -> None:
        """A rank whose driver died must not write over the job that has since taken the directory over."""
        if not self.still_ours():
            raise RunDirError(f"{self.path}: another job has taken this run directory over "
                              f"({describe(read_owner(self.path))}); this one stops without writing")

    def _write(self, **fields) -> dict:
        if not self.token:
            raise RunDirError(f"{self.path}/{STATUS}: only the job that holds this run directory writes it, and "
                              f"this process holds neither its lock nor its token (RunDir.session, RunHandle)")
        self.check_ours()
        return _write_status(self.path, **fields)

    # config.json
    def save_config(self, cfg) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        cfg.save(self.config_path)

    def config(self):
        return load_config(self.path)

    # run.json
    def status(self) -> dict:
        return read_status(self.path)

    def live_status(self) -> dict:
        return live_status(self.path)

    def started(self, host: str | None = None, **fields) -> dict:
        """Training began (or resumed) in this process: status running, with its host and pid."""
        return self._write(status="running", host=host or socket.gethostname(), pid=os.getpid(),
                           started=time.time(), error=None, reason=None, **fields)

    def progress(self, step: int, **fields) -> dict:
        """A checkpoint (or a projection) while running; the status stays as it is."""
        return self._write(step=step, **fields)

    def ended(self, status: str, step: int, *, reason: str | None = None, summary: dict | None = None,
              **fields) -> dict:
        """The run finished, or stopped (why: the signal's name, "budget", "plateau"); it can resume."""
        if status not in ("finished", "stopped"):
            raise ValueError(f"RunDir.ended({status!r}): finished or stopped")
        flat = {k: v for k, v in (summary or {}).items() if isinstance(v, (int, float, str, type(None)))}
        return self._write(status=status, step=step, reason=reason, summary=flat, **fields)

    def failed(self, error: str, step: int | None = None, wait: float = 0.0) -> dict:
        """A rank raised or died: the reason, for `nmtkit report` and for whoever launches next. `wait`: seconds
        to retry while another process of the job is mid-write (the driver's last word after a rank died)."""
        deadline = time.time() + wait
        while True:
            try:
                return self._write(status="failed", error=error[:500], **({} if step is None else {"step": step}))
            except RunDirError:
                if time.time() >= deadline or not self.still_ours():
                    raise
                time.sleep(0.05)

    def record(self, **fields) -> dict:
        """Facts that are no transition (the link preflight measured, before the ranks start)."""
        return self._write(**fields)


def projection_text(status: dict) -> str:
    """run.json's projection in a few words for a live panel ("" before there is one)."""
    proj = status.get("projection") or {}
    if proj.get("total_hours") is None:
        return ""
    cost = proj.get("total_cost")
    return (f"{1000 * proj['step_s']:.0f} ms/step, {proj['total_hours']:.2f} h to the last step"
            + (f", ${cost:,.2f}" if cost is not None else ""))


def read_best(run: str | Path) -> dict | None:
    """checkpoints/best/best.json: {"step", "bleu", "chrf"} of the best dev BLEU so far, or None."""
    return read_json(Path(run) / BEST_JSON, RunDirError, missing=None)


def write_best(run: str | Path, *, step: int, bleu: float, chrf: float) -> None:
    atomic_write_json(Path(run) / BEST_JSON, {"step": step, "bleu": bleu, "chrf": chrf})


def live_status(run: str | Path) -> dict:
    """run.json, except that "running" whose pid on this host is gone reads "failed" with the reason (a run
    killed outright cannot write its own end). A pid on another host cannot be checked from here: left as is."""
    state = dict(read_status(run))
    pid, host = state.get("pid"), state.get("host")
    if state.get("status") == "running" and isinstance(pid, int) and host in (socket.gethostname(), None) \
            and not pid_alive(pid):
        state.update(status="failed", error=f"the training process (pid {pid} on {host}) died without a word "
                                            f"(killed, or out of memory); train again to resume")
    return state


def tail_records(path: str | Path, max_bytes: int = 8192) -> list[dict]:
    """The last whole JSON lines of a (possibly huge, possibly growing) JSONL file, without reading all of it."""
    import json
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            lines = f.read().split(b"\n")
    except FileNotFoundError:
        return []
    if size > max_bytes:
        lines = lines[1:]  # the first one is cut
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line or an empty one
    return out


def rank_progress(run: str | Path) -> list[dict]:
    """The latest step record of every rank (from ranks/rank<R>.jsonl), in rank order: what a live panel shows
    for a run started anywhere (the CLI, another kernel), read from its files alone."""
    rows = []
    for path in sorted((Path(run) / RANKS_DIR).glob("rank*.jsonl"), key=lambda p: int(p.stem[4:] or 0)):
        recs = tail_records(path)
        if recs:
            rows.append(recs[-1])
    return rows


def load_config(run: str | Path):
    """The Config a run started with (its config.json)."""
    from nmtkit.config import Config
    return Config.load_json(Path(run) / CONFIG)


def workspace() -> Path:
    """Where notebooks keep data and runs: $NMTKIT_WORKDIR (the course runner sets it), else ./workspace.

    Notebooks run with cwd = notebooks/, so by default they share notebooks/workspace.

    Introduced in notebook 05_monitoring_analysis.
    """
    ws = Path(os.environ.get("NMTKIT_WORKDIR") or "workspace").resolve()
    ws.mkdir(parents=True, exist_ok=True)
    return ws
