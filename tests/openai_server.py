"""An OpenAI-compatible chat server on 127.0.0.1 (stdlib only) answering as ``fake_learner``.

A plain ``langchain_openai.ChatOpenAI`` pointed at it makes real HTTP calls over
pooled keep-alive connections, as it would to a real provider, with no network.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langgraph_combee.testing import fake_learner

_ROLES = {"system": SystemMessage, "developer": SystemMessage, "user": HumanMessage}


def _message(item: dict[str, Any]) -> BaseMessage:
    content = item.get("content") or ""
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return _ROLES.get(item.get("role", ""), AIMessage)(content=content)


class FakeOpenAI(http.server.BaseHTTPRequestHandler):
    """Answers ``POST /v1/chat/completions`` with ``fake_learner``'s reply; counts requests."""

    protocol_version = "HTTP/1.1"  # keep-alive: the client pools its connections
    requests = 0
    learner = fake_learner()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        type(self).requests += 1
        reply = self.learner.invoke([_message(m) for m in body.get("messages", [])])
        out = json.dumps(
            {
                "id": f"chatcmpl-{self.requests}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "fake"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": reply.content},
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        del args  # quiet


@pytest.fixture
def openai_server() -> Iterator[str]:
    """The ``base_url`` (``http://127.0.0.1:<port>/v1``) of a fresh fake OpenAI server."""
    FakeOpenAI.requests = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
