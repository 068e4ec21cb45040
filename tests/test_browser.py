"""What a student sees from a fresh clone, in headless Chromium (issue 13, item 6).

JupyterLab shows a notebook's saved widget views (the live panel, the progress bar, the translation box) only when
the notebook is trusted; untrusted, it falls back to their text reprs, `HTML(value='<p>2 ranks…` and
`VBox(children=(Text(…`. Set-up and `make lab` trust the shipped notebooks; here a copy is trusted the same way, opened
in JupyterLab (which renders client-side, so Chromium gets virtual time to run it), and its rendered DOM is read.
TensorBoard's scalars page is opened on a tiny run too.
"""
from __future__ import annotations

import contextlib
import html.parser
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from test_tensorboard import HOMEWORK_TAGS, get_json, tensorboard_server, write_events

ROOT = Path(__file__).resolve().parents[1]
WIDGET_NOTEBOOKS = ("02_single_gpu_baseline.ipynb", "03_horovod_multinode.ipynb", "05_inference_export.ipynb")
TEXT_REPRS = ("HTML(value=", "VBox(")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed: "
                                                          "sudo apt-get install -y chromium")]


def dump_dom(url: str, tmp: Path, budget_ms: int) -> str:
    """The page's DOM after `budget_ms` of virtual time (timers run fast; network waits are real)."""
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                        f"--user-data-dir={tmp / 'chromium'}", f"--virtual-time-budget={budget_ms}",
                        "--window-size=1280,20000", "--dump-dom", url],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "<html" in r.stdout, f"chromium failed ({r.returncode}): {r.stderr[-2000:]}"
    shutil.rmtree(tmp / "chromium", ignore_errors=True)
    return r.stdout


class _Outputs(html.parser.HTMLParser):
    """Text of each rendered output (`jp-OutputArea-output`) and the widget views in the page."""

    def __init__(self):
        super().__init__()
        self.outputs: list[str] = []
        self.widgets = 0
        self._stack: list[bool] = []   # per open element: does it open an output?

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        self.widgets += "jupyter-widgets" in classes
        opens = "jp-OutputArea-output" in classes
        if opens:
            self.outputs.append("")
        if tag not in ("br", "img", "input", "meta", "link", "hr", "wbr", "source", "col", "area", "base"):
            self._stack.append(opens)

    def handle_endtag(self, tag):
        if self._stack:
            self._stack.pop()

    def handle_data(self, data):
        if any(self._stack) and self.outputs:
            self.outputs[-1] += data


def rendered(dom: str) -> _Outputs:
    parser = _Outputs()
    parser.feed(dom)
    return parser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jupyter_env(tmp: Path) -> dict:
    """A private Jupyter home (config, data with the trust database, settings) so nothing touches the user's."""
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp / "config"), JUPYTER_DATA_DIR=str(tmp / "data"),
               JUPYTER_RUNTIME_DIR=str(tmp / "runtime"), JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"), PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    # every cell in the DOM, not only those in view (JupyterLab 4 virtualises long notebooks)
    tracker = tmp / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text('{"windowingMode": "none"}')
    return env


@contextlib.contextmanager
def jupyterlab(root: Path, env: dict, token: str, timeout: float = 90.0):
    port = _free_port()
    cmd = [str(Path(sys.executable).with_name("jupyter")), "lab", "--ip=127.0.0.1", f"--port={port}", "--no-browser",
           f"--ServerApp.root_dir={root}", f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(root.parent / "jupyterlab.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start: {(root.parent / 'jupyterlab.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_jupyterlab_renders_the_saved_widgets_of_trusted_notebooks(tmp_path):
    clone = tmp_path / "notebooks"
    clone.mkdir()
    for name in WIDGET_NOTEBOOKS:
        shutil.copy(ROOT / "notebooks" / name, clone / name)
    env = _jupyter_env(tmp_path)
    # what set-up and `make lab` run on the shipped notebooks
    subprocess.run([str(Path(sys.executable).with_name("jupyter")), "trust", *sorted(map(str, clone.glob("*.ipynb")))],
                   env=env, check=True, capture_output=True)
    shutil.copy(ROOT / "notebooks" / WIDGET_NOTEBOOKS[-1], clone / "untrusted.ipynb")  # never trusted: the control
    token = "nmtkit-browser-test"
    with jupyterlab(clone, env, token) as url:
        for name in WIDGET_NOTEBOOKS + ("untrusted.ipynb",):
            page = rendered(dump_dom(f"{url}/lab/tree/{name}?token={token}&reset", tmp_path, 40_000))
            texts = [t.strip() for t in page.outputs]
            assert texts, f"{name}: JupyterLab rendered no outputs"
            as_text = [t[:60] for t in texts if t.startswith(TEXT_REPRS)]
            if name == "untrusted.ipynb":
                # the control: untrusted, the same widgets show as their text reprs (what a fresh clone showed)
                assert as_text, "an untrusted notebook's widgets rendered: the check below proves nothing"
            else:
                assert not as_text, f"{name}: widgets shown as text: {as_text}"
                assert page.widgets, f"{name}: no widget view rendered"
                assert not [t for t in texts if "Error displaying widget" in t], f"{name}: a saved widget is missing"


def test_tensorboard_scalars_page_lists_the_homework_tags(tmp_path):
    write_events(tmp_path / "logs" / "run")
    with tensorboard_server(tmp_path / "logs") as url:
        get_json(f"{url}/data/plugin/scalars/tags", until=lambda b: len(b.get("run", {})) >= 3)  # runs load lazily
        dom = dump_dom(f"{url}/#scalars", tmp_path, 20_000)
    assert "TensorBoard" in dom
    assert any(tag in dom for tag in HOMEWORK_TAGS), "the scalars page lists none of the homework's tags"
