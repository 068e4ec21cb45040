"""The number checker: every figure the notebooks' prose states is an output beside it, or listed with its source."""
import json
from pathlib import Path

import pytest

from nmtkit.course import numbercheck as nc
from nmtkit.errors import NmtkitError

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0*.ipynb"))
ALLOW = ROOT / "tests" / "instructor" / "prose" / "allow.tsv"
OPEN = ROOT / "tests" / "instructor" / "prose" / "open.tsv"


def _notebook(tmp_path, *cells, name="05_x.ipynb"):
    out = []
    for kind, text, *printed in cells:
        cell = {"cell_type": kind, "source": text, "metadata": {}}
        if kind == "code":
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": printed[0]}]
        out.append(cell)
    path = tmp_path / name
    path.write_text(json.dumps({"cells": out}))
    return path


def test_a_figure_is_a_number_with_a_point_a_separator_or_a_unit_and_prose_is_not_code():
    text = nc.prose("## 3.5 Step time\nA rank sends 67.0 Mbit, 2.01x the bound, 1,763 Mbit/s; 2 × 2 ranks, "
                    "8B/R, `--set train.lr=0.5`, $t = 0.1$, see section 2.6, 4 beams.")
    assert [f.text for f in nc.figures(text)] == ["67.0 Mbit", "2.01x", "1,763 Mbit/s"]


@pytest.mark.parametrize("said, printed, holds", [
    ("699.6 MiB", "733.6 MB", True),       # one quantity, two units
    ("67.0 Mbit", "8.37 MB", True),
    ("33.1%", "mfu 0.331", True),
    ("about 700 MiB", "733.6 MB", True),    # said to the tens
    ("about 1,800 Mbit/s", "1763.0", True),  # said to the hundreds
    ("731 MB", "733.6 MB", False),          # the old Q9 answer beside its cell
    ("about 698", "699.6 MiB", False),
    ("12 MB over", "+10.4 MB", False),
    ("0.89 cores busy of 1.15", "0.95 of 1.18 cores", False),
    ("38 ms", "0.038 s", True),
    ("38 ms", "0.038 MB", False),           # another dimension never matches
])
def test_a_figure_holds_only_at_its_own_rounding_and_unit(tmp_path, said, printed, holds):
    path = _notebook(tmp_path, ("markdown", "## A\n", ), ("code", "x", printed), ("markdown", f"It is {said}."))
    assert (nc.notebook_findings(path) == []) == holds


def test_a_figure_counts_only_against_its_own_section(tmp_path):
    path = _notebook(tmp_path, ("code", "x", "0.514 s"), ("markdown", "## B\nThe step is 0.514 s."))
    (finding,) = nc.notebook_findings(path)
    assert finding.figure == "0.514 s" and "0.514 s" in finding.sentence and finding.cell == 1


def test_a_heading_numbered_for_another_notebook_is_a_finding(tmp_path):
    path = _notebook(tmp_path, ("markdown", "## 5.1 Load\n"), ("markdown", "## 6.2 Export\n"), name="06_y.ipynb")
    assert [(f.cell, f.figure) for f in nc.notebook_findings(path)] == [(0, "5.1")]


def test_every_allowed_figure_names_its_source(tmp_path):
    bad = tmp_path / "allow.tsv"
    bad.write_text("04_x.ipynb\t16 GB\t\n")
    with pytest.raises(NmtkitError, match=r"allow.tsv:1: .*source"):
        nc.load_allow(bad)
    entries = nc.load_allow(ALLOW)
    assert entries and all(len(e.source) > 10 for e in entries)


