"""The course's variants: which shipped runs a student's graded figures come from.

    practice      the runs at nmtkit/reference/ itself (rehearsal-200mbit, lab-*, ablation-warmup-*): its expected
                  figures ship in the students' kit, so there its checks say right or wrong, and how far off
    variant-<k>   nmtkit/reference/variant-<k>/: graded; variant.json says what was recorded and how (another model
                  shape, other link rates, another warm-up, another NIC name); a student's is chosen by their id and
                  its answers stay in the instructor's kit

Every reader of a shipped run (nk.reference_run(), nk.lab_runs(), nk.warmup_runs(), the grader) asks `run_dir` for
it, so a notebook, `nmtkit grade` and the class report read the same variant for the same student id. Names a
variant does not hold (the warm-up ablation's default run, say) are the practice variant's, shared by all.

    from nmtkit.analysis import variants
    variants.variant_of("alice")        # 'variant-3': the same for that id everywhere
    variants.active()                   # $NMTKIT_VARIANT, else the student id's (env, hub user, stored), else practice

variant.json is owned here: the recorder (tools.rehearsal.variant) writes it with `write_info`, readers use `info`.
TensorFlow-free.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from nmtkit.errors import AnalysisError
from nmtkit.files import atomic_write_json, atomic_write_text, read_json

ROOT = Path(__file__).resolve().parents[1] / "reference"
PRACTICE = "practice"
PREFIX = "variant-"
FILE = "variant.json"
ENV_VARIANT = "NMTKIT_VARIANT"        # a variant by name: the course's tests, or an instructor looking at one
ENV_STUDENT = "NMTKIT_STUDENT_ID"     # the student id: nmtkit grade's sandbox sets it from the submission
HUB_USER = "JUPYTERHUB_USER"          # a hub's user name is the student id there
ID_FILE = ".nmtkit-student-id"        # in the workspace: the id the notebook asked for once
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
# what the practice variant ships: its reference run and its warm-up ablation pair (default first)
PRACTICE_INFO = {"name": PRACTICE, "reference": "rehearsal-200mbit",
                 "ablation": ["ablation-warmup-100", "ablation-warmup-25"],
                 "what": "the kit's own reference runs: expected figures ship in the students' kit"}


def graded() -> list[str]:
    """The graded variants installed, in order (variant-1, variant-2, ..., variant-10)."""
    found = [d.name for d in ROOT.glob(PREFIX + "*") if (d / FILE).is_file()]
    return sorted(found, key=lambda n: (len(n), n))


def names() -> list[str]:
    return [PRACTICE, *graded()]


def variant_of(student_id: str) -> str:
    """The graded variant of `student_id` (sha256 of the id, modulo the number of graded variants): the same id gets
    the same variant in the notebook, in `nmtkit grade` and in the class report; practice when none is installed."""
    sid, pool = check_id(student_id), graded()
    if not pool:
        return PRACTICE
    h = int.from_bytes(hashlib.sha256(sid.encode()).digest()[:8], "big")
    return pool[h % len(pool)]


def check_id(student_id) -> str:
    sid = str(student_id or "").strip()
    if not _ID.match(sid):
        raise AnalysisError(f"student id {student_id!r}: use the id your course gave you (letters, digits and . _ @ "
                            f"+ -, at most 128 characters, no spaces)")
    return sid


def directory(name: str) -> Path:
    """Where variant `name`'s runs are (practice: nmtkit/reference/ itself)."""
    if name == PRACTICE:
        return ROOT
    d = ROOT / name
    if not name.startswith(PREFIX) or not (d / FILE).is_file():
        raise AnalysisError(f"variant {name!r} is not installed: choose one of {', '.join(names())} (${ENV_VARIANT})")
    return d


def info(name: str) -> dict:
    """variant.json of `name`: reference (its reference run's name), ablation ([default run, short run]), shape,
    rates, iface, how it was made."""
    if name == PRACTICE:
        return dict(PRACTICE_INFO)
    return read_json(directory(name) / FILE, AnalysisError, hint="written by python -m tools.rehearsal.variant")


def write_info(dest: Path, record: dict) -> Path:
    """Write variant.json into the variant's directory `dest` (atomically): the recorder's one writer."""
    missing = [k for k in ("name", "reference", "ablation") if k not in record]
    if missing:
        raise AnalysisError(f"{dest / FILE}: a variant record needs {', '.join(missing)}")
    return atomic_write_json(Path(dest) / FILE, record)


def stored_id(ws: Path | None = None) -> str | None:
    from nmtkit.runs import workspace
    p = Path(ws or workspace()) / ID_FILE
    return p.read_text().strip() or None if p.is_file() else None


def store_id(student_id: str, ws: Path | None = None) -> Path:
    """Keep the id beside the work (the workspace), so the notebook asks once."""
    from nmtkit.runs import workspace
    return atomic_write_text(Path(ws or workspace()) / ID_FILE, check_id(student_id) + "\n")


def student_id(ws: Path | None = None) -> str | None:
    """The student id: $NMTKIT_STUDENT_ID (the grader's sandbox), else the hub's user name, else the one stored in the
    workspace; None when none is known."""
    return os.environ.get(ENV_STUDENT) or os.environ.get(HUB_USER) or stored_id(ws)


def active(ws: Path | None = None) -> str:
    """The variant this process reads: $NMTKIT_VARIANT by name, else the student id's, else practice."""
    name = os.environ.get(ENV_VARIANT, "").strip()
    if name:
        directory(name)  # one clear line when it is not installed
        return name
    sid = student_id(ws)
    return variant_of(sid) if sid else PRACTICE


def run_dir(run: str, name: str | None = None) -> Path:
    """The shipped run `run` of variant `name` (default: the active one); a name the variant does not hold is the
    practice variant's (shared by every variant)."""
    d = directory(name or active()) / run
    return d if d.is_dir() else ROOT / run
