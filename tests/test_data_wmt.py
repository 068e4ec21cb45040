"""WMT16 download and preparation, end to end against a local HTTP server (no real hosts are contacted).

The server (127.0.0.1, a thread started here) serves tiny archives with the real WMT16 layout, honours HTTP
Range requests, and can cut a response short once to simulate an interrupted download.
"""
import dataclasses
import hashlib
import io
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nmtkit import config
from nmtkit.data import synthetic, wmt
from nmtkit.data.prepare import prepare
from nmtkit.data.text import read_lines
from nmtkit.errors import DataError


class _Handler(BaseHTTPRequestHandler):
    files: dict = {}
    cut_once: set = set()
    no_length: set = set()  # answer without Content-Length (the body ends when the connection closes)
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
        if name not in self.no_length:
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
    _Handler.files, _Handler.cut_once, _Handler.no_length, _Handler.log = {}, set(), set(), []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield _Handler, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch, tmp_path):
    monkeypatch.setattr(wmt, "RETRY_BACKOFF", 0.0)
    monkeypatch.setenv("SACREBLEU", str(tmp_path / "no_sacrebleu_cache"))  # never the user's ~/.sacrebleu


def _tgz(members: dict) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _text(lines) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def _sgm(lines, kind, setid) -> bytes:
    segs = "".join(f'<seg id="{i + 1}">{line}</seg>\n' for i, line in enumerate(lines))
    return f'<{kind} setid="{setid}">\n<doc sysid="x" docid="d1">\n{segs}</doc>\n</{kind}>\n'.encode()


def _archives(bad_europarl_de: bytes | None = None):
    """Tiny archives in WMT16's layout; europarl carries pairs that cleaning must drop; news commentary and
    the dev set come with Windows line ends."""
    pairs = synthetic.sample_pairs(400, seed=9)
    ep, cc, nc, dev, test = pairs[:120], pairs[120:240], pairs[240:300], pairs[300:350], pairs[350:400]
    ep_en = [e for e, _ in ep] + ["", "word " * 90, "a b c d e f g h i j k"]   # empty, too long, ratio
    ep_de = [d for _, d in ep] + ["leer", "Wort " * 90, "x"]
    def crlf(data):
        return data.replace(b"\n", b"\r\n")
    return {
        "training-parallel-europarl-v7.tgz": _tgz({"training/europarl-v7.de-en.en": _text(ep_en),
                                                   "training/europarl-v7.de-en.de": bad_europarl_de or _text(ep_de),
                                                   "training/europarl-v7.fr-en.en": b"ignored\n"}),
        "training-parallel-commoncrawl.tgz": _tgz({"commoncrawl.de-en.en": _text(e for e, _ in cc),
                                                   "commoncrawl.de-en.de": _text(d for _, d in cc),
                                                   "commoncrawl.fr-en.en": b"ignored\n"}),
        "training-parallel-nc-v11.tgz": _tgz({
            "training-parallel-nc-v11/news-commentary-v11.de-en.en": crlf(_text(e for e, _ in nc)),
            "training-parallel-nc-v11/news-commentary-v11.de-en.de": crlf(_text(d for _, d in nc))}),
        "wmt13.test.tgz": _tgz({"test/newstest2013-src.en.sgm": crlf(_sgm([e for e, _ in dev], "srcset",
                                                                          "newstest2013")),
                                "test/newstest2013-src.de.sgm": crlf(_sgm([d for _, d in dev], "srcset",
                                                                          "newstest2013")),
                                "test/newstest2013-src.fr.sgm": b"unused\n"}),
        "wmt14.test-filtered.tgz": _tgz({
            "test/newstest2014-deen-src.en.sgm": _sgm([e for e, _ in test], "srcset", "newstest2014"),
            "test/newstest2014-deen-ref.de.sgm": _sgm([d for _, d in test], "refset", "newstest2014"),
            "test/newstest2014-fren-src.en.sgm": b"unused\n"}),
    }, (ep, cc, nc, dev, test)


def _table(archives):
    """SOURCES with the test archives' values pinned, of the same kinds as the real ones (size+sha256, or md5)."""
    def pins(s, data):
        return {"size": len(data) if s.size else None, "sha256": hashlib.sha256(data).hexdigest() if s.sha256 else None,
                "md5": hashlib.md5(data).hexdigest() if s.md5 else None}
    return [dataclasses.replace(s, approx_bytes=len(archives[s.archive]), **pins(s, archives[s.archive]))
            for s in wmt.SOURCES]


