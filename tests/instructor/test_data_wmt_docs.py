"""The disk need the instructor's guide quotes is the computed one."""
from __future__ import annotations

import re
from pathlib import Path
from unittest import mock

import pytest

from nmtkit.data import wmt
from nmtkit.errors import DataError


def test_the_docs_quote_the_one_computed_disk_need():
    assert wmt.disk_need_bytes() == int(wmt.DISK_FACTOR * sum(s.approx_bytes for s in wmt.SOURCES))
    assert 1e9 < wmt.download_bytes() < wmt.disk_need_bytes()  # the pins sum to GBs; preparing needs more than that
    assert wmt.DISK_NEED_GB == round(wmt.disk_need_bytes() / 1e9, 1)
    root = Path(__file__).resolve().parents[2]
    for doc in ("data/README.md", "docs/instructors.md"):
        text = " ".join((root / doc).read_text().split())  # a figure may be wrapped across lines
        need = re.findall(r"([\d.]+) GB (?:of )?free", text)
        downloads = re.findall(r"downloads ([\d.]+) GB|([\d.]+) GB of downloads", text)
        assert need and {float(x) for x in need} == {wmt.DISK_NEED_GB}, (doc, need)
        assert downloads and {float(a or b) for a, b in downloads} == {wmt.DOWNLOAD_GB}, (doc, downloads)
    # prepare's refusal, with nothing downloaded yet, names the same figure
    with mock.patch.object(wmt, "disk_free", return_value=0), \
            pytest.raises(DataError, match=f"needs about {wmt.DISK_NEED_GB:.1f} GB free"):
        wmt.check_disk(root / "no-such-dir", wmt.SOURCES)
