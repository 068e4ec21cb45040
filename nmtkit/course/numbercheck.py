"""Holds every figure a notebook's prose states against the outputs printed beside it.

A *figure* is a number written with a decimal point, a thousands separator or a unit (MB, MiB, Mbit/s, ms, %, x,
...), or said to be approximate ("about 698"); bare counts ("2 ranks", "step 100") are words, not figures. A figure
passes when some output of the same section (the code cells between the headings around it), or of a section the
text names (`Q5`, "the section below"), shows the same quantity
at the sentence's rounding, after converting units of one dimension (MB/MiB/Mbit/GB, s/ms, %/fraction); or when the
allow-list names it with its source (the seeds' figures, a card's 16 GB, fp16's 65,504). Inline code, LaTeX and link
targets are not prose.

A *judgement* of size or direction about a run ("far below the rate", "a small share", "negligible", "comes close",
"the rest is ...", "bound by ...") must carry in its own sentence the figure it rests on, which the first rule then
holds against the outputs, or name the variable (inline code) that holds it, as a model answer for every variant
does: a judgement with no figure cannot be checked, and it is where prose drifted from the numbers beside it; a share
is stated as a share (a %, a ratio, a time), not by the link rate it assumes, and an MFU names the peak it is against.
Questions, quoted answers and general rules (a sentence with when/where/mean/say) judge no run and are left alone.

`nmtkit.course.numbercheck.findings(notebooks, allow)` lists what fails; `quoted(text, values)` is the matcher alone
(a student's verdict against their own figures). TensorFlow-free.
"""
from __future__ import annotations

import dataclasses
import html
import json
import math
import re
from pathlib import Path

from nmtkit.errors import NmtkitError

# unit -> (dimension, factor to the dimension's base unit)
UNITS = {
    "%": ("fraction", 0.01), "x": ("ratio", 1.0), "×": ("ratio", 1.0),
    "B": ("bytes", 1.0), "kB": ("bytes", 1e3), "KB": ("bytes", 1e3), "KiB": ("bytes", 2.0 ** 10),
    "MB": ("bytes", 1e6), "MiB": ("bytes", 2.0 ** 20), "GB": ("bytes", 1e9), "GiB": ("bytes", 2.0 ** 30),
    "Mbit": ("bytes", 1e6 / 8), "Mb": ("bytes", 1e6 / 8), "Gbit": ("bytes", 1e9 / 8), "Gb": ("bytes", 1e9 / 8),
    "kbit": ("bytes", 1e3 / 8),
    "Mbit/s": ("rate", 1e6), "Gbit/s": ("rate", 1e9), "kbit/s": ("rate", 1e3), "Mb/s": ("rate", 1e6),
    "Gb/s": ("rate", 1e9), "MB/s": ("rate", 8e6), "GB/s": ("rate", 8e9),
    "s": ("time", 1.0), "ms": ("time", 1e-3), "µs": ("time", 1e-6), "us": ("time", 1e-6), "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "GFLOP/s": ("flops", 1e9), "TFLOP/s": ("flops", 1e12), "GFLOP": ("flop", 1e9), "TFLOP": ("flop", 1e12),
    "BLEU": ("bleu", 1.0),
}
_UNIT_RE = "|".join(sorted((re.escape(u) for u in UNITS if u not in "x×"), key=len, reverse=True))
# "2.01x" is a ratio, "2 × 2" a product: x and × count only when written against the number
NUMBER = re.compile(r"(?<![\w.,/-])([-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)"
                    r"(?:([x×])|\s?(" + _UNIT_RE + r"))?(?![\w/])")
# a heading's own number ("## 3.5 Step time") and cross-references ("section 2.6") are not figures
NUMBERING = re.compile(r"^(#{1,6}\s+)\d+(\.\d+)*\.?|\b[Ss]ections?\s+\d+(\.\d+)*", re.M)
# what is not prose: fenced and inline code, LaTeX, link targets, HTML tags, nbgrader's markers
NOT_PROSE = re.compile(r"```.*?```|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|\]\([^)]*\)|<[^>]+>|###? (BEGIN|END) SOLUTION",
                       re.S)
# "about 698" states a quantity even without its unit
APPROX = re.compile(r"(?:about|around|nearly|almost|roughly|≈|~)\s*$", re.I)
HEADING = re.compile(r"^#{1,6} ", re.M)
# a comparison rests on any figure; a share is stated as a share (%, x, a time), not as the link rate it assumes
COMPARISON = re.compile(r"\b(far (?:below|above|short|slower|faster|less|more)|well (?:below|above|short|under|over)|"
                        r"comes? close|came close|close to|trains? stably|stands? in for|stayed (?:far )?below|"
                        r"bound by)\b", re.I)
SHARE = re.compile(r"\b(negligible|(?:a )?(?:small|modest|tiny|large) share|the rest is|hardly|barely|most of the|"
                   r"nearly all)\b", re.I)
