"""A loopback HTTP server standing in for LangSmith's API: it records what is posted."""

from __future__ import annotations

import gzip
import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with ``{}`` and records (method, path, JSON body)."""

    bodies: ClassVar[list[tuple[str, str, dict[str, Any]]]] = []
    # Canned answers: (method, path prefix) -> JSON value; the longest prefix wins.
    responses: ClassVar[dict[tuple[str, str], Any]] = {}

    def _canned(self) -> bytes | None:
        matches = [
            (len(prefix), value)
            for (method, prefix), value in self.responses.items()
            if method == self.command and self.path.startswith(prefix)
        ]
        return json.dumps(max(matches, key=lambda m: m[0])[1]).encode() if matches else None

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, payload: bytes = b"{}") -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.headers.get("content-encoding") == "gzip":
            raw = gzip.decompress(raw)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        self.bodies.append((self.command, self.path, body))
        self._reply(self._canned() or b"{}")

    do_PATCH = do_POST

    def do_GET(self) -> None:
        self.bodies.append((self.command, self.path, {}))
        self._reply(self._canned() or b'{"batch_ingest_config": {"use_multipart_endpoint": false}}')


@pytest.fixture
def langsmith_server() -> Iterator[str]:
    """The URL of a fresh recording server on 127.0.0.1 (bodies in ``Recorder.bodies``)."""
    Recorder.bodies = []
    Recorder.responses = {}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
