"""The kit's Horovod rendezvous server answers only the rendezvous protocol: HEAD and paths outside the key-value
store reveal nothing about the driver's files (Horovod's own handler answers HEAD /<file> with the file's size).
A real 2-rank rendezvous through it is covered by tests/test_cluster.py (rank_check)."""
import http.client
import threading

import pytest

pytest.importorskip("horovod", reason="Horovod is not installed: make setup (scripts/setup.sh) builds it")
from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

from nmtkit.cluster.plan import assign_slots
from nmtkit.cluster.rendezvous import Rendezvous

SECRET_SIZE = 1234


@pytest.fixture
def in_dir_with_a_file(tmp_path, monkeypatch):
    (tmp_path / "notes.txt").write_bytes(b"x" * SECRET_SIZE)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "key.pem").write_bytes(b"y" * SECRET_SIZE)
    monkeypatch.chdir(tmp_path)  # the driver's working directory, which SimpleHTTPRequestHandler would serve
    return tmp_path


@pytest.fixture
def server(in_dir_with_a_file):
    rdv = Rendezvous("127.0.0.1", assign_slots(["node0", "node1"]))
    yield rdv
    rdv.stop()


def request(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def test_bound_to_the_one_address_given(server):
    assert server._httpd.server_address[0] == "127.0.0.1"


@pytest.mark.parametrize("path", ["/notes.txt", "/sub/key.pem", "/", "/sub/", "/nope"])
def test_head_reveals_nothing(server, path):
    status, headers, body = request(server.port, "HEAD", path)
    assert status == 405
    assert headers.get("Content-Length") != str(SECRET_SIZE) and body == b""


@pytest.mark.parametrize("path", ["/notes.txt", "/", "/sub/", "/a/b/c", "//notes.txt", "/../notes.txt"])
def test_get_outside_the_store_is_404(server, path):
    status, headers, body = request(server.port, "GET", path)
    assert status == 404 and body == b"" and headers.get("Content-Length") == "0"


def test_get_of_a_file_path_is_a_missing_key_not_the_file(server):
    # /sub/key.pem has the store's shape (/scope/key): it is looked up in the store, never on disk
    status, _, body = request(server.port, "GET", "/sub/key.pem")
    assert status == 404 and body == b""


def test_the_store_still_works(server):
    assert request(server.port, "PUT", "/global/rank0", body=b"addr-of-rank-0")[0] == 200
    status, _, body = request(server.port, "GET", "/global/rank0")
    assert (status, body) == (200, b"addr-of-rank-0")
    assert request(server.port, "DELETE", "/global/rank0")[0] == 200
    assert request(server.port, "PUT", "/a/b/c", body=b"v")[0] == 404


def test_horovods_own_handler_would_reveal_the_file(in_dir_with_a_file):
    """Why the kit subclasses the handler: the same request against Horovod's handler leaks the size."""
    httpd = RendezvousHTTPServer(("127.0.0.1", 0), RendezvousHandler, 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        status, headers, _ = request(httpd.server_address[1], "HEAD", "/notes.txt")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert status == 200 and headers["Content-Length"] == str(SECRET_SIZE)
