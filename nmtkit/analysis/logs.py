"""Load what a run left behind (see nmtkit/runs.py) into pandas DataFrames.

Reads files only, never nmtkit.training: logs copied from any machine, or from a run still going or killed
half-way, load the same way. `load_run(dir)` is the entry point; `load_runs([...])` puts several side by side.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from nmtkit import monitor, runs
from nmtkit.config import Config
from nmtkit.data.stats import DataStats
from nmtkit.errors import AnalysisError, ConfigError, DataError, RunDirError
from nmtkit.files import atomic_write_json, read_json, read_jsonl

EVENTS_GLOB = "events.out.tfevents.*"
# A checkpoint's listing in place of its files (a frozen run ships this, not megabytes of values): written by
# write_checkpoint_listing, read by checkpoint_info when the checkpoint directory holds no checkpoint itself.
CHECKPOINT_LISTING = "listing.json"


@dataclass
class Run:
    """One run's logs. Every DataFrame may be empty: an unfinished run has whatever it had written so far."""
    path: Path
    name: str
    config: Config | None = None
    config_problem: str = ""                    # why config is None
    status: dict = field(default_factory=dict)  # run.json
    data_stats: DataStats | None = None         # data_stats.json
    scalars: pd.DataFrame = field(default_factory=pd.DataFrame)  # long: step, wall_time, tag, value
    scalars_source: str = ""                    # "scalars.jsonl", "event files" or ""
    ranks: pd.DataFrame = field(default_factory=pd.DataFrame)    # step, wall_time, step_time, loss, tokens, rank, host
    monitor: pd.DataFrame = field(default_factory=pd.DataFrame)  # sampler records: time, host, rank, ...
    files: dict = field(default_factory=dict)   # what this reader read: file (relative to path) -> its sha256

    def series(self, tag: str) -> pd.DataFrame:
        """step, wall_time, value of one scalar tag, by step; a step logged twice (a resumed run) keeps the last."""
        if self.scalars.empty or tag not in set(self.scalars["tag"]):
            return pd.DataFrame(columns=["step", "wall_time", "value"])
        s = self.scalars[self.scalars["tag"] == tag][["step", "wall_time", "value"]]
        s = s.sort_values("wall_time", kind="stable").drop_duplicates("step", keep="last")
        return s.sort_values("step").reset_index(drop=True)

    def has(self, tag: str) -> bool:
        return not self.series(tag).empty

    @property
    def n_ranks(self) -> int:
        if not self.ranks.empty:
            return int(self.ranks["rank"].nunique())
        return int(self.status.get("ranks") or 1)

    @property
    def hosts(self) -> list[str]:
        for df in (self.ranks, self.monitor):
            if not df.empty and "host" in df:
                return sorted(df["host"].astype(str).unique())
        return []

    def wall_clock(self) -> tuple[float | None, float | None]:
        """(start, end) of training in epoch seconds: the first step's start to the last record written."""
        starts, ends = [], []
        if not self.ranks.empty:
            first = self.ranks.sort_values("wall_time").iloc[0]
            st = first.get("step_time")
            starts.append(float(first["wall_time"]) - (float(st) if pd.notna(st) else 0.0))
            ends.append(float(self.ranks["wall_time"].max()))
        if not self.scalars.empty:
            starts.append(float(self.scalars["wall_time"].min()))
            ends.append(float(self.scalars["wall_time"].max()))
        if not starts:
            return None, None
        return min(starts), max(ends)

    @property
    def last_step(self) -> int | None:
        steps = []
        if not self.ranks.empty:
            steps.append(int(self.ranks["step"].max()))
        if not self.scalars.empty:
            steps.append(int(self.scalars["step"].max()))
        if self.status.get("step") is not None:
            steps.append(int(self.status["step"]))
        return max(steps) if steps else None


# --- the entry points ------------------------------------------------------------------------------

