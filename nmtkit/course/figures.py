"""The figures file of a graded check: what a check cell's call would have read (its arguments, by name), written
as data where grading runs the notebook, and read back where grading decides. The one owner of the format: the
sandbox's check cells write it (`record`), the instructor's grader reads it (`decode`).

A graded notebook's check cell `nk.check(rep, "q5", run=ref, bound_mb=bound_mb, ...)` becomes (nmtkit.course.
instructor.grade) a `record("05-q5-check", "check", {"rep": lambda: rep, ...})` call: each argument is evaluated on
its own, so one missing figure (a NameError) spoils only its own name; the values go to
$NMTKIT_FIGURES_DIR/<grade id>.json and the cell prints no verdict, no score and no direction: nothing in the
notebook's process decides anything. Whatever a file says is the student's claim; the grader checks it.

Forms: JSON's own values; numpy scalars and arrays as numbers and lists; tuples and sets as lists; and tagged
objects: {"path": p}, {"frame": ..., "attrs": ...} (a pandas table), {"series": ...}, {"run": p, "name": n, "files":
{file: sha256}} (a run of nmtkit.analysis, with what its reader read: nmtkit.analysis.logs.digests), {"runs": [...]}
(an analysis), {"config": {...}}; {"error": "NameError: ..."} for an argument that could not be evaluated,
{"unsupported": type} for a value of no form a check reads. A run's files (and a lab table's attrs["files"]) are
its identity, the kit's reader's record: the grader compares them with its own copy (nmtkit.course.instructor.
pinning). TensorFlow-free.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from nmtkit.errors import CourseError

DIR_ENV = "NMTKIT_FIGURES_DIR"
MAX_BYTES = 2_000_000  # a check reads a few numbers and small tables: a figures file above this is not one
PATH_ARGS = {"data_dir"}  # arguments read as directories: resolved where they are evaluated



def encode(value, depth: int = 0):
    """`value` as JSON-able data (see the module's forms)."""
    import numpy as np
    import pandas as pd
    if depth > 20:
        return {"unsupported": "nested too deep"}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 100_000 else {"unsupported": "an array too large"}
    if isinstance(value, os.PathLike):
        return {"path": str(Path(value).resolve())}
    if isinstance(value, pd.DataFrame):
        return {"frame": json.loads(value.to_json(orient="split", default_handler=str)),
                "index_name": value.index.name,
                "attrs": {k: [{"path": str(Path(p).resolve())} for p in v] if k == "paths" else encode(v, depth + 1)
                          for k, v in value.attrs.items() if k in ("paths", "files")}}
    if isinstance(value, pd.Series):
        return {"series": {"index": [encode(i, depth + 1) for i in value.index],
                           "data": [encode(v, depth + 1) for v in value.tolist()], "name": encode(value.name)}}
    if isinstance(value, dict):
        return {str(k): encode(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((encode(v, depth + 1) for v in value), key=str)
    kind = type(value).__name__
    if kind == "Run" and hasattr(value, "path"):
        return {"run": str(Path(value.path).resolve()), "name": str(value.name),
                "files": encode(getattr(value, "files", None), depth + 1)}
    if hasattr(value, "runs") and hasattr(value, "found"):  # nmtkit.notebook.Analysis
        return {"runs": [encode(r, depth + 1) for r in value.runs]}
    if hasattr(value, "to_dict") and kind == "Config":
        return {"config": value.to_dict()}
    return {"unsupported": kind}


def record(grade_id: str, function: str, thunks: dict) -> Path | None:
    """Evaluate each argument of a check cell's call and write them, by name, as the figures file of `grade_id`
    (into $NMTKIT_FIGURES_DIR); one neutral line printed. Never raises on the student's values."""
    args = {}
    for name, thunk in thunks.items():
        try:
            value = thunk()
            args[name] = {"path": str(Path(value).resolve())} if name in PATH_ARGS and isinstance(
                value, (str, os.PathLike)) else encode(value)
        except Exception as e:  # noqa: BLE001  the student's error is this argument's value
            args[name] = {"error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}
    text = json.dumps({"grade_id": grade_id, "function": function, "args": args}, allow_nan=True)
    if len(text) > MAX_BYTES:
        text = json.dumps({"grade_id": grade_id, "function": function,
                           "args": {n: {"error": "too large to be a figure"} for n in args}})
    where = os.environ.get(DIR_ENV)
    if not where:
        print(f"{grade_id}: figures not recorded ({DIR_ENV} is not set: this cell is for grading)")
        return None
    from nmtkit.files import atomic_write_text
    path = atomic_write_text(Path(where) / f"{grade_id}.json", text + "\n")
    print(f"{grade_id}: your figures are recorded for grading")
    return path


def read(path: str | os.PathLike) -> dict:
    """A figures file: {"grade_id", "function", "args"}; CourseError naming the file if it is not one."""
    path = Path(path)
    if path.stat().st_size > MAX_BYTES + 100:
        raise CourseError(f"{path.name}: {path.stat().st_size:,} bytes, too large to be a figures file")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CourseError(f"{path.name}: not a figures file ({e})") from None
    if not (isinstance(data, dict) and isinstance(data.get("args"), dict) and isinstance(data.get("function"), str)):
        raise CourseError(f"{path.name}: not a figures file (no function and args)")
    return data


class Decoder:
    """Figures back into the objects a check reads, on the grader's side. `roots` maps each directory as the
    notebook saw it to where the grader holds the same files; a path outside them is not a figure's."""

    def __init__(self, roots: dict):
        self.roots = {str(k).rstrip("/"): Path(v) for k, v in roots.items()}
        self._runs: dict = {}

    def path(self, p) -> Path:
        p = str(p)
        for inside, outside in sorted(self.roots.items(), key=lambda kv: -len(kv[0])):
            if p == inside or p.startswith(inside + "/"):
                host = (outside / p[len(inside):].lstrip("/")).resolve()
                if host != outside.resolve() and outside.resolve() not in host.parents:  # a link out of it
                    break
                return host
        raise CourseError(f"{p}: outside the files grading gave the notebook")

    def run(self, p, name: str, files=None):
        """The run from the grader's copy; `files` (what the notebook's reader read of it) kept as its `claimed`."""
        import dataclasses

        from nmtkit.analysis import load_run
        key = (str(self.path(p)), name)
        if key not in self._runs:
            self._runs[key] = load_run(key[0], name=name)
        run = dataclasses.replace(self._runs[key])
        run.claimed = files if isinstance(files, dict) else None
        return run

    def __call__(self, v):
        import pandas as pd
        if isinstance(v, list):
            return [self(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "error" in v and len(v) == 1:
            raise CourseError(str(v["error"]))
        if "unsupported" in v and len(v) == 1:
            raise CourseError(f"a {v['unsupported']}, not a figure a check reads")
        if set(v) == {"path"}:
            return self.path(v["path"])
        if {"run", "name"} <= set(v) <= {"run", "name", "files"}:
            return self.run(v["run"], str(v["name"]), v.get("files"))
        if set(v) == {"runs"}:
            from types import SimpleNamespace
            return SimpleNamespace(runs=[self(r) for r in v["runs"]])
        if set(v) == {"config"}:
            from nmtkit.config import Config
            return Config.from_dict(v["config"], where="figures")
        if set(v) == {"frame", "index_name", "attrs"}:
            f = v["frame"]
            frame = pd.DataFrame(f.get("data"), index=f.get("index"), columns=f.get("columns"))
            frame.index.name = v["index_name"]
            if "paths" in v["attrs"]:
                frame.attrs["paths"] = [str(self(p)) for p in v["attrs"]["paths"]]
            if isinstance(v["attrs"].get("files"), list):
                frame.attrs["files"] = v["attrs"]["files"]
            return frame
        if set(v) == {"series"}:
            s = v["series"]
            return pd.Series([self(x) for x in s["data"]], index=[self(i) for i in s["index"]], name=s["name"])
        return {k: self(x) for k, x in v.items()}
