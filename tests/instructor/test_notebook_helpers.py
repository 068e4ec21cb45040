"""nmtkit.notebook: the preamble, the report's display helpers, the translation box and the live job panel."""
import json
import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from nmtkit import notebook as nb
from nmtkit.analysis.report import NO_RUNS

ROOT = Path(__file__).resolve().parents[2]


def committed_stream(notebook: str, first_line: str) -> str:
    """The printed output of the committed NBVAL_CHECK_OUTPUT cell whose code starts with `first_line`."""
    for cell in json.loads((ROOT / "notebooks" / notebook).read_text())["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and "NBVAL_CHECK_OUTPUT" in src and first_line in src:
            return "".join("".join(o["text"]) for o in cell["outputs"] if o["output_type"] == "stream")
    raise AssertionError(f"no such cell in {notebook}")


def test_setup_is_the_preamble_and_prints_what_the_notebooks_committed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NMTKIT_WORKDIR", str(tmp_path))
    monkeypatch.setenv("NMTKIT_PROFILE", "tiny")
    cfg, run = nb.setup()
    assert run is None and cfg.profile == "tiny" and cfg.data.dir == str(tmp_path / "data" / "tiny")
    assert capsys.readouterr().out == committed_stream("01_data_prep_bpe.ipynb", "nk.setup()")
    cfg, run = nb.setup(run_name="baseline", overrides={"train.steps": 7})
    assert run == tmp_path / "runs" / "baseline" and cfg.train.steps == 7
    # the cell prints its config table after setup's line
    assert capsys.readouterr().out.splitlines()[0] == committed_stream("02_single_gpu_baseline.ipynb",
                                                                       "nk.setup(").splitlines()[0]
    cfg, _ = nb.setup("wmt16-base", "horovod")
    assert cfg.data.dir == str(tmp_path / "data" / "wmt16-base")


def test_report_helpers_without_runs_say_so(capsys):
    nb.show_figure(None, "loss")
    nb.show_verdict(None, 3)
    assert capsys.readouterr().out == f"{NO_RUNS}\n{NO_RUNS}\n"


def test_show_figure_and_answer_display_the_report(tmp_path, monkeypatch, capsys):
    png = tmp_path / "loss.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    shown = []
    monkeypatch.setattr(nb, "display", shown.append)
    answer = SimpleNamespace(number=2, answer="Yes: flat.", answered=True, figure=png)
    rep = SimpleNamespace(figures={"loss": png}, runs=[SimpleNamespace(name="base")],
                          answers={"base": [None, answer]})
    nb.show_figure(rep, "loss")
    nb.show_figure(rep, "network")
    assert "no network figure" in capsys.readouterr().out
    nb.show_verdict(rep, 2)  # instructors' cells: the verdict, its figure, then the rubric
    assert [type(x).__name__ for x in shown] == ["Image", "Markdown", "Image", "Markdown"]
    assert shown[1].data == "**base, Q2.** Yes: flat." and shown[3].data.startswith("**Rubric, Q2.**")


def test_translation_box_translates_what_is_typed():
    box = nb.translation_box(lambda xs: [x.upper() + " <ok>" for x in xs])
    text, out = box.children
    text.value = "  hallo welt "
    assert out.value == "<b>HALLO WELT &lt;ok&gt;</b>"
    text.value = "   "  # blank input changes nothing
    assert out.value == "<b>HALLO WELT &lt;ok&gt;</b>"


class FakeJob:
    """A Job as the panel sees it: fails (check raises) after `fail_after` checks, or finishes after `done_after`."""

    def __init__(self, done_after=None, fail_after=None):
        self.checks, self.done_after, self.fail_after = 0, done_after, fail_after

    @property
    def done(self):
        return self.done_after is not None and self.checks >= self.done_after

    def check(self):
        self.checks += 1
        if self.fail_after is not None and self.checks > self.fail_after:
            raise RuntimeError("rank 1 on host <b>: engine died")

    def headline(self):
        return f"checks {self.checks}"

    def progress(self):
        return pd.DataFrame([{"rank": 0, "step": 5}]).set_index("rank")


def test_refresh_stops_when_done_and_shows_failures_in_red():
    box = SimpleNamespace(value="")
    nb.refresh(FakeJob(done_after=3), box, interval=0)
    table = FakeJob().progress().to_html(na_rep="-", float_format=lambda v: f"{v:.4g}")
    assert box.value == "<p>checks 4</p>" + table  # the last refresh after the job was seen done
    box = SimpleNamespace(value="")
    nb.refresh(FakeJob(fail_after=2), box, interval=0)
    assert box.value == ("<p>checks 2</p>" + table +
                         "<p style='color:#b00'><b>rank 1 on host &lt;b&gt;: engine died</b></p>")


def test_panel_outside_a_kernel_is_the_progress_text():
    assert nb.panel(FakeJob(done_after=0)) == FakeJob().progress().to_string()


def test_panel_in_a_kernel_is_a_live_widget(monkeypatch):
    monkeypatch.setattr(nb, "get_ipython", lambda: object())
    box = nb.panel(FakeJob(fail_after=1), interval=0.01)
    assert type(box).__name__ == "HTML"
    deadline = time.time() + 10
    while "engine died" not in box.value and time.time() < deadline:
        time.sleep(0.02)
    assert "engine died" in box.value
    for t in threading.enumerate():
        if t.name == "nmtkit-panel":
            t.join(timeout=10)
            assert not t.is_alive()  # a failed job ends the refreshing


@pytest.mark.xfail((ROOT / "nmtkit" / "cluster.py").exists(), strict=True,
                   reason="the old nmtkit/cluster.py keeps Job.panel() until the nmtkit/cluster/ package replaces it")
def test_only_the_notebook_module_imports_display_libraries():
    hits = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "nmtkit").rglob("*.py")
                  if re.search(r"IPython\.display|ipywidgets|from IPython import|import IPython\b", p.read_text()))
    assert hits == ["nmtkit/notebook.py"]
