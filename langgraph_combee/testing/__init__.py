"""Network-free chat-model test doubles for testing code built on langgraph-combee.

* :class:`ScriptedChatModel` returns canned replies (strings, messages with tool
  calls, exceptions, or reply functions) in order.
* :class:`FunctionChatModel` replies with ``fn(messages)``; ``fn`` may be async.
* :class:`LatencyChatModel` wraps another chat model and waits a simulated,
  token-dependent latency, counting calls, tokens and peak concurrency.
* :class:`FlakyStore` wraps a LangGraph store and fails every operation while
  "down" (``with store.outage(): ...``), to test behaviour through an outage.

The chat models are LangChain ``BaseChatModel`` subclasses that report ``usage_metadata``
(estimated with about four characters a token), support ``bind_tools`` and
``with_structured_output`` (JSON parsed from the reply text), and record the prompts
they receive.

Example:
    ```python
    from langgraph_combee.testing import ScriptedChatModel

    model = ScriptedChatModel(replies=["first answer", "second answer"])
    assert model.invoke("question").content == "first answer"
    assert model.calls == 1
    ```
"""

from __future__ import annotations

from langgraph_combee.testing._base import parse_structured_reply
from langgraph_combee.testing._latency import LatencyChatModel
from langgraph_combee.testing._learner import comment_insight, default_insight, fake_learner
from langgraph_combee.testing._models import (
    FunctionChatModel,
    ReplyFunction,
    ScriptedChatModel,
    ScriptedReply,
    ScriptExhaustedError,
)
from langgraph_combee.testing._parrot import parrot_learner
from langgraph_combee.testing._store import FlakyStore

__all__ = [
    "FlakyStore",
    "FunctionChatModel",
    "LatencyChatModel",
    "ReplyFunction",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "ScriptedReply",
    "comment_insight",
    "default_insight",
    "fake_learner",
    "parrot_learner",
    "parse_structured_reply",
]