def _listed(path):
    return {line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")}


def test_the_notebooks_prose_states_no_figure_that_is_not_beside_it_or_listed():
    """A ratchet: a figure the prose newly states without its output fails here; tests/instructor/prose/open.tsv lists
    the findings left to fix (the prose issue), and a fixed one is taken off it."""
    found = nc.findings(NOTEBOOKS, nc.load_allow(ALLOW))
    new = [str(f) for f in found if f.key not in _listed(OPEN)]
    assert not new, "\n".join(new)
    stale = _listed(OPEN) - {f.key for f in found}
    assert not stale, f"fixed, so take them off {OPEN.name}: {sorted(stale)}"


def test_the_checker_flags_an_old_sentence_put_back_beside_todays_outputs(tmp_path):
    """Mutation: the Q9 model answer's old figures put into notebook 05's own section fail, the printed ones pass."""
    nb = json.loads((ROOT / "notebooks" / "05_monitoring_analysis.ipynb").read_text())
    at = next(i for i, c in enumerate(nb["cells"])
              if c["metadata"].get("nbgrader", {}).get("grade_id") == "05-q9-verdict")
    printed = [f for i in range(at - 3, at) if nb["cells"][i]["cell_type"] == "code"
               for f in nc.figures(nc._output_text(nb["cells"][i])) if f.unit in ("MB", "MiB")]
    assert printed, "the Q9 cell prints its sizes in MB and MiB"
    nb["cells"][at]["source"] = f"The checkpoint is {printed[0].text}. Old: 731 MB / about 698 / 12 MB over."
    path = tmp_path / "05_monitoring_analysis.ipynb"
    path.write_text(json.dumps(nb))
    figures = {f.figure for f in nc.notebook_findings(path) if f.cell == at}
    assert {"731 MB", "12 MB"} <= figures and printed[0].text not in figures


# Issue 71's items 1-3: each old sentence (verbatim at 0dab664), where it stood (a grade id, else its heading), and
# what the checker must name in it. The Q9 answer's old figures are the test above.
OLD_SENTENCES = [
    ("04_bottleneck_lab.ipynb", "### A link's rate is not the allreduce's",
     "Its busiest 0.1 s sample (`link_peak_mbit_s`) stayed far below the rate. On these hosts the allreduce is bound "
     "by the ranks' own CPUs: Gloo reduces and copies over TCP on the core the ranks compute on.", "bound by"),
    ("03_horovod_multinode.ipynb", "Was the network the bottleneck?",
     "Here no link is crossed, but the exchange is not free. Gloo copies and reduces the gradients on the ranks' own "
     "cores, so the step time measured here stands in for $t_{\\text{compute}}$.", "stands in for"),
    ("03_horovod_multinode.ipynb", "The ring allreduce, and fewer bytes on the wire",
     "`measured / model` near 1 says the bytes are the gradients. The rest is headers, coordination messages and "
     "whatever else crossed loopback in those seconds.", "The rest is"),
    ("04_bottleneck_lab.ipynb", "04-lab1-verdict",
     "The baseline's compute plus the ring's bytes at each run's measured rate comes close for the runs of the "
     "baseline's shape.", "comes close"),
    ("04_bottleneck_lab.ipynb", "04-lab5-verdict",
     "Part of it is the exchange (timed alone, the link a small share of the step).", "a small share"),
    ("05_monitoring_analysis.ipynb", "05-q5-verdict",
     "On 1 Gbit/s the exchange would be a modest share of a step (printed), on 10 Gbit/s a negligible one, if it ran "
     "at the link's rate.", "a modest share"),
    ("02_single_gpu_baseline.ipynb", "The model",
     "OpenSeq2Seq's transformer, which the homework used, is a port of the TensorFlow official model and is pre-norm "
     "too; pre-norm trains stably at high learning rates without a long warmup.", "trains stably"),
    ("02_single_gpu_baseline.ipynb", "The model", "Against float32 the run reached an MFU of 33.1%.", "MFU"),
]


def _cell_of(cells, where):
    for i, c in enumerate(cells):
        source = "".join(c["source"])
        if c["metadata"].get("nbgrader", {}).get("grade_id") == where or (
                c["cell_type"] == "markdown" and source.lstrip().startswith("#")
                and where in source.lstrip().splitlines()[0]):
            return i
    raise AssertionError(f"no cell with grade id or heading {where!r}")


@pytest.mark.parametrize("notebook, where, old, flagged", OLD_SENTENCES, ids=[s[3] for s in OLD_SENTENCES])
def test_each_old_sentence_put_back_is_flagged(tmp_path, notebook, where, old, flagged):
    """Mutation: the sentence issue 71 found drifting, put back where it stood beside today's outputs, is a finding."""
    nb = json.loads((ROOT / "notebooks" / notebook).read_text())
    at = _cell_of(nb["cells"], where)
    before = [f.figure for f in nc.notebook_findings(ROOT / "notebooks" / notebook) if f.cell == at]
    nb["cells"][at]["source"] = "".join(nb["cells"][at]["source"]) + "\n\n" + old + "\n"
    path = tmp_path / notebook
    path.write_text(json.dumps(nb))
    after = [f.figure for f in nc.notebook_findings(path) if f.cell == at]
    assert after.count(flagged) > before.count(flagged), after


def test_a_share_is_stated_as_a_share_and_a_judgement_carries_its_figure():
    said = [j for j, _, _ in nc.judgements(
        "The exchange is a small share of the step. The exchange is 62% of the shortfall, a large share. "
        "On 10 Gbit/s it is negligible. At 38 ms it is not negligible. It came close. It came within 0.073 s, close. "
        "Where the rate is far below the link's, a faster link buys nothing. Is it bound by the CPU?")]
    assert said == ["a small share", "negligible", "came close"]
    # a model answer for every variant names the variable that holds the figure
    named = nc.prose("`k` is close to 1 and the intercept close to the compute. The rest is idle.", names=True)
    assert [j for j, _, _ in nc.judgements(named)] == ["The rest is"]


def test_a_text_may_draw_its_figures_from_the_sections_it_names(tmp_path):
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "## Q5 · The network"},
             {"cell_type": "code", "metadata": {}, "source": "", "outputs": [{"output_type": "stream",
                                                                            "text": "exchange 349 ms"}]},
             {"cell_type": "markdown", "metadata": {}, "source": "## Q11 · Throughput"},
             {"cell_type": "markdown", "metadata": {}, "source": "It takes 349 ms (Q5's figures). Then 351 ms."}]
    path = tmp_path / "05_x.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    assert [f.figure for f in nc.notebook_findings(path)] == ["351 ms"]
    cells[3]["source"] = "It takes 349 ms."
    path.write_text(json.dumps({"cells": cells}))
    assert [f.figure for f in nc.notebook_findings(path)] == ["349 ms"]
