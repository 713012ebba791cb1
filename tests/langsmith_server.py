"""A loopback HTTP server standing in for LangSmith's API: it records what is posted."""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with ``{}`` and records (method, path, JSON body).

    Feedback is kept like LangSmith keeps it: ``POST /feedback`` stores it and
    ``GET /feedback?run=..&key=..&limit=..&offset=..`` lists it, filtered and
    paged (unless a canned answer for ``GET /feedback`` is set). ``status``
    set to an error code makes every request fail with it (an outage).
    """

    bodies: ClassVar[list[tuple[str, str, dict[str, Any]]]] = []
    # Canned answers: (method, path prefix) -> JSON value; the longest prefix wins.
    responses: ClassVar[dict[tuple[str, str], Any]] = {}
    feedback: ClassVar[list[dict[str, Any]]] = []
    status: ClassVar[int] = 200

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
        self.send_response(self.status)
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
        if self.command == "POST" and self.path == "/feedback" and self.status == 200:
            # LangSmith fills in the trace of the run; feedback on a root run is its own.
            self.feedback.append({"trace_id": body.get("run_id"), **body})
        self._reply(self._canned() or b"{}")

    do_PATCH = do_POST

    def do_GET(self) -> None:
        self.bodies.append((self.command, self.path, {}))
        canned = self._canned()
        if canned is None and self.path.startswith("/feedback?"):
            canned = json.dumps(self._list_feedback()).encode()
        self._reply(canned or b'{"batch_ingest_config": {"use_multipart_endpoint": false}}')

    def _list_feedback(self) -> list[dict[str, Any]]:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        runs, keys = set(query.get("run", [])), set(query.get("key", []))
        found = [
            f
            for f in self.feedback
            if (not runs or f.get("run_id") in runs) and (not keys or f.get("key") in keys)
        ]
        offset, limit = int(query.get("offset", ["0"])[0]), int(query.get("limit", ["100"])[0])
        return found[offset : offset + limit]


@pytest.fixture
def langsmith_server() -> Iterator[str]:
    """The URL of a fresh recording server on 127.0.0.1 (bodies in ``Recorder.bodies``)."""
    Recorder.bodies = []
    Recorder.responses = {}
    Recorder.feedback = []
    Recorder.status = 200
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