def test_table_has_the_homework_corpora_pinned():
    names = " ".join(s.url for s in wmt.SOURCES)
    for part in ("europarl-v7", "commoncrawl", "nc-v11", "wmt13/test.tgz", "wmt14/test-filtered.tgz"):
        assert part in names
    for s in wmt.SOURCES:
        assert s.url.startswith("https://") and wmt.urls_for(s) == [s.url, "http://" + s.url[8:]]
        assert (s.size and len(s.sha256 or "") == 64) or len(s.md5 or "") == 32, s.name
    assert wmt.url_for(wmt.SOURCES[0], "http://mirror/x/") == "http://mirror/x/training-parallel-europarl-v7.tgz"
    assert wmt.urls_for(wmt.SOURCES[0], "http://mirror/x") == ["http://mirror/x/training-parallel-europarl-v7.tgz"]


def test_test_sets_are_sacrebleus():
    """newstest2013/2014: the URL, md5, cache name and en-de files that sacreBLEU itself uses and verifies."""
    sacrebleu_dataset = pytest.importorskip("sacrebleu.dataset", reason="pip install sacrebleu")
    for s in wmt.SOURCES:
        if not s.sacrebleu:
            continue
        ds = sacrebleu_dataset.DATASETS[s.sacrebleu]
        assert (s.url, s.md5) == (ds.data[0], ds.md5[0])
        assert s.archive == ds._get_tarball_filename(ds.data[0])
        assert sorted(s.members.values()) == sorted(p.rsplit("/", 1)[-1] for p in ds.langpairs["en-de"])


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


def test_corrupted_download_is_refused_and_moved_aside(server, tmp_path):
    handler, base = server
    data = b"not what the table says" * 10
    handler.files["f.tgz"] = data
    aside = tmp_path / f"f.tgz.bad-{hashlib.sha256(data).hexdigest()[:12]}"
    with pytest.raises(DataError) as e:
        wmt.download(f"{base}/f.tgz", tmp_path / "f.tgz", sha256="0" * 64, progress=False)
    assert str(e.value).startswith(f"{tmp_path / 'f.tgz'}: sha256 {hashlib.sha256(data).hexdigest()}, expected "
                                   f"{'0' * 64}")
    assert "moved aside to " + aside.name in str(e.value) and "\n" not in str(e.value)
    assert aside.read_bytes() == data  # kept for a look, never used, never deleted
    aside.unlink()
    with pytest.raises(DataError, match=r"f.tgz: size 230 bytes, expected 5; moved aside"):
        wmt.download(f"{base}/f.tgz", tmp_path / "f.tgz", size=5, progress=False)
    with pytest.raises(DataError, match=r"md5 [0-9a-f]{32}, expected f{32}"):
        wmt.download(f"{base}/f.tgz", tmp_path / "f.tgz", md5="f" * 32, progress=False)
    assert not (tmp_path / "f.tgz").exists() and not (tmp_path / "f.tgz.part").exists()
    assert [p.name for p in tmp_path.iterdir()] == [aside.name]


def test_a_file_already_in_place_is_verified_too(server, tmp_path):
    handler, base = server
    data = b"good archive" * 50
    handler.files["f.tgz"] = data
    (tmp_path / "f.tgz").write_bytes(data[:-1] + b"!")  # same size, one byte changed
    with pytest.raises(DataError, match="sha256"):
        wmt.download(f"{base}/f.tgz", tmp_path / "f.tgz", size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                     progress=False)
    assert not (tmp_path / "f.tgz").exists() and len(list(tmp_path.glob("f.tgz.bad-*"))) == 1
    assert handler.log == []  # refused before anything was fetched; the rerun downloads it afresh
    wmt.download(f"{base}/f.tgz", tmp_path / "f.tgz", size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                 progress=False)
    assert (tmp_path / "f.tgz").read_bytes() == data


