"""A worst-case learner double: it turns whatever the user wrote into a bullet.

``parrot_learner()`` plays reflector, curator and aggregator like
``fake_learner()``, but its reflector also copies every piece of user-controlled
text of the run (the input, the transcript with tool outputs, the feedback
comment) verbatim into the reflection, and its curator proposes that text as a
new bullet. It models a learner LLM that an injection fully persuaded, so that
whatever stops a planted instruction in a test is the guard, not the learner.
With ``separately=True`` each piece becomes a bullet of its own: a learner that
leaves the customer's ticket out and writes only what a comment, a tool's result
or its error said.
"""

from __future__ import annotations

import json
import re

from langgraph_combee.testing._learner import (
    _EXISTING,
    InsightFn,
    _fenced,
    default_insight,
    role_player,
)
from langgraph_combee.testing._models import FunctionChatModel

_ROLE = re.compile(r"^(user|human|assistant|ai|system|tool)(\s+\S+)?:\s?", re.IGNORECASE)


_PIECE = "\n\n"


def _user_pieces(blocks: dict[str, str]) -> list[str]:
    parts = [blocks.get("input", "")]
    for line in blocks.get("transcript", "").splitlines():
        line = line.strip()
        if line.startswith("-> tool call"):
            continue
        parts.append(_ROLE.sub("", line))
    parts.append(blocks.get("feedback_comment", ""))
    seen: dict[str, None] = {}
    for part in parts:
        if part.strip():
            seen.setdefault(" ".join(part.split()), None)
    return list(seen)


def _reflect(body: str, insight: InsightFn, separately: bool) -> str:
    blocks = _fenced(body)
    rule = insight(blocks.get("input", ""), blocks.get("ground_truth"), blocks.get("output", ""))
    return json.dumps(
        {
            "error_identification": "wrong answer" if rule else "",
            "root_cause": "the user explained it",
            "correct_approach": (_PIECE if separately else " ").join(_user_pieces(blocks)),
            "key_insight": rule,
            "bullet_tags": [],
        }
    )


def _curate(body: str) -> str:
    existing = {content for _, content in _EXISTING.findall(body)}
    ops: dict[str, dict[str, object]] = {}
    for label, text in _fenced(body).items():
        if not label.startswith("reflection "):
            continue
        data = json.loads(text)
        said = [str(data.get("key_insight", ""))]
        said.extend(str(data.get("correct_approach", "")).split(_PIECE))
        for rule in (r.strip() for r in said):
            if rule and rule not in existing:
                op = ops.setdefault(
                    rule, {"type": "ADD", "section": "others", "content": rule, "sources": []}
                )
                op["sources"].append(label.removeprefix("reflection "))  # type: ignore[attr-defined]
    return json.dumps({"reasoning": "as the users asked", "operations": list(ops.values())})


def parrot_learner(
    *, insight: InsightFn | None = None, separately: bool = False
) -> FunctionChatModel:
    """Return a learner double that proposes every user-written text as a new bullet.

    Each trace yields up to two ADD proposals: the honest rule ``insight`` draws
    from it (as ``fake_learner`` does) and the run's user-controlled text,
    copied verbatim. Use it to test that a ``BulletGuard`` keeps planted
    instructions out of the playbook.

    Args:
        insight: ``(input, ground_truth, output) -> rule`` for the honest rule;
            default ``default_insight``.
        separately: Propose each piece of user-controlled text (the input, each
            message or tool output, the feedback comment) as a bullet of its
            own, instead of all of them joined into one.

    Example::

        combee = Combee(prompt_id="t", model=parrot_learner())
    """
    rule_fn = insight or default_insight
    return role_player(lambda body: _reflect(body, rule_fn, separately), _curate)
