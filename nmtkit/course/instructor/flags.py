"""Hints for the grader, never points: what the kit can see wrong in a written answer.

`flags(text, figures, outputs)` -> [(code, why)] for one answer, beside the student's own figures (the check's,
{name: value}) and the text their notebook printed (the outputs the figures came from):

    contradicts   the words say the opposite of the student's own yes/no figure (trained, overfitting, ...)
    average       reasons from an average rate below the link's ("the average was below capacity, so not the
                  bottleneck": the exchange runs in bursts at the link's rate)
    gpu_memory    reasons from GPU memory at 100% (TensorFlow reserves it; no load figure)
    screenshot    cites a screenshot or a dashboard as the evidence, not a measurement
    assumed_link  reasons from a link nobody measured (an assumed "10 Gbit/s link")
    not_in_run    quotes a figure none of the student's figures or outputs shows (nmtkit.course.numbercheck)

The patterns are the misconceptions of the seeds' answers as the book's rubric (`misconception`) and the issues
quote them; the seeds' verbatim answers are not in the repository.
"""
from __future__ import annotations

import re

from nmtkit.course import numbercheck

# a yes/no figure of a check -> (what says no, what says yes), first match wins; "no" is tried first
POLARITY = {
    "trained": (r"not (yet )?(fully )?trained|still (improving|learning|rising)|keeps? (improving|rising)|"
                r"has not plateau|hasn't plateau|not plateau", r"fully trained|plateau|is trained|converged"),
    "overfitting": (r"(not|no|isn't|never) (yet )?overfit|does not overfit|doesn't overfit|no sign of overfit",
                    r"overfit"),
    "loss_up": (r"(eval|held-out|validation) loss (has )?(not|never) (turned|gone|went) up|still falling",
                r"(eval|held-out|validation) loss (has )?(turned|gone|went|goes) up|rose|rising"),
}
PATTERNS = {
    "average": r"(average|mean)\b[^.]*\b(below|under|less than|lower than|far from)\b[^.]*"
               r"(capacity|link|bandwidth|line rate|the rate)",
    "gpu_memory": r"(gpu )?memory[^.]{0,40}\b100 ?%|100 ?%[^.]{0,30}memory",
    "screenshot": r"screenshot|screen shot|as the (dashboard|picture|image) shows|dashboard shows",
    "assumed_link": r"(assum\w*|typical|standard|nominal|usual|presumably)[^.]{0,40}"
                    r"(link|network|ethernet|bandwidth|Gbit|Gb/s|GbE)|"
                    r"\b\d+(\.\d+)?\s?(Gbit/s|Gb/s|Gbps|GbE|G)\s+(link|network|ethernet|interconnect|connection)",
}
WHY = {
    "contradicts": "the words say {words} but the student's own figure {name} = {value}",
    "average": "reasons from an average below the link's rate (the exchange runs in bursts at the link's rate)",
    "gpu_memory": "reasons from GPU memory at 100% (TensorFlow's reservation, no load figure)",
    "screenshot": "cites a screenshot or dashboard as the evidence",
    "assumed_link": "reasons from an assumed link, not the measured one",
    "not_in_run": "quotes {figs}, which none of the student's figures or outputs shows",
}
# figures an answer may quote without its run: the course's own settings and the homework's figures, derived
# (not the seeds' misreadings: 200 MB/s or 3.5 MB/s stays a figure not in the run); notebook -> figures as written
COURSE = {
    "01_data_prep_bpe.ipynb": ("1.049 MB",),                 # a MiB is 2^20 bytes = 1.048576 x 10^6 bytes
    "02_single_gpu_baseline.ipynb": ("292,000", "300,000"),  # the homework's 300,000 steps, 8,000 of them warm-up
    "04_bottleneck_lab.ipynb": ("256 kB",),                  # the lab's tc shaping: burst 256 kB
    "05_monitoring_analysis.ipynb": ("300,000", "95%",      # the homework's steps; the bootstrap's interval
                                     "60.9", "731 MB", "698", "12 MB", "13 B"),  # q9: 60.9 M params x 12 B, in MiB
}
# a figure's unit from its name's ending (the checks' names: bound_mb, step_s, eff_mbit_s, ...)
SUFFIX_UNITS = (("_mbit_s", "Mbit/s"), ("_gbit_s", "Gbit/s"), ("_gbps", "Gbit/s"), ("_mib", "MiB"), ("_mb", "MB"),
                ("_gb", "GB"), ("_ms", "ms"), ("_s", "s"))


def polarity(text: str, name: str) -> bool | None:
    """What the words say of a yes/no figure: False, True, or None (they do not say)."""
    if name not in POLARITY:
        return None
    no, yes = POLARITY[name]
    low = text.lower()
    if re.search(no, low):
        return False
    return True if re.search(yes, low) else None


def values(figures: dict, outputs: str = "") -> list[tuple[float, str]]:
    """(value, unit) pairs the student's run shows: their figures (unit from the name) and their outputs' numbers."""
    out = []
    for name, v in figures.items():
        for x in v if isinstance(v, (list, tuple)) else [v]:
            if isinstance(x, (int, float)) and not isinstance(x, bool):
                unit = next((u for s, u in SUFFIX_UNITS if name.lower().endswith(s)), "")
                out += [(float(x), unit), (float(x), "")]
    out += [(f.value, f.unit) for f in numbercheck.figures(outputs, counts=True)]
    return out


def flags(text: str, figures: dict | None = None, outputs: str = "", notebook: str = "") -> list[tuple[str, str]]:
    """The hints for one written answer (see the module's docstring); [] for an answer the kit sees nothing in."""
    figures, prose = figures or {}, numbercheck.prose(text or "")
    out = []
    for name, value in figures.items():
        said = polarity(prose, name)
        if isinstance(value, bool) and said is not None and said != value:
            out.append(("contradicts", WHY["contradicts"].format(words=f"{name} is {said}", name=name, value=value)))
    low = prose.lower()
    out += [(code, WHY[code]) for code, pattern in PATTERNS.items() if re.search(pattern, low, re.I)]
    stray = [f for f in numbercheck.quoted(prose, values(figures, outputs)) if f.text not in COURSE.get(notebook, ())]
    if stray:
        out.append(("not_in_run", WHY["not_in_run"].format(figs=", ".join(f.text for f in stray))))
    return out
