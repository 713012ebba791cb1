"""The benchmark's learner: ``fake_learner`` made tolerant of clipped aggregator prompts.

The learner fences each level-1 proposal in the aggregator prompt and clips every
fenced block to ``MAX_FIELD_CHARS`` (4000) characters. A proposal with more than
about 20 ADD operations is therefore cut mid-operation. ``fake_learner`` then fails
to parse the cut line (and the step fails after its retries); a real model would
read the clipped text and silently lose the cut operations. This wrapper does what
the real model would: it drops the broken lines, and counts them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, SystemMessage

from langgraph_combee._learning.parsing import message_text
from langgraph_combee.testing import FunctionChatModel, fake_learner

InsightFn = Callable[[str, str | None, str], str]


@dataclass
class ClipStats:
    """Aggregator prompts whose proposals were clipped, and operation lines lost."""

    prompts: int = 0
    lost_lines: int = 0


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _without_broken_lines(message: BaseMessage, stats: ClipStats) -> BaseMessage:
    kept = []
    for line in message_text(message.content).splitlines():
        if line.lstrip().startswith("{") and not _parses(line.strip()):
            stats.lost_lines += 1
            continue
        kept.append(line)
    return message.model_copy(update={"content": "\n".join(kept)})


def tolerant_learner(insight: InsightFn, stats: ClipStats | None = None) -> FunctionChatModel:
    """``fake_learner(insight=...)`` that skips operation lines cut by prompt clipping."""
    reply_fn = fake_learner(insight=insight).fn
    counter = stats if stats is not None else ClipStats()

    def reply(messages: Sequence[BaseMessage]) -> object:
        try:
            return reply_fn(list(messages))
        except json.JSONDecodeError:
            counter.prompts += 1
            return reply_fn(
                [
                    m if isinstance(m, SystemMessage) else _without_broken_lines(m, counter)
                    for m in messages
                ]
            )

    return FunctionChatModel(reply)
