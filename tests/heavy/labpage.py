"""JupyterLab in headless Chromium, as a student uses it: open a notebook, run its first code cell, read its output.
Shared by the image's test (a container of its own) and the hub's (a server the hub spawned)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
try:
    from test_browser import CHROMIUM, LAB_READY_JS, Chromium
finally:
    sys.path.pop(0)

__all__ = ["CHROMIUM", "LAB_READY_JS", "Chromium", "open_notebook", "panel_of", "run_first_code_cell"]


def panel_of(name: str) -> str:
    """A JS expression for the open notebook `name`'s panel (JupyterLab's app, exposed in the page)."""
    return f"[...jupyterapp.shell.widgets('main')].find(w => w.context && w.context.path === {json.dumps(name)})"


def open_notebook(browser, name: str) -> dict:
    """Opens `name` in the page's JupyterLab; its kernel's name and whether its cells are trusted, once it is idle."""
    return browser.open_notebook(name, f"""(() => {{ const w = {panel_of(name)};
        if (!w || !w.sessionContext.session) return 'null';
        const k = w.sessionContext.session.kernel; return JSON.stringify({{kernel: k && k.name,
        status: w.sessionContext.kernelDisplayStatus,
        trusted: w.content.widgets.every(c => c.model.trusted)}}); }})()""",
                        lambda s: s["status"] == "idle", timeout=120)


def run_first_code_cell(browser, name: str, timeout: float = 240) -> dict:
    """Runs the open notebook's first code cell; its execution count and its outputs' text."""
    panel, first = panel_of(name), "w.content.widgets.findIndex(c => c.model.type === 'code')"
    browser.evaluate(f"(() => {{ const w = {panel}; w.content.activeCellIndex = {first};"
                     f" jupyterapp.commands.execute('notebook:run-cell'); return 'run'; }})()")
    return browser.poll(f"""(() => {{ const w = {panel}; const c = w.content.widgets[{first}];
        return JSON.stringify({{count: c.model.executionCount,
        text: [...c.node.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText).join(' ')}}); }})()""",
                        lambda o: o["count"], timeout=timeout)
