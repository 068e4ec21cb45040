"""WMT16 download and preparation, end to end against a local HTTP server (no real hosts are contacted).

The server (127.0.0.1, a thread started here) serves tiny archives with the real WMT16 layout, honours HTTP
Range requests, and can cut a response short once to simulate an interrupted download.
"""
import hashlib
import io
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nmtkit import config
from nmtkit.data import LineCountError, Utf8Error
from nmtkit.data import synthetic, wmt
from nmtkit.data.prepare import prepare
from nmtkit.data.text import read_lines


class _Handler(BaseHTTPRequestHandler):
    files: dict = {}
    cut_once: set = set()
    log: list = []

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        name = self.path.lstrip("/")
        self.log.append((name, self.headers.get("Range")))
        data = self.files.get(name)
        if data is None:
            self.send_error(404)
            return
        start = 0
        rng = self.headers.get("Range")
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if name in self.cut_once:  # promise the whole body, send a third of it, hang up
            self.cut_once.discard(name)
            self.wfile.write(body[: len(body) // 3])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture
def server():
    _Handler.files, _Handler.cut_once, _Handler.log = {}, set(), []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield _Handler, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr(wmt, "RETRY_BACKOFF", 0.0)


def _tgz(members: dict) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _text(lines) -> bytes:
    return "".join(l + "\n" for l in lines).encode()


def _sgm(lines, kind) -> bytes:
    segs = "".join(f'<seg id="{i + 1}">{l}</seg>\n' for i, l in enumerate(lines))
    return f'<{kind} setid="newstest2014">\n<doc sysid="x" docid="d1">\n{segs}</doc>\n</{kind}>\n'.encode()


def _archives(bad_europarl_de: bytes | None = None):
    """Tiny archives in WMT16's layout; europarl carries pairs that cleaning must drop."""
    pairs = synthetic.sample_pairs(400, seed=9)
    ep, cc, nc, dev, test = pairs[:120], pairs[120:240], pairs[240:300], pairs[300:350], pairs[350:400]
    ep_en = [e for e, _ in ep] + ["", "word " * 90, "a b c d e f g h i j k"]   # empty, too long, ratio
    ep_de = [d for _, d in ep] + ["leer", "Wort " * 90, "x"]
    return {
        "europarl-v7-de-en.tgz": _tgz({"europarl-v7.de-en.en": _text(ep_en),
                                       "europarl-v7.de-en.de": bad_europarl_de or _text(ep_de)}),
        "training-parallel-commoncrawl.tgz": _tgz({"commoncrawl.de-en.en": _text(e for e, _ in cc),
                                                   "commoncrawl.de-en.de": _text(d for _, d in cc),
                                                   "commoncrawl.fr-en.en": b"ignored\n"}),
        "training-parallel-nc-v11.tgz": _tgz({
            "training-parallel-nc-v11/news-commentary-v11.de-en.en": _text(e for e, _ in nc),
            "training-parallel-nc-v11/news-commentary-v11.de-en.de": _text(d for _, d in nc)}),
        "dev.tgz": _tgz({"dev/newstest2013.en": _text(e for e, _ in dev), "dev/newstest2013.de": _text(d for _, d in dev),
                         "dev/newstest2014-deen-src.en.sgm": _sgm([e for e, _ in test], "srcset"),
                         "dev/newstest2014-deen-ref.de.sgm": _sgm([d for _, d in test], "refset"),
                         "dev/newstest2012.en": b"unused\n"}),
    }, (ep, cc, nc, dev, test)


def _table(archives, **override):
    return [wmt.Source(s.name, s.url, s.archive, s.members, approx_bytes=len(archives[s.archive]),
                       size=len(archives[s.archive]), sha256=hashlib.sha256(archives[s.archive]).hexdigest(),
                       **override.get(s.archive, {}))
            for s in wmt.SOURCES]


def test_table_has_the_homework_corpora():
    names = " ".join(s.url for s in wmt.SOURCES)
    for part in ("europarl", "commoncrawl", "nc-v11", "dev.tgz"):
        assert part in names
    assert wmt.url_for(wmt.SOURCES[0], "http://mirror/x/") == "http://mirror/x/europarl-v7-de-en.tgz"


def test_download_resumes_an_interrupted_transfer(server, tmp_path):
    handler, base = server
    data = bytes(range(256)) * 400
    handler.files["big.bin"] = data
    handler.cut_once.add("big.bin")
    path = wmt.download(f"{base}/big.bin", tmp_path / "big.bin", size=len(data),
                        sha256=hashlib.sha256(data).hexdigest(), progress=False)
    assert path.read_bytes() == data
    assert handler.log[0] == ("big.bin", None)
    assert handler.log[1][1] == f"bytes={len(data) // 3}-"  # the second request resumed where the first stopped
    assert not (tmp_path / "big.bin.part").exists()


def test_download_resumes_a_partial_file_left_by_a_crash(server, tmp_path):
    handler, base = server
    data = b"0123456789" * 1000
    handler.files["f.tgz"] = data
    (tmp_path / "f.tgz.part").write_bytes(data[:1234])
    wmt.download(f"{base}/f.tgz", tmp_path / "f.tgz", size=len(data), progress=False)
    assert (tmp_path / "f.tgz").read_bytes() == data
    assert handler.log == [("f.tgz", "bytes=1234-")]


def test_corrupted_download_is_refused_and_deleted(server, tmp_path):
    handler, base = server
    handler.files["f.tgz"] = b"not what the table says" * 10
    with pytest.raises(wmt.ChecksumError, match="sha256"):
        wmt.download(f"{base}/f.tgz", tmp_path / "f.tgz", sha256="0" * 64, progress=False)
    with pytest.raises(wmt.ChecksumError, match="bytes, expected"):
        wmt.download(f"{base}/f.tgz", tmp_path / "f.tgz", size=5, progress=False)
    assert not (tmp_path / "f.tgz").exists() and not (tmp_path / "f.tgz.part").exists()


def test_missing_file_and_dead_server(server, tmp_path):
    handler, base = server
    with pytest.raises(wmt.DownloadError, match="HTTP 404"):
        wmt.download(f"{base}/nope.tgz", tmp_path / "nope.tgz", progress=False)
    with pytest.raises(wmt.DownloadError, match="rerun prepare to resume"):
        wmt.download("http://127.0.0.1:9/x.tgz", tmp_path / "x.tgz", progress=False, retries=1, timeout=2)


def test_disk_space_check_refuses_clearly(tmp_path):
    huge = [wmt.Source("x", "http://127.0.0.1:9/x.tgz", "x.tgz", {}, approx_bytes=10 ** 18)]
    with pytest.raises(wmt.DiskSpaceError, match=r"needs about [\d.,]+ GB free but only [\d.,]+ GB is free"):
        wmt.check_disk(tmp_path, huge)
    wmt.check_disk(tmp_path, [wmt.Source("x", "u", "x.tgz", {}, approx_bytes=1000)])  # small: fine


def test_prepare_wmt16_end_to_end(server, tmp_path, monkeypatch):
    handler, base = server
    archives, (ep, cc, nc, dev, test) = _archives()
    handler.files.update(archives)
    handler.cut_once.add("training-parallel-commoncrawl.tgz")
    monkeypatch.setattr(wmt, "SOURCES", _table(archives))
    cfg = config.load("wmt16-base", {"data.base_url": base, "data.vocab_size": 250, "data.bpe_sample": 1000,
                                     "data.max_len_ratio": 3.0})
    d = tmp_path / "wmt16"
    stats = prepare(cfg, data_dir=d, progress=False)
    assert stats.cleaning == {"input": 303, "kept": 300, "empty": 1, "too_short": 0, "too_long": 1, "ratio": 1}
    assert stats.train_lines == 300 and stats.source == "wmt16"
    train_en = read_lines(d / "train.en")
    assert sorted(train_en) == sorted(e for e, _ in ep + cc + nc)
    assert train_en != [e for e, _ in ep + cc + nc]  # shuffled (seeded)
    assert read_lines(d / "test.de") == [g for _, g in test]  # extracted from the SGML reference
    assert read_lines(d / "dev.en") == [e for e, _ in dev]
    assert ("training-parallel-commoncrawl.tgz", "bytes=") in [(n, (r or "")[:6]) for n, r in handler.log]
    # A rerun is quick and downloads nothing.
    handler.log.clear()
    prepare(cfg, data_dir=d, progress=False)
    assert handler.log == []


def test_wmt_bad_archive_content(server, tmp_path, monkeypatch):
    handler, base = server
    cfg = config.load("wmt16-base", {"data.base_url": base})
    # The German side has a line fewer than the English side.
    archives, _ = _archives(bad_europarl_de=_text(["Zeile"] * 120))
    handler.files.update(archives)
    monkeypatch.setattr(wmt, "SOURCES", _table(archives))
    with pytest.raises(LineCountError, match=r"europarl-v7.de-en.en has 123 lines but .*europarl-v7.de-en.de has 120"):
        prepare(cfg, data_dir=tmp_path / "a", progress=False)
    # Latin-1 bytes in the German side.
    archives, _ = _archives(bad_europarl_de=_text(["ok"] * 5) + b"Gr\xfc\xdfe\n" + _text(["ok"] * 117))
    handler.files.update(archives)
    monkeypatch.setattr(wmt, "SOURCES", _table(archives))
    with pytest.raises(Utf8Error, match=r"europarl-v7.de-en.de: line 6"):
        prepare(cfg, data_dir=tmp_path / "b", progress=False)
    assert not (tmp_path / "b" / "train.en").exists()  # nothing half-made looks finished


def test_local_directory_as_base_url(tmp_path):
    src = tmp_path / "mirror"
    src.mkdir()
    (src / "f.tgz").write_bytes(b"abc" * 100)
    path = wmt.download(str(src / "f.tgz"), tmp_path / "out" / "f.tgz", size=300, progress=False)
    assert path.read_bytes() == b"abc" * 100
