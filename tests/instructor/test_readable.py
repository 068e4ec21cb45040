"""The notebooks read like a textbook's chapters: no sentence over 40 words in their markdown, and each of the four
models the course computes (the ring's bytes, the break-even link rate, MFU, the lab's step) stated as a displayed
equation, its symbols named, before the code cell that computes it."""
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
MAX_WORDS = 40


def cells(stem: str) -> list[dict]:
    path = next(NOTEBOOKS.glob(f"{stem}*.ipynb"))
    return json.loads(path.read_text())["cells"]


def sentences(markdown: str) -> list[str]:
    """Sentences of prose: code blocks, displayed math and table rows left out; split at . ! ? before a capital or
    a parenthesis, at list items and at blank lines (a heading or a bullet is its own sentence)."""
    t = re.sub(r"```.*?```|\$\$.*?\$\$", " ", markdown, flags=re.S)
    t = re.sub(r"\|[^\n]*\|", " ", t)
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(])|\n\s*[-*]\s|\n\n", t) if s.strip()]


def test_the_splitter_counts_what_a_reader_reads():
    text = "One two three. Four five!\n\n- a list item\n- another\n\n$$ x = y $$\n\n| a | b |\n```\ncode here\n```"
    assert [len(s.split()) for s in sentences(text)] == [3, 2, 3, 1]


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_no_sentence_over_40_words(path):
    long = [(i, len(s.split()), " ".join(s.split())[:90])
            for i, c in enumerate(json.loads(path.read_text())["cells"]) if c["cell_type"] == "markdown"
            for s in sentences("".join(c["source"])) if len(s.split()) > MAX_WORDS]
    assert not long, f"{path.name}: sentences over {MAX_WORDS} words (cell, words, start): {long}"


# (notebook, what it models, a pattern of the displayed equation, a pattern of the code that computes it)
EQUATIONS = [
    ("03", "the ring's bytes per rank per step", r"\\frac\{N\s*-\s*1\}\{N\}", r"nk\.draw_ring\(|ring_bytes\("),
    ("03", "the break-even link rate", r"t_\{?\\?(?:text|mathrm)\{compute\}", r"break_even\s*="),
    ("05", "model FLOPs utilisation", r"\\mathrm\{MFU\}|\\text\{MFU\}", r"\bmfu\s*="),
    ("04", "the lab's step model", r"t_\{?\\?(?:text|mathrm)\{step\}", r"predicted_s\s*="),
]


@pytest.mark.parametrize("nb, what, equation, code", EQUATIONS, ids=[e[1] for e in EQUATIONS])
def test_each_model_is_a_displayed_equation_before_its_code(nb, what, equation, code):
    cs = cells(nb)
    shown = [i for i, c in enumerate(cs) if c["cell_type"] == "markdown"
             and any(re.search(equation, m) for m in re.findall(r"\$\$(.*?)\$\$", "".join(c["source"]), re.S))]
    computed = [i for i, c in enumerate(cs) if c["cell_type"] == "code" and re.search(code, "".join(c["source"]))]
    assert shown, f"notebook {nb}: no displayed equation ($$ ... $$) for {what}"
    assert computed, f"notebook {nb}: no code cell computes {what}"
    assert shown[0] < computed[0], f"notebook {nb}: {what} is computed (cell {computed[0]}) before its equation " \
                                   f"(cell {shown[0]})"
    after = "".join(cs[shown[0]]["source"]).split("$$")[-1].lower()
    assert "where" in after or "with" in after, f"notebook {nb}: the symbols of {what}'s equation are not named"