def load_run(path: str | Path, name: str | None = None) -> Run:
    path = Path(path)
    if not path.exists():
        raise AnalysisError(f"{path}: no such directory; pass a run directory (the --logdir of `nmtkit train`)")
    if not path.is_dir():
        raise AnalysisError(f"{path}: not a directory; pass a run directory (the --logdir of `nmtkit train`)")
    markers = [runs.CONFIG, runs.SCALARS, runs.STATUS, runs.RANKS_DIR, runs.MONITOR_DIR, runs.CHECKPOINTS]
    if not any((path / m).exists() for m in markers) and not any(path.glob(EVENTS_GLOB)):
        raise AnalysisError(f"{path}: does not look like an nmtkit run directory (none of {', '.join(markers)} or "
                            f"TensorBoard event files in it); pass the --logdir of a training run")
    run = Run(path=path, name=name or path.resolve().name)
    run.config, run.config_problem = _load_config(path)
    try:
        run.status = runs.read_status(path)
        run.data_stats = DataStats.load(path / runs.DATA_STATS) if (path / runs.DATA_STATS).exists() else None
    except (RunDirError, DataError) as e:  # one line naming the file (and the line of bad JSON)
        raise AnalysisError(str(e)) from None
    run.scalars, run.scalars_source = load_scalars(path)
    run.ranks = load_rank_logs(path)
    run.monitor = load_monitor(path)
    run.files = digests(path)
    if run.scalars.empty and run.ranks.empty and run.monitor.empty:
        raise AnalysisError(f"{path}: a run directory with no logs yet (no {runs.SCALARS}, event files, "
                            f"{runs.RANKS_DIR}/ or {runs.MONITOR_DIR}/ records); let training run a few steps first")
    return run


def load_runs(paths) -> list[Run]:
    """Several runs side by side (e.g. the baseline and the Horovod run); names made unique."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    loaded, seen = [], {}
    for p in paths:
        run = load_run(p)
        if run.name in seen:
            seen[run.name] += 1
            run.name = f"{run.name}-{seen[run.name]}"
        else:
            seen[run.name] = 1
        loaded.append(run)
    if not loaded:
        raise AnalysisError("no run directories given")
    return loaded


def digests(path: str | Path) -> dict:
    """file (relative to the run directory) -> sha256 of every file the kit's readers read of run `path`: its
    config, run.json, data_stats.json, manifest.json (the lab's and reference's readers), scalars (scalars.jsonl,
    else its event files), rank logs and monitor logs. A run's identity: a graded figure carries it (nmtkit.course.
    figures), and the grader compares it with its own copy of the run (nmtkit.course.instructor.pinning)."""
    import hashlib
    path = Path(path)
    jsonl = path / runs.SCALARS
    found = [path / n for n in (runs.CONFIG, runs.STATUS, runs.DATA_STATS, "manifest.json", runs.SCALARS)]
    if not jsonl.is_file() or jsonl.stat().st_size == 0:  # load_scalars then reads the event files
        found += [p for p in path.rglob(EVENTS_GLOB) if runs.MONITOR_DIR not in p.relative_to(path).parts]
    found += sorted((path / runs.RANKS_DIR).glob("rank*.jsonl")) + sorted((path / runs.MONITOR_DIR).glob("*.jsonl"))
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(set(found))
            if f.is_file()}


# --- pieces ------------------------------------------------------------------------------------------

def _load_config(path: Path) -> tuple[Config | None, str]:
    if not (path / runs.CONFIG).exists():
        return None, f"no {runs.CONFIG} in the run directory"
    try:
        return runs.load_config(path), ""
    except ConfigError as e:
        return None, str(e)


def _jsonl_frame(path: Path) -> pd.DataFrame:
    try:
        return pd.DataFrame.from_records(list(read_jsonl(path)))
    except ValueError as e:  # read_jsonl names the file and line
        raise AnalysisError(str(e)) from None


def load_scalars(run_dir: str | Path) -> tuple[pd.DataFrame, str]:
    """The training scalars as a long frame (step, wall_time, tag, value): scalars.jsonl when present (fast),
    else the TensorBoard event files (outside monitor/)."""
    run_dir = Path(run_dir)
    cols = ["step", "wall_time", "tag", "value"]
    jsonl = run_dir / runs.SCALARS
    if jsonl.exists():
        df = _jsonl_frame(jsonl)
        if not df.empty:
            missing = [c for c in cols if c not in df]
            if missing:
                raise AnalysisError(f"{jsonl}: records lack {missing}; expected "
                                    f"{{\"step\",\"wall_time\",\"tag\",\"value\"}}")
            df = df[cols].astype({"step": "int64", "wall_time": "float64", "value": "float64"})
            return df, runs.SCALARS
    event_dirs = sorted({p.parent for p in run_dir.rglob(EVENTS_GLOB)
                         if runs.MONITOR_DIR not in p.relative_to(run_dir).parts})
    frames = [read_events(d) for d in event_dirs]
    frames = [f for f in frames if not f.empty]
    if frames:
        return pd.concat(frames, ignore_index=True), "event files"
    return pd.DataFrame(columns=cols), ""


def read_events(logdir: str | Path) -> pd.DataFrame:
    """All scalar events of one TensorBoard directory (TF2 tensor summaries and classic scalars), none sampled away."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util
    acc = EventAccumulator(str(logdir), size_guidance={"tensors": 0, "scalars": 0})
    try:
        acc.Reload()
    except Exception as e:  # noqa: BLE001  a truncated or foreign file
        raise AnalysisError(f"{logdir}: cannot read TensorBoard event files ({e})") from None
    rows = []
    tags = acc.Tags()
    for tag in tags.get("tensors", []):
        for ev in acc.Tensors(tag):
            arr = tensor_util.make_ndarray(ev.tensor_proto)
            if arr.size == 1 and arr.dtype.kind in "fiub":  # scalars only; text/histograms are not ours
                rows.append((ev.step, ev.wall_time, tag, float(arr.reshape(()))))
    for tag in tags.get("scalars", []):
        rows.extend((ev.step, ev.wall_time, tag, float(ev.value)) for ev in acc.Scalars(tag))
    return pd.DataFrame(rows, columns=["step", "wall_time", "tag", "value"])


