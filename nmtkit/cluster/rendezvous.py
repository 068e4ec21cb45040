"""The Horovod rendezvous: the HTTP key-value store Gloo's ranks use to find each other, run by the driver.

Who can reach it: it listens on ONE address, the driver's address on the private network that reaches the nodes
(127.0.0.1 for local engines; `cluster.listen`), never on every interface, and only while a job starts or runs.
Its store is unauthenticated, as in Horovod itself: anyone who can reach that address and port can read, write
and delete keys, so keep the address private. It answers only the rendezvous protocol (GET/PUT/DELETE of
/<scope>/<key>); HEAD and any other path get 405/404 without touching the file system.
"""
from __future__ import annotations

import threading
from http import HTTPStatus

from horovod.runner.common.util.hosts import SlotInfo
from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

from nmtkit.errors import ClusterError


class StoreOnlyHandler(RendezvousHandler):
    """Horovod's handler without the file server it inherits from SimpleHTTPRequestHandler.

    Horovod's RendezvousHandler keeps SimpleHTTPRequestHandler's do_HEAD, so `HEAD /<file>` would answer 200 and
    the size of any file under the driver's working directory; and GET of a malformed path would raise inside it.
    """

    def __init__(self, *args, **kwargs):
        # SimpleHTTPRequestHandler reads os.getcwd() here (its file root); this handler never serves files.
        super().__init__(*args, directory="/nonexistent", **kwargs)

    def _store_path(self) -> bool:
        """True for /<scope>/<key>, the only paths of the store; otherwise answer 404 (no file system involved)."""
        parts = self.path.split("/")
        if len(parts) == 3 and parts[0] == "" and parts[1] and parts[2]:
            return True
        self.send_status_code(HTTPStatus.NOT_FOUND)
        return False

    def do_GET(self):
        if self._store_path():
            super().do_GET()

    def do_PUT(self):
        if self._store_path():
            super().do_PUT()

    def do_DELETE(self):
        if self._store_path():
            super().do_DELETE()

    def do_HEAD(self):
        self.send_status_code(HTTPStatus.METHOD_NOT_ALLOWED)

    def send_head(self):  # SimpleHTTPRequestHandler's file lookup: never used
        self.send_status_code(HTTPStatus.NOT_FOUND)
        return None


class Rendezvous:
    """A fresh rendezvous server for one job, bound to `addr`, holding the job's slot plan; stop() ends it.

    horovod.runner's RendezvousServer binds every interface (its find_port uses ''); this binds the same server
    class to one address.
    """

    def __init__(self, addr: str, slots: list[SlotInfo]):
        self.addr = addr
        try:
            self._httpd = RendezvousHTTPServer((addr, 0), StoreOnlyHandler, 0)
        except OSError as e:
            raise ClusterError(f"cannot listen for the Horovod rendezvous on {addr}: {e}; set cluster.listen to "
                               f"an address of this machine") from None
        self.port = self._httpd.server_address[1]
        self._httpd.init(slots)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="hvd-rendezvous", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None
