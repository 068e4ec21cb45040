"""Question 6's warm-up ablation: two shipped 1-rank runs of the tiny profile that differ only in
train.warmup_steps (made and frozen by `python -m tools.rehearsal.ablation`; each directory's README.md says how).

    abl = nk.analyse(nk.warmup_runs(), ws / "runs" / "ablation")   # notebook 05, question 6

Importable without TensorFlow; it only names the directories.
"""
from __future__ import annotations

from pathlib import Path

from nmtkit.analysis.reference import MANIFEST, default_dir
from nmtkit.errors import AnalysisError

# run name -> train.warmup_steps: the tiny profile's default, and a quarter of it
WARMUP_RUNS = {"ablation-warmup-100": 100, "ablation-warmup-25": 25}
PREFIX = "ablation-warmup-"
DEFAULT, SHORT = WARMUP_RUNS  # question 6 is decided on the short run, against its twin with the default warm-up
EARLY_STEP = 100  # the step question 6 compares the train losses at: where the longer warm-up ends


def warmup_runs() -> list[Path]:
    """The two shipped warm-up ablation runs' directories of the active variant (nmtkit.analysis.variants), the
    default warm-up first.

    Introduced in notebook 05_monitoring_analysis."""
    import nmtkit.analysis.variants as variants
    v = variants.active()
    found = [variants.run_dir(name, v) for name in variants.info(v)["ablation"]]
    lost = [d for d in found if not (d / MANIFEST).is_file()]
    if lost:
        raise AnalysisError(f"{lost[0]}: the warm-up ablation run is not installed (no {MANIFEST}); reinstall "
                            f"nmtkit with its package data (pip install -e .)")
    return found


def twin(run: Path) -> Path | None:
    """The default warm-up's run a short warm-up run was made against: beside it, else the practice variant's
    (shared by every variant); None when `run` is no short ablation run."""
    run = Path(run)
    if not run.name.startswith(PREFIX) or run.name == DEFAULT:
        return None
    found = [d for d in (run.parent / DEFAULT, default_dir(DEFAULT)) if (d / MANIFEST).is_file()]
    return found[0] if found else None