SHARE_DIMENSIONS = ("fraction", "ratio", "time")
GENERAL = re.compile(r"\?|\b(when|whenever|where|means?|says?)\b", re.I)
CODE = "VARIABLE"  # stands for an inline-code name in the text judgements() reads
QUOTED = re.compile(r'"[^"]*"|“[^”]*”')


@dataclasses.dataclass(frozen=True)
class Figure:
    text: str        # as written, e.g. "733.6 MB"
    value: float     # in its unit
    unit: str        # "" when none
    half_step: float  # the sentence's rounding: half its last written digit's place

    @property
    def base(self) -> tuple[str, float] | None:
        return (UNITS[self.unit][0], self.value * UNITS[self.unit][1]) if self.unit else None


@dataclasses.dataclass(frozen=True)
class Finding:
    notebook: str
    cell: int
    figure: str
    sentence: str
    why: str = "matches no output beside it"

    def __str__(self) -> str:
        return f"{self.notebook} cell {self.cell}: {self.figure!r} in “{self.sentence}” {self.why}"

    @property
    def key(self) -> str:
        """What names a finding across re-publishing (cell numbers move): notebook and figure."""
        return f"{self.notebook}\t{self.figure}"


def _figure(number: str, unit: str | None, text: str) -> Figure:
    digits = number.replace(",", "").replace("−", "-").lstrip("+")
    value = float(digits)
    if "." in digits:
        half = 0.5 * 10.0 ** -len(digits.split(".")[1])
    else:  # "1,800" is written to the hundreds: its last non-zero digit's place
        stripped = digits.lstrip("-").rstrip("0") or "0"
        half = 0.5 * 10.0 ** (len(digits.lstrip("-")) - len(stripped)) if value else 0.5
    return Figure(" ".join(text.split()), abs(value), unit or "", half)


def figures(text: str, counts: bool = False) -> list[Figure]:
    """The figures in a text; with counts, bare integers too (an output's numbers all count)."""
    out = []
    for m in NUMBER.finditer(text):
        number, unit = m.group(1), m.group(2) or m.group(3)
        if counts or unit or "." in number or "," in number or APPROX.search(text[max(0, m.start() - 10):m.start()]):
            out.append(_figure(number, unit, m.group(0)))
    return out


def _same(fig: Figure, value: float, unit: str) -> bool:
    """Whether an output value shows the figure at the figure's rounding."""
    candidates = []
    if unit and fig.unit and UNITS[unit][0] == UNITS[fig.unit][0]:
        candidates.append(value * UNITS[unit][1] / UNITS[fig.unit][1])
    elif not unit or not fig.unit:
        candidates.append(value)
        if fig.unit == "%":
            candidates.append(value * 100)
    tol = fig.half_step * (1 + 1e-9) + 1e-12
    return any(math.isfinite(c) and abs(abs(c) - fig.value) <= tol for c in candidates)


def quoted(text: str, values: list[tuple[float, str]]) -> list[Figure]:
    """The figures of a text that none of the values (number, unit) shows at the text's rounding."""
    return [f for f in figures(text) if not any(_same(f, v, u) for v, u in values)]


def prose(source: str, names: bool = False) -> str:
    """The prose of a markdown source; with names, each inline-code name kept as CODE (a variable that holds a
    figure can carry a judgement in a model answer that holds for every variant)."""
    if names:
        source = re.sub(r"`[^`]*`", f" {CODE} ", source)
    return NUMBERING.sub(lambda m: m.group(1) or " ", NOT_PROSE.sub(" ", source))


def misnumbered(path: Path) -> list[Finding]:
    """Headings numbered for another notebook: notebook 06's sections are 6.1, 6.2, ..."""
    number = int(re.match(r"\d+", Path(path).name).group()) if re.match(r"\d+", Path(path).name) else None
    cells = json.loads(Path(path).read_text())["cells"]
    out = []
    for i, c in enumerate(cells):
        for m in re.finditer(r"^#{1,6}\s+(\d+)\.\d+", "".join(c["source"]) if c["cell_type"] == "markdown" else "",
                             re.M):
            if number is not None and int(m.group(1)) != number:
                out.append(Finding(Path(path).name, i, m.group(0).lstrip("# "), m.group(0),
                                   f"numbers a section of notebook {number} as notebook {m.group(1)}'s"))
    return out


def _output_text(cell: dict) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if "text" in o:
            parts.append("".join(o["text"]))
        data = o.get("data", {})
        for kind in ("text/markdown", "text/plain", "text/html"):
            if kind in data:
                parts.append(html.unescape(re.sub(r"<[^>]+>", " ", "".join(data[kind]))))
    return "\n".join(parts)


def sections(cells: list[dict]) -> list[list[int]]:
    """The cells between headings: a markdown cell that opens with a heading starts a new section."""
    out: list[list[int]] = [[]]
    for i, c in enumerate(cells):
        if c["cell_type"] == "markdown" and HEADING.match("".join(c["source"]).lstrip()):
            out.append([])
        out[-1].append(i)
    return [s for s in out if s]


