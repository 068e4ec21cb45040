"""Notebook 03 reads like a textbook (issue 57): its two equations displayed with their symbols named before every
cell that computes with them, kit words explained where first used, and the orchestration's detail moved to
docs/orchestration.md. Its sentences are counted by test_readable.py with the other notebooks'."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NB03 = ROOT / "notebooks" / "03_horovod_multinode.ipynb"
LAB = ROOT / "docs" / "orchestration.md"  # shipped with the students' kit (docs/terminal-lab.md is not)


def cells():
    return json.loads(NB03.read_text())["cells"]


def source(cell) -> str:
    return "".join(cell["source"])


EQUATIONS = {  # the displayed equation, the symbols named after it, the code cells that compute with it
    "ring": (r"B = 2\,\frac{N-1}{N}\, P\, b", ("B is", "N the number of ranks", "P the", "b the bytes per value"),
             ("nk.compression_trials(", "nk.draw_ring(", "nk.homework_exchange(")),
    "break-even": (r"R = \frac{8\,B}{t_{\text{compute}}}",
                   ("R is the break-even", "B the bytes", r"$t_{\text{compute}}$ the step's compute time"),
                   ("break_even =", "nk.link_table(")),
}


@pytest.mark.parametrize("name", EQUATIONS)
def test_each_equation_is_displayed_with_its_symbols_named_before_the_code_that_uses_it(name):
    formula, symbols, users = EQUATIONS[name]
    nb = cells()
    shown = [i for i, c in enumerate(nb) if c["cell_type"] == "markdown"
             and re.search(r"^\$\$ " + re.escape(formula) + r" \$\$$", source(c), flags=re.M)]
    assert len(shown) == 1, f"the {name} equation is displayed in {len(shown)} cells, not 1"
    after = " ".join(source(nb[shown[0]]).split(formula, 1)[1].split())
    assert after.startswith("$$ where") and all(s in after for s in symbols), after[:300]
    for marker in users:
        [used] = [i for i, c in enumerate(nb) if c["cell_type"] == "code" and marker in source(c)]
        assert shown[0] < used, f"the {name} equation (cell {shown[0]}) comes after its code {marker!r} ({used})"


KIT_WORDS = ("allreduce", "engine", "controller", "rank plan", "rendezvous", "preflight", "ring allreduce",
             "break-even rate", "rehearsal")


@pytest.mark.parametrize("word", KIT_WORDS)
def test_a_kit_word_is_marked_as_defined_where_it_is_first_used(word):
    """The first markdown use of each kit word is the one that explains it (bold, the course's mark of a term)."""
    prose = ["\n".join(line for line in source(c).splitlines() if not line.startswith("#"))  # headings name, not use
             for c in cells() if c["cell_type"] == "markdown"]
    first = next(p for p in prose if re.search(rf"\b{word}", p, flags=re.I))
    at = re.search(rf"\b{word}", first, flags=re.I).start()
    assert re.search(rf"\*\*{word}\w*\*\*", first, flags=re.I) and first.lower().find(f"**{word}") <= at, \
        f"{word!r} is first used without its explanation: {first[max(0, at - 80):at + 80]!r}"


def test_the_orchestration_lives_in_its_doc_and_the_notebook_links_it():
    nb = cells()
    prose = " ".join(source(c) for c in nb if c["cell_type"] == "markdown")
    shown = re.sub(r"```.*?```|### BEGIN SOLUTION.*?### END SOLUTION", " ", prose, flags=re.S)
    words = len(shown.split())  # before issue 57: 2,855, most of it orchestration
    assert words < 2300, f"notebook 03 shows {words} words of markdown prose"
    assert "](../docs/orchestration.md)" in prose, "the notebook links docs/orchestration.md"
    section = LAB.read_text()
    for moved in ("HOROVOD_CYCLE_TIME", "HOROVOD_GLOO_TIMEOUT_SECONDS", "NCCL_SOCKET_IFNAME", "rendezvous",
                  "cluster.logical_hosts", '"manual"', "engine_command()", "getent hosts", "connection file",
                  "DistributedGradientTape", "NCCL_DEBUG=INFO", "0.1 s"):
        assert moved in section, f"docs/orchestration.md lost {moved!r}"
    for detail in ("HOROVOD_CYCLE_TIME", "HOROVOD_GLOO_TIMEOUT_SECONDS", "NCCL_SOCKET_IFNAME", "getent hosts",
                   "connection file", "DistributedGradientTape", "publish_data"):
        assert detail not in prose, f"{detail!r} is still explained in the notebook, not in docs/orchestration.md"
