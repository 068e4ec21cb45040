"""The frozen reference run: a rehearsal run over a shaped link, trimmed and shipped in the package.

    python -m tools.rehearsal.reference --out runs/reference             # rehearse at 200mbit, then freeze
    python -m tools.rehearsal.reference --freeze-only --out runs/reference  # freeze an earlier rehearsal again

The course runs on one CPU over loopback, where questions 4, 5 and 11 cannot show a network. The rehearsal
(docs/rehearsal.md) gives two SSH-reached hosts, 2 ranks each, over a `tc`-shaped data link; this module trains
one longer run there (with evaluations, so every question has its inputs), then `freeze()` copies the files the
analysis reads into `nmtkit/reference/<name>/` (nmtkit.analysis.reference finds it): the logs, a listing of the
checkpoint in place of its data (megabytes), and a manifest saying how, when, where and at which rate it was made.
Absolute paths of the making machine are replaced by placeholders; the whole stays under `MAX_BYTES`.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from nmtkit import config, runs
from nmtkit.analysis import logs
from nmtkit.analysis import reference as shipped
from nmtkit.files import atomic_write_json, atomic_write_text, read_json, sha256_file
from tools.rehearsal.netns import RehearsalError
from tools.rehearsal.run import CODE_ROOT, TINY, Options, Rehearsal, rehearse

MAX_BYTES = 2_000_000
# The reference run's shape on top of the rehearsal's TINY: evaluations every 40 steps (questions 2, 3 need 4+),
# a warmup short enough that the decay shows (question 6), decoded output long enough to score.
REFERENCE = {"eval.every": 40, "eval.dev_sentences": 20, "eval.test_sentences": 20, "eval.max_extra_len": 10,
             "train.warmup_steps": 80, "train.log_every": 2, "train.ckpt_every": 0}
STEPS = 480
RATE = "200mbit"
# What is copied: the files the analysis reads (nmtkit.runs' names); the checkpoint's data is replaced by its
# listing, TensorBoard events by scalars.jsonl (the same values).
COPY = (runs.STATUS, runs.CONFIG, runs.DATA_STATS, runs.SCALARS, runs.BEST_JSON)
COPY_GLOBS = (f"{runs.RANKS_DIR}/rank*.jsonl", f"{runs.MONITOR_DIR}/*.jsonl", f"{runs.TRANSLATIONS}/*")


class ReferenceRehearsal(Rehearsal):
    """The rehearsal with the reference run's config (evaluations, short warmup) and a longer job timeout."""

    def cfg(self, data: Path, steps: int, compression: str = "none"):
        return config.load("tiny", dict(TINY, **REFERENCE, **{"data.dir": str(data), "train.steps": steps,
                                                                "train.compression": compression}))

    job_timeout = 3600  # the reference run's 480 steps on busy cores


def make(out: Path, rate: str = RATE, steps: int = STEPS) -> dict:
    """Rehearse one run on 2 hosts x 2 ranks at `rate` (no compression runs, no kill); report.json in `out`."""
    opts = Options(out=Path(out), rate=rate, measure_rates=(rate,), steps=steps, kill=False, compressions=("none",))
    return rehearse(opts, ReferenceRehearsal, {"reference": {"rate": rate, "steps": steps,
                                                             "overrides": dict(TINY, **REFERENCE)}})


def _scrub(text: str, places: dict[str, str]) -> str:
    for path, placeholder in places.items():
        text = text.replace(path, placeholder)
    return text


def _machine() -> dict:
    """What the reference run was made on (no host names or paths: the CPU, the kernel, the load)."""
    model = ""
    try:
        model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": model, "system": f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}


def freeze(rehearsal_out: Path, dest: Path, *, command: str = "") -> Path:
    """Copy the rehearsal's run (`<rehearsal_out>/run`) into `dest`, trimmed: see the module docstring. Built in a
    temporary sibling directory and renamed into place, so a failed freeze leaves `dest` as it was."""
    rehearsal_out, dest = Path(rehearsal_out).resolve(), Path(dest).resolve()
    report = read_json(rehearsal_out / "report.json", RehearsalError, hint="written by the rehearsal")
    if not report.get("ok"):
        raise RehearsalError(f"{rehearsal_out}/report.md: the rehearsal was not green; freeze only a green one")
    return staged(dest, lambda stage: _write(rehearsal_out, stage, report, command))