def _sentence(text: str, fig: Figure) -> str:
    flat = " ".join(text.split())
    at = next((a for a in (flat.find(fig.text), flat.find(fig.text.replace(" ", "")), flat.find(fig.text.split(" ")[0]))
               if a >= 0), 0)
    start = max(flat.rfind(". ", 0, at) + 2, at - 100, 0)
    end = flat.find(". ", at)
    return flat[start:(end + 1 if 0 <= end < at + 140 else at + 80)].strip()


@dataclasses.dataclass(frozen=True)
class Allowed:
    notebook: str    # a notebook's file name, or * for any
    figure: str      # the figure as written, e.g. "16 GB"
    source: str


def load_allow(path: Path) -> list[Allowed]:
    """The allow-list: one entry a line, `notebook<TAB>figure<TAB>source`; # comments. Every entry names a source."""
    out = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.split("\t")]
        if len(parts) != 3 or not all(parts):
            raise NmtkitError(f"{path}:{n}: want `notebook<TAB>figure<TAB>source` (a source for every entry)")
        out.append(Allowed(*parts))
    return out


def _allowed(allow: list[Allowed], notebook: str, fig: Figure) -> bool:
    return any(a.notebook in ("*", notebook) and " ".join(a.figure.split()) == fig.text for a in allow)


def _values(cells: list[dict], section: list[int]) -> list[tuple[float, str]]:
    return [(f.value, f.unit) for i in section if cells[i]["cell_type"] == "code"
            for f in figures(_output_text(cells[i]), counts=True)]


def named(text: str, cells: list[dict], parts: list[list[int]], at: int) -> list[list[int]]:
    """The other sections a text names as its figures' source: a question (`Q5`, `Q5's figures`), or the section
    below or after its own."""
    out = []
    for q in set(re.findall(r"\bQ(\d+)\b", text)):
        out += [s for s in parts if re.match(rf"#+\s+Q{q}\b", "".join(cells[s[0]]["source"]).lstrip())]
    if re.search(r"\bthe (?:section|heading) (?:below|after)|\bthe next section\b", text) and at + 1 < len(parts):
        out.append(parts[at + 1])
    return out


def notebook_findings(path: Path, allow: list[Allowed] = ()) -> list[Finding]:
    cells = json.loads(Path(path).read_text())["cells"]
    found = misnumbered(path)
    parts = sections(cells)
    for n, section in enumerate(parts):
        for i in section:
            if cells[i]["cell_type"] != "markdown":
                continue
            text = prose("".join(cells[i]["source"]))
            values = _values(cells, section) + [v for s in named(text, cells, parts, n) for v in _values(cells, s)]
            for fig in quoted(text, values):
                if not _allowed(allow, Path(path).name, fig):
                    found.append(Finding(Path(path).name, i, fig.text, _sentence(text, fig)))
            found += [Finding(Path(path).name, i, said, sentence, why)
                      for said, sentence, why in judgements(prose("".join(cells[i]["source"]), names=True))]
    return found


def judgements(text: str) -> list[tuple[str, str, str]]:
    """(judgement, sentence, why) for each sentence of a prose text that judges a size without the figure it rests
    on."""
    out = []
    sentences = [s for para in re.split(r"\n\s*\n", QUOTED.sub(" ", text))
                 for s in re.split(r"(?<=[.!?])\s+", " ".join(para.split()))]
    for sentence in sentences:
        if GENERAL.search(sentence):
            continue
        found, named = figures(sentence), CODE in sentence
        m = COMPARISON.search(sentence)
        if m and not found and not named:
            out.append((m.group(0), sentence, "judges a size with no figure in its sentence"))
        m = SHARE.search(sentence)
        if m and not named and not any(f.base is None or f.base[0] in SHARE_DIMENSIONS for f in found):
            out.append((m.group(0), sentence, "states a share without the share (a %, a ratio or a time)"))
        if re.search(r"\bMFU\b", sentence) and any(f.unit == "%" for f in found) and "peak" not in sentence:
            out.append(("MFU", sentence, "gives an MFU without the peak it is against"))
    return out


def findings(notebooks: list[Path], allow: list[Allowed] = ()) -> list[Finding]:
    return [f for nb in sorted(notebooks) for f in notebook_findings(nb, allow)]


def main(argv: list[str] | None = None) -> int:
    """`python -m nmtkit.course.numbercheck [--allow FILE] NOTEBOOK...`: one line a finding; exit 1 if any."""
    import argparse
    p = argparse.ArgumentParser(prog="python -m nmtkit.course.numbercheck")
    p.add_argument("notebooks", nargs="+", type=Path)
    p.add_argument("--allow", type=Path)
    a = p.parse_args(argv)
    found = findings(a.notebooks, load_allow(a.allow) if a.allow else [])
    for f in found:
        print(f)
    print(f"{len(found)} finding(s): figures that match no output beside them, judgements with no figure")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