def load_rank_logs(run_dir: str | Path) -> pd.DataFrame:
    """Every rank's per-step records (ranks/rank<R>.jsonl), one frame, sorted by rank and wall time."""
    d = Path(run_dir) / runs.RANKS_DIR
    frames = []
    for p in sorted(d.glob("rank*.jsonl")) if d.is_dir() else []:
        df = _jsonl_frame(p)
        if df.empty:
            continue
        if "rank" not in df:
            m = re.fullmatch(r"rank(\d+)\.jsonl", p.name)
            df["rank"] = int(m.group(1)) if m else 0
        for need in ("step", "wall_time"):
            if need not in df:
                raise AnalysisError(f"{p}: records lack {need!r}; expected "
                                    f"{{\"step\",\"wall_time\",\"step_time\",\"loss\",\"tokens\",\"rank\",\"host\"}}")
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=["step", "wall_time", "step_time", "loss", "tokens", "rank", "host"])
    df = pd.concat(frames, ignore_index=True)
    if "host" not in df:
        df["host"] = "unknown"
    return df.sort_values(["rank", "wall_time"], kind="stable").reset_index(drop=True)


def load_monitor(run_dir: str | Path) -> pd.DataFrame:
    """Every sampler's records (monitor/*.jsonl), one frame with host and rank columns."""
    d = Path(run_dir) / runs.MONITOR_DIR
    frames = [_jsonl_frame(p) for p in sorted(d.glob("*.jsonl"))] if d.is_dir() else []
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=["time", "host", "rank"])
    df = pd.concat(frames, ignore_index=True)
    df = df.rename(columns=monitor.renamed_columns(df.columns))  # a log from before the *_mib names
    return df.sort_values(["host", "rank", "time"], kind="stable").reset_index(drop=True)


# --- checkpoints -------------------------------------------------------------------------------------

@dataclass
class CheckpointInfo:
    directory: Path
    prefix: Path | None            # e.g. checkpoints/ckpt-3 (the latest), None when there is none
    files: list[tuple[str, int]]   # (name relative to the run, bytes) of the latest checkpoint, plus the index file
    total_bytes: int
    weights_bytes: int | None = None
    optimizer_bytes: int | None = None
    other_bytes: int | None = None
    weights_params: int | None = None
    optimizer_params: int | None = None
    n_variables: int | None = None
    problem: str = ""


def latest_checkpoint_prefix(ckpt_dir: Path) -> Path | None:
    """The latest prefix, from the `checkpoint` state file if it is there, else the highest ckpt-N.index."""
    state = ckpt_dir / "checkpoint"
    if state.exists():
        m = re.search(r'^model_checkpoint_path:\s*"([^"]+)"', state.read_text(), re.M)
        if m:
            p = Path(m.group(1))
            p = p if p.is_absolute() else ckpt_dir / p
            if p.with_name(p.name + ".index").exists():
                return p
            # copied from another machine with absolute paths: look beside the state file
            p = ckpt_dir / p.name
            if p.with_name(p.name + ".index").exists():
                return p
    found = []
    for idx in ckpt_dir.glob("*.index"):
        m = re.search(r"-(\d+)$", idx.stem)
        found.append((int(m.group(1)) if m else -1, idx.with_suffix("")))
    return max(found)[1] if found else None