def copy_run(src: Path, dest: Path, rehearsal_out: Path, keep=lambda rel: True) -> None:
    """The files the analysis reads from the run `src` into `dest` (those `keep(relative path)` accepts), machine
    paths replaced by placeholders, and the checkpoint's listing in place of its data."""
    places = {str(rehearsal_out): "<rehearsal>", str(CODE_ROOT): "<repo>", sys.prefix: "<venv>"}
    files = [src / f for f in COPY if (src / f).is_file()]
    files += [p for g in COPY_GLOBS for p in sorted(src.glob(g)) if p.is_file()]
    for p in (p for p in files if keep(p.relative_to(src))):
        rel = p.relative_to(src)
        text = _scrub(p.read_text(encoding="utf-8"), places)
        bad = [f for f in shipped.FORBIDDEN if f in text]
        if bad:
            raise RehearsalError(f"{rel}: still names a path under {bad} after the placeholders; add one to freeze()")
        atomic_write_text(dest / rel, text)
    info = logs.checkpoint_info(src, with_variables=True)
    if info.prefix is None or info.weights_bytes is None:
        raise RehearsalError(f"{src}: no readable checkpoint to list ({info.problem})")
    logs.write_checkpoint_listing(info, src, dest)


def file_list(dest: Path) -> dict:
    """Each frozen file's size and sha256 (the manifest's "files")."""
    return {str(p.relative_to(dest)): {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
            for p in sorted(p for p in dest.rglob("*") if p.is_file())}


def staged(dest: Path, write) -> Path:
    """Build `dest` in a temporary sibling with `write(stage) -> total bytes`, then rename it into place: a failed
    freeze leaves `dest` as it was. An existing `dest` is replaced only when it holds our manifest."""
    dest = Path(dest).resolve()
    if dest.exists() and not (dest / shipped.MANIFEST).is_file():
        raise RehearsalError(f"{dest}: exists and holds no {shipped.MANIFEST}; not ours to replace")
    dest.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.partial-"))
    try:
        total = write(stage)
        if total > MAX_BYTES:
            raise RehearsalError(f"{dest.name}: {total:,} B frozen, over the {MAX_BYTES:,} B budget; "
                                 "make a shorter run")
        swap_in(stage, dest)
    finally:
        if stage.exists():
            shutil.rmtree(stage)
    return dest


def swap_in(stage: Path, dest: Path) -> None:
    """Rename the finished `stage` to `dest`; an earlier `dest` (the caller checked it is ours) is moved aside first
    and removed only once the new one is in place."""
    old = dest.with_name(f".{dest.name}.old") if dest.exists() else None
    if old:
        dest.rename(old)
    stage.rename(dest)
    if old:
        shutil.rmtree(old)


def _write(rehearsal_out: Path, dest: Path, report: dict, command: str) -> int:
    """The frozen files into `dest` (empty); returns their total size."""
    src = rehearsal_out / "run"
    copy_run(src, dest, rehearsal_out)
    atomic_write_text(dest / "README.md", readme(report, command))
    traffic, link = report.get("traffic") or {}, report.get("link_engines") or {}
    made = runs.read_status(src).get("updated")
    manifest = {
        "what": "a frozen reference run: the rehearsal's two SSH-reached hosts (network namespaces on one "
                "machine), 2 ranks each, gradients over a tc-shaped data link; see docs/rehearsal.md",
        "command": command or "python -m tools.rehearsal.reference --out <rehearsal>",
        "made": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(made)) if made else None,
        "machine": _machine(), "load_avg_1m_after": traffic.get("load_avg_1m"),
        "tc_rate": (report.get("reference") or {}).get("rate"),
        "hosts": [h["name"] for h in report.get("hosts", [])],
        "ranks": [{k: r[k] for k in ("rank", "host", "local_rank")} for r in report.get("ranks", [])],
        "link_between_namespaces": report.get("link"),
        "link_by_preflight": {k: link.get(k) for k in ("tc_rate", "measured_mbit_s", "from", "to", "at")},
        "bytes_per_step_by_counters": {k: traffic.get(k) for k in (
            "tx_bytes_per_step_per_host", "ring_model_bytes_per_rank", "ratio_to_model", "measured_steps",
            "params", "step_time_s")},
        "rehearsal_seconds": report.get("seconds"), "checks": {k: v["ok"] for k, v in report["checks"].items()},
        "config_overrides": (report.get("reference") or {}).get("overrides"),
        "left_out": "checkpoint data (its listing is checkpoints/listing.json), TensorBoard event files (the same "
                    "scalars are in scalars.jsonl), spm.model/spm.vocab, the data-position checkpoints",
        "files": file_list(dest),
    }
    atomic_write_json(dest / shipped.MANIFEST, manifest)
    return sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())


