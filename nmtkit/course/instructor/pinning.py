"""What a graded figure may be about: the grader's decision, never the notebook's. The student id comes from the
submission (nmtkit.course.instructor.grade), its variant from the id; a check's figures then count only on that
variant's shipped runs and on the student's own workspace. A figure about any other runs (the practice variant's,
whose answers ship for feedback, or another student's variant) scores 0 with the reason, whatever the notebook set in
its environment or wrote in its figures files: the grader reads the runs a figure names from its own copy and decides
which runs those may be. Each run a figure names carries what the kit's reader read of it (nmtkit.analysis.logs.
digests: file -> sha256, recorded where the notebook ran); unless that is exactly what the grader's copy holds (the
shipped runs: the instructor's kit; the workspace's: the submitted workspace), the figure scores 0 with the reason.
TensorFlow-free.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from nmtkit.analysis import variants

# questions asked on one shipped run of the student's variant (the check cell's `run`): its reference run, or the
# warm-up ablation's short run
ON_REFERENCE = ("q4", "q5", "q11")
ON_ABLATION = ("q6",)


def run_claims(value, depth: int = 0) -> list[tuple[Path, dict | None]]:
    """(run directory, the files the notebook's reader read of it, None: no record) for each run a decoded figure
    names: a run, an analysis' runs, a lab table's attrs["paths"] (with its attrs["files"])."""
    import pandas as pd
    if depth > 20:
        return []
    if isinstance(value, pd.DataFrame):
        files = value.attrs.get("files")
        files = files if isinstance(files, list) else []
        return [(Path(p), files[i] if i < len(files) and isinstance(files[i], dict) else None)
                for i, p in enumerate(value.attrs.get("paths") or ())]
    if isinstance(value, (list, tuple)):
        return [c for v in value for c in run_claims(v, depth + 1)]
    if isinstance(value, dict):
        return [c for v in value.values() for c in run_claims(v, depth + 1)]
    if hasattr(value, "runs") and not isinstance(value, pd.Series):
        return run_claims(list(value.runs), depth + 1)
    if hasattr(value, "path") and hasattr(value, "name") and not isinstance(value, (str, Path)):
        claimed = getattr(value, "claimed", None)
        return [(Path(value.path), claimed if isinstance(claimed, dict) else None)]
    return []


def run_paths(value) -> list[Path]:
    """The run directories a decoded figure names."""
    return [p for p, _ in run_claims(value)]


def released(path: Path) -> dict:
    """digests(path) of a shipped run as the release ships it (its run.json, scalars and manifest reduced,
    nmtkit.course.instructor.release): what a notebook in the students' image reads of it."""
    import hashlib
    import json

    from nmtkit.analysis.logs import digests
    from nmtkit.course.instructor.release import reduced_manifest, shipped_run
    from nmtkit.errors import CourseError
    from nmtkit.files import read_json
    path, ours = Path(path), digests(path)
    shipped = shipped_run(path)
    if (path / "manifest.json").is_file():  # as release.build writes it (nmtkit.files.atomic_write_json)
        shipped["manifest.json"] = (json.dumps(reduced_manifest(read_json(path / "manifest.json", CourseError),
                                                                shipped_run(path)), indent=2, sort_keys=True)
                                    + "\n").encode()
    return {f: hashlib.sha256(shipped[f]).hexdigest() if f in shipped else h for f, h in ours.items()}


def changed(claimed: dict | None, path: Path, shipped: bool = False) -> str | None:
    """How the files a figure says it was computed from differ from the grader's copy of run `path` (a shipped run:
    as this kit holds it, or as the release ships it), else None."""
    from nmtkit.analysis.logs import digests
    if claimed is None:
        return "no record of the files it was read from (a figure the kit's run reader did not make)"
    ours = digests(path)
    if claimed == ours or (shipped and claimed == released(path)):
        return None
    if shipped:
        ours = released(path)
    diff = sorted(set(claimed) ^ set(ours) | {f for f in set(claimed) & set(ours) if claimed[f] != ours[f]})
    return f"its files differ from the grader's copy ({', '.join(diff[:4])}{', ...' if len(diff) > 4 else ''})"


@dataclasses.dataclass
class Pin:
    variant: str        # the student's, from the id the grader took from the submission
    workspace: Path     # the workspace the grader gave the notebook, as the grader holds it

    def shipped(self) -> set[Path]:
        """The variant's shipped runs: its lab runs, its reference run, its warm-up ablation."""
        from nmtkit.analysis.lab import PREFIX
        v, info = self.variant, variants.info(self.variant)
        found = {d.resolve() for d in variants.directory(v).glob(PREFIX + "*") if d.is_dir()}
        found.add(variants.run_dir(info["reference"], v).resolve())
        found.update(variants.run_dir(n, v).resolve() for n in info["ablation"])
        return found

    def owns(self, path: Path) -> bool:
        p, ws = Path(path).resolve(), Path(self.workspace).resolve()
        return p in self.shipped() or p == ws or ws in p.parents

    def want(self, question: str) -> Path | None:
        """The one run `question` is asked on, for the questions asked on a shipped run; None for the others."""
        info = variants.info(self.variant)
        if question in ON_REFERENCE:
            return variants.run_dir(info["reference"], self.variant).resolve()
        if question in ON_ABLATION:
            return variants.run_dir(info["ablation"][-1], self.variant).resolve()
        return None

    def problem(self, call, values: dict) -> str | None:
        """Why the figures of `call` (decoded `values`) are about runs other than the student's, else None."""
        for name in call.exprs:
            for p, claimed in run_claims(values.get(name)):
                if not self.owns(p):
                    return (f"{name}: about the run {label(p)}, not one of your variant's ({self.variant}) or your "
                            f"workspace's; a figure scores only on your own runs")
                why = changed(claimed, p, Path(p).resolve() in self.shipped())
                if why:
                    return f"{name}: the run {label(p)}: {why}; a figure scores only on the runs as handed out"
        want = self.want(call.question or "")
        if want is not None and "run" in call.exprs:
            got = run_paths(values.get("run"))
            if [p.resolve() for p in got] != [want]:
                return (f"run: {label(got[0]) if got else 'no run'}, not your variant's ({self.variant}) run "
                        f"{want.name} that this question is asked on")
        return None


def label(path: Path) -> str:
    """A run's directory as the instructor reads it: relative to the shipped runs, else its name."""
    p = Path(path).resolve()
    root = variants.ROOT.resolve()
    return str(p.relative_to(root)) if root in p.parents else p.name