def variable_kind(name: str) -> str:
    """'optimizer' (Adam's m/v slots, its step counter), 'meta' (the object graph) or 'weights'."""
    if name.startswith("_CHECKPOINTABLE_OBJECT_GRAPH"):
        return "meta"
    if "optimizer" in name.lower() or "OPTIMIZER_SLOT" in name:
        return "optimizer"
    if name.split("/")[0] in ("save_counter", "step", "global_step"):
        return "meta"
    return "weights"


def checkpoint_info(run_dir: str | Path, with_variables: bool = True) -> CheckpointInfo:
    """The files of the latest checkpoint and, through tf.train (not nmtkit.training), the weights/optimizer split."""
    run_dir = Path(run_dir)
    ckpt_dir = run_dir / runs.CHECKPOINTS
    prefix = latest_checkpoint_prefix(ckpt_dir) if ckpt_dir.is_dir() else None
    if prefix is None and (ckpt_dir / CHECKPOINT_LISTING).is_file():
        return read_checkpoint_listing(run_dir, with_variables)
    if prefix is None:
        return CheckpointInfo(ckpt_dir, None, [], 0, problem=f"no checkpoint in {runs.CHECKPOINTS}/ "
                              f"(training saves one every train.ckpt_every steps and at the end)")
    members = sorted(p for p in ckpt_dir.iterdir() if p.is_file() and p.name.startswith(prefix.name + "."))
    if (ckpt_dir / "checkpoint").exists():
        members = [ckpt_dir / "checkpoint"] + members
    files = [(str(p.relative_to(run_dir)), p.stat().st_size) for p in members]
    info = CheckpointInfo(ckpt_dir, prefix, files, sum(b for _, b in files))
    if with_variables:
        try:
            _split_variables(info)
        except Exception as e:  # noqa: BLE001  TensorFlow missing, or a foreign checkpoint
            info.problem = f"could not list the checkpoint's variables ({type(e).__name__}: {e})"
    return info


def _split_variables(info: CheckpointInfo) -> None:
    import numpy as np

    from nmtkit.keras2 import import_tf
    tf = import_tf()
    reader = tf.train.load_checkpoint(str(info.prefix))
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    size = {"weights": 0, "optimizer": 0, "meta": 0}
    count = {"weights": 0, "optimizer": 0, "meta": 0}
    for name, shape in shapes.items():
        kind = variable_kind(name)
        n = int(np.prod(shape)) if shape else 1
        count[kind] += n
        dt = dtypes.get(name)
        size[kind] += n * (dt.size if dt is not None and dt != tf.string else 0)
    info.weights_bytes, info.optimizer_bytes, info.other_bytes = size["weights"], size["optimizer"], size["meta"]
    info.weights_params, info.optimizer_params = count["weights"], count["optimizer"]
    info.n_variables = len(shapes)


LISTED = ("weights_bytes", "optimizer_bytes", "other_bytes", "weights_params", "optimizer_params", "n_variables")


def write_checkpoint_listing(info: CheckpointInfo, run_dir: str | Path, dest_run: str | Path) -> Path:
    """<dest_run>/checkpoints/listing.json: `info` (of a checkpoint of `run_dir`) with paths relative to the run."""
    run_dir = Path(run_dir)
    rec = {"prefix": str(info.prefix.relative_to(run_dir)), "files": [[f, b] for f, b in info.files],
           "total_bytes": info.total_bytes, **{k: getattr(info, k) for k in LISTED}}
    return atomic_write_json(Path(dest_run) / runs.CHECKPOINTS / CHECKPOINT_LISTING, rec)


def read_checkpoint_listing(run_dir: str | Path, with_variables: bool = True) -> CheckpointInfo:
    """The CheckpointInfo a listing records (no TensorFlow needed: the variables were counted when it was made)."""
    run_dir = Path(run_dir)
    path = run_dir / runs.CHECKPOINTS / CHECKPOINT_LISTING
    rec = read_json(path, AnalysisError, hint="a checkpoint's listing, written by write_checkpoint_listing")
    try:
        info = CheckpointInfo(path.parent, run_dir / rec["prefix"], [(str(f), int(b)) for f, b in rec["files"]],
                              int(rec["total_bytes"]))
        if with_variables:
            for k in LISTED:
                setattr(info, k, None if rec.get(k) is None else int(rec[k]))
    except (KeyError, TypeError, ValueError) as e:
        raise AnalysisError(f"{path}: not a checkpoint listing ({type(e).__name__}: {e})") from None
    return info