def test_no_content_length_still_ends_verified_or_refused(server, tmp_path):
    handler, base = server
    data = bytes(range(256)) * 300
    handler.files["f.tgz"] = data
    handler.no_length.add("f.tgz")
    handler.cut_once.add("f.tgz")  # the connection closes after a third: looks like a complete body
    sha = hashlib.sha256(data).hexdigest()
    # With the size pinned, the short body is noticed and resumed with a Range request.
    path = wmt.download(f"{base}/f.tgz", tmp_path / "a" / "f.tgz", size=len(data), sha256=sha, progress=False)
    assert path.read_bytes() == data and handler.log[1] == ("f.tgz", f"bytes={len(data) // 3}-")
    # With only a hash pinned, the short file is refused and moved aside, never renamed into place.
    handler.cut_once.add("f.tgz")
    with pytest.raises(DataError, match=f"md5 .*, expected {hashlib.md5(data).hexdigest()}"):
        wmt.download(f"{base}/f.tgz", tmp_path / "b" / "f.tgz", md5=hashlib.md5(data).hexdigest(), progress=False)
    assert not (tmp_path / "b" / "f.tgz").exists()
    assert [p.stat().st_size for p in (tmp_path / "b").glob("f.tgz.bad-*")] == [len(data) // 3]


def test_https_first_then_http_and_sacrebleus_cache(server, tmp_path, monkeypatch, capsys):
    handler, base = server
    data = b"test sets" * 100
    handler.files["t.tgz"] = data
    src = wmt.Source("t", base.replace("http://", "https://") + "/t.tgz", "t.tgz", {},
                     md5=hashlib.md5(data).hexdigest())
    # The test server speaks no TLS: the https attempt fails, the http form is tried, and the md5 still applies.
    path = wmt.fetch(src, tmp_path / "raw", progress=True)
    assert path.read_bytes() == data and "trying http://127.0.0.1" in capsys.readouterr().out
    unpinned = dataclasses.replace(src, md5=None)
    with pytest.raises(DataError, match="no size or checksum pinned"):
        wmt.fetch(unpinned, tmp_path / "raw2", progress=False)
    # sacreBLEU's own copy is used when it has one (no download at all).
    cache = tmp_path / "sb"
    (cache / "wmt99" / "raw").mkdir(parents=True)
    (cache / "wmt99" / "raw" / "t.tgz").write_bytes(data)
    monkeypatch.setenv("SACREBLEU", str(cache))
    handler.log.clear()
    path = wmt.fetch(dataclasses.replace(src, sacrebleu="wmt99"), tmp_path / "raw3", progress=False)
    assert path.read_bytes() == data and handler.log == []


def test_missing_file_and_dead_server(server, tmp_path):
    handler, base = server
    with pytest.raises(DataError, match="HTTP 404"):
        wmt.download(f"{base}/nope.tgz", tmp_path / "nope.tgz", progress=False)
    with pytest.raises(DataError, match="rerun prepare to resume"):
        wmt.download("http://127.0.0.1:9/x.tgz", tmp_path / "x.tgz", progress=False, retries=1, timeout=2)


def test_disk_space_check_refuses_clearly(tmp_path):
    huge = [wmt.Source("x", "http://127.0.0.1:9/x.tgz", "x.tgz", {}, approx_bytes=10 ** 18)]
    with pytest.raises(DataError, match=r"needs about [\d.,]+ GB free but only [\d.,]+ GB is free"):
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
    for name in ("train.en", "train.de", "dev.en", "dev.de", "test.en", "test.de"):
        assert b"\r" not in (d / name).read_bytes(), name  # CRLF normalised the same way in every split
    assert ("training-parallel-commoncrawl.tgz", "bytes=") in [(n, (r or "")[:6]) for n, r in handler.log]
    # A rerun is quick and downloads nothing.
    handler.log.clear()
    prepare(cfg, data_dir=d, progress=False)
    assert handler.log == []


def test_prepare_refuses_a_tampered_archive(server, tmp_path, monkeypatch):
    handler, base = server
    archives, _ = _archives()
    monkeypatch.setattr(wmt, "SOURCES", _table(archives))
    name = "training-parallel-nc-v11.tgz"
    good = archives[name]
    handler.files.update(archives)
    handler.files[name] = good[:100] + bytes([good[100] ^ 1]) + good[101:]  # same size, one bit flipped
    cfg = config.load("wmt16-base", {"data.base_url": base})
    d = tmp_path / "wmt16"
    with pytest.raises(DataError, match=f"{name}: sha256 [0-9a-f]{{64}}, expected {hashlib.sha256(good).hexdigest()}"):
        prepare(cfg, data_dir=d, progress=False)
    assert not (d / "raw" / name).exists() and len(list((d / "raw").glob(name + ".bad-*"))) == 1
    assert not (d / "train.en").exists()


def test_wmt_bad_archive_content(server, tmp_path, monkeypatch):
    handler, base = server
    cfg = config.load("wmt16-base", {"data.base_url": base})
    # The German side has a line fewer than the English side.
    archives, _ = _archives(bad_europarl_de=_text(["Zeile"] * 120))
    handler.files.update(archives)
    monkeypatch.setattr(wmt, "SOURCES", _table(archives))
    with pytest.raises(DataError, match=r"europarl-v7.de-en.en has 123 lines but .*europarl-v7.de-en.de has 120"):
        prepare(cfg, data_dir=tmp_path / "a", progress=False)
    # Latin-1 bytes in the German side.
    archives, _ = _archives(bad_europarl_de=_text(["ok"] * 5) + b"Gr\xfc\xdfe\n" + _text(["ok"] * 117))
    handler.files.update(archives)
    monkeypatch.setattr(wmt, "SOURCES", _table(archives))
    with pytest.raises(DataError, match=r"europarl-v7.de-en.de: line 6"):
        prepare(cfg, data_dir=tmp_path / "b", progress=False)
    assert not (tmp_path / "b" / "train.en").exists()  # nothing half-made looks finished


def test_local_directory_as_base_url(tmp_path):
    src = tmp_path / "mirror"
    src.mkdir()
    (src / "f.tgz").write_bytes(b"abc" * 100)
    path = wmt.download(str(src / "f.tgz"), tmp_path / "out" / "f.tgz", size=300, progress=False)
    assert path.read_bytes() == b"abc" * 100