def readme(report: dict, command: str) -> str:
    """A few lines for people opening the directory; manifest.json holds the same facts and more."""
    t, link = report.get("traffic") or {}, report.get("link_engines") or {}
    rate = (report.get("reference") or {}).get("rate")
    return (f"# The reference run ({rate}, 2 hosts x 2 ranks)\n\n"
            f"A training run on the rehearsal's two SSH-reached hosts (network namespaces on one machine, "
            f"docs/rehearsal.md), 2 ranks each, the gradients over a data link shaped by `tc tbf` to {rate}; "
            f"frozen by `tools.rehearsal.reference` for notebook 05, which analyses it beside the student's run "
            f"(`nmtkit.analysis.reference_run()`).\n\n"
            f"- made with: `{command}`\n"
            f"- link measured by preflight ({link.get('from')} -> {link.get('to')}): {link.get('measured_mbit_s')} "
            f"Mbit/s; recorded in run.json\n"
            f"- bytes sent per host per step on the link, by the rehearsal's own 0.1 s counters: "
            f"{t.get('tx_bytes_per_step_per_host')} (ring model {t.get('ring_model_bytes_per_rank')})\n"
            f"- left out: the checkpoint's data (checkpoints/listing.json lists its files and counts its "
            f"variables), TensorBoard event files (scalars.jsonl has the same values), the tokenizer\n"
            f"- paths of the making machine are replaced by `<rehearsal>`, `<repo>`, `<venv>`\n\n"
            f"manifest.json: when, on what machine, every check of the rehearsal, and each file's sha256.\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.rehearsal.reference", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="the rehearsal's directory (its run is <out>/run)")
    ap.add_argument("--rate", default=RATE, help="tc rate of the data link")
    ap.add_argument("--steps", type=int, default=STEPS, help="training steps")
    ap.add_argument("--dest", type=Path, default=None,
                    help="where the frozen copy goes (default: nmtkit/reference/rehearsal-<rate>)")
    ap.add_argument("--freeze-only", action="store_true", help="freeze an earlier rehearsal in --out")
    a = ap.parse_args(argv)
    if not a.freeze_only:
        from tools.rehearsal.netns import unavailable
        why = unavailable()
        if why:
            print(f"reference run not made: {why}", file=sys.stderr)
            return 1
        r = make(a.out, a.rate, a.steps)
        print(f"rehearsal {'green' if r['ok'] else 'RED'} in {r['seconds']} s: {a.out / 'report.md'}")
        if not r["ok"]:
            return 1
    cmd = f"python -m tools.rehearsal.reference --out <rehearsal> --rate {a.rate} --steps {a.steps}"
    dest = freeze(a.out, a.dest or shipped.default_dir(f"rehearsal-{a.rate}"), command=cmd)
    print(f"frozen: {dest} ({sum(p.stat().st_size for p in dest.rglob('*') if p.is_file()):,} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
