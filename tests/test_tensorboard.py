"""TensorBoard starts on the kit's environment and serves the homework's tags (issue 13, item 5).

setuptools 81 removed `pkg_resources`, which TensorBoard 2.18 imports: with an unpinned setuptools, `tensorboard`
(and `%tensorboard` in the notebooks) exits with 1 at once. Here it is started as the notebooks start it and asked
for the scalars over its HTTP API.
"""
from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
import warnings
from pathlib import Path

import pytest

HOMEWORK_TAGS = ("train_loss", "Eval_BLEU_Score", "learning_rate")


def write_events(run: Path, steps: int = 5) -> Path:
    """A tiny run's TensorBoard events with the homework's tags, written the way the trainer writes them."""
    from nmtkit.keras2 import import_tf
    tf = import_tf()
    writer = tf.summary.create_file_writer(str(run))
    with writer.as_default():
        for step in range(1, steps + 1):
            tf.summary.scalar("train_loss", 5.0 / step, step=step)
            tf.summary.scalar("learning_rate", 1e-3 * step, step=step)
            if step % 2 == 0:
                tf.summary.scalar("Eval_BLEU_Score", 10.0 * step, step=step)
    writer.close()
    return run


def tensorboard_command() -> str:
    """The venv's `tensorboard`, the one `%tensorboard` runs (the kernel's PATH starts with the venv's bin)."""
    exe = Path(sys.executable).with_name("tensorboard")
    assert exe.exists(), f"{exe} missing: TensorBoard is a pinned dependency (pyproject.toml)"
    return str(exe)


@contextlib.contextmanager
def tensorboard_server(logdir: Path, timeout: float = 90.0):
    """Start TensorBoard on 127.0.0.1 and a port the OS picks; yield its base URL once it answers; stop it."""
    proc = subprocess.Popen([tensorboard_command(), "--logdir", str(logdir), "--host", "127.0.0.1", "--port", "0",
                             "--reload_interval", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # never blocks on a full pipe
    reader.start()
    try:
        deadline, url = time.monotonic() + timeout, None
        while url is None:
            m = re.search(r"(http://127\.0\.0\.1:\d+)/", "".join(lines))
            if m:
                url = m.group(1)
            elif proc.poll() is not None:
                reader.join(5)
                pytest.fail(f"tensorboard exited with {proc.returncode}:\n{''.join(lines)[-3000:]}")
            elif time.monotonic() > deadline:
                pytest.fail(f"tensorboard printed no URL in {timeout:.0f} s:\n{''.join(lines)[-3000:]}")
            else:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def get_json(url: str, timeout: float = 60.0, until=lambda body: True):
    """GET a JSON endpoint, retrying until it answers and `until(body)` holds (TensorBoard loads runs lazily)."""
    deadline, body, error = time.monotonic() + timeout, None, None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
            if until(body):
                return body
        except OSError as e:  # not listening yet, or 5xx while the run loads
            error = e
        time.sleep(0.5)
    pytest.fail(f"{url}: no satisfying answer in {timeout:.0f} s (last body {body!r}, last error {error!r})")


def test_pkg_resources_is_importable():
    # what TensorBoard 2.18 needs from setuptools (gone in setuptools 81); its deprecation warning is expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pkg_resources  # noqa: F401


@pytest.mark.slow
def test_tensorboard_serves_the_homework_tags(tmp_path):
    write_events(tmp_path / "run")
    with tensorboard_server(tmp_path) as url:
        tags = get_json(f"{url}/data/plugin/scalars/tags", until=lambda b: "run" in b and len(b["run"]) >= 3)
        assert set(HOMEWORK_TAGS) <= set(tags["run"]), tags
        points = get_json(f"{url}/data/plugin/scalars/scalars?run=run&tag=Eval_BLEU_Score")
        assert [(p[1], round(p[2], 3)) for p in points] == [(2, 20.0), (4, 40.0)]
