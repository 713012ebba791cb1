"""A deterministic stand-in for the learner LLM, for tests, examples and benchmarks.

``fake_learner()`` answers the reflector, curator and aggregator prompts the way
a cooperative LLM would, with no network: the reflector turns each failed run
into a rule (by default "for inputs like X, answer Y" from the ground truth; a
run with no ground truth but a feedback comment, "for inputs like X, <what the
comment says>"), curators adopt each new rule by its reflection's label, and the
aggregator keeps every distinct rule it was shown (it drops repeats by label).
It reads only the prompts langgraph-combee itself sends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from langchain_core.messages import BaseMessage

from langgraph_combee._core.text import message_text
from langgraph_combee.testing._models import FunctionChatModel

InsightFn = Callable[[str, str | None, str], str]

_FENCE = re.compile(r'<untrusted_data label="([^"]*)">\n(.*?)\n</untrusted_data>', re.DOTALL)
_EXISTING = re.compile(r"^\[([a-z0-9]+-\d+)\] helpful=\d+ harmful=\d+ :: (.*)$", re.MULTILINE)


def _fenced(text: str) -> dict[str, str]:
    return {label: body for label, body in _FENCE.findall(text)}


def default_insight(task_input: str, ground_truth: str | None, output: str) -> str:
    """The default rule: inputs starting like this one expect the ground truth."""
    if ground_truth is None or ground_truth.strip() == output.strip():
        return ""
    words = " ".join(task_input.split()[:4])
    return f"When the input starts like '{words}', the expected answer is '{ground_truth}'."


def comment_insight(task_input: str, comment: str) -> str:
    """The rule a feedback comment states, for inputs starting like this one ('' for none).

    The comment's first sentence is the action: "Refunds go to FIN-REFUNDS." on a
    run about a refund gives "When the input starts like 'I want a refund',
    refunds go to FIN-REFUNDS."
    """
    first = re.split(r"(?<=[.!?])\s", comment.strip(), maxsplit=1)[0].strip().rstrip(".!?")
    if not first:
        return ""
    words = " ".join(task_input.split()[:4])
    return f"When the input starts like '{words}', {first[0].lower()}{first[1:]}."


def _commented(blocks: dict[str, str], body: str) -> str:
    """The comment of a run that went wrong and has no ground truth ('' otherwise)."""
    if "ground_truth" in blocks or "Verdict: correct" in body:
        return ""
    return blocks.get("feedback_comment", "").strip()


def _reflect(body: str, insight: InsightFn) -> str:
    blocks = _fenced(body)
    truth = blocks.get("ground_truth")
    rule = insight(blocks.get("input", ""), truth, blocks.get("output", ""))
    if not rule and (comment := _commented(blocks, body)):
        rule = comment_insight(blocks.get("input", ""), comment)
    ids = [m.group(1) for m in _EXISTING.finditer(body)]
    return json.dumps(
        {
            "error_identification": "wrong answer" if rule else "",
            "root_cause": "missing rule" if rule else "",
            "correct_approach": f"answer {truth}" if truth else "",
            "key_insight": rule,
            "bullet_tags": [{"id": i, "tag": "helpful"} for i in ids[:1]] if not rule else [],
        }
    )


def _reflect_small(body: str) -> str:
    # The small-model reflector: one "when <situation>, <action>" rule.
    blocks = _fenced(body)
    truth = blocks.get("ground_truth")
    topic = " ".join(blocks.get("input", "").split()[:4])
    comment = _commented(blocks, body)
    if truth is None and comment:
        rule = comment_insight(blocks.get("input", ""), comment)
        action = rule.split("', ", 1)[1].rstrip(".") if rule else ""
        return json.dumps(
            {"situation": f"inputs like '{topic}'" if action else "", "action": action}
        )
    if truth is None or truth.strip() == blocks.get("output", "").strip():
        return json.dumps({"situation": "", "action": ""})
    return json.dumps({"situation": f"inputs like '{topic}'", "action": f"answer {truth}"})


_RULE_LINE = re.compile(r"^\[([A-Z]\d+(?:\.\d+)?)\] (.*)$", re.MULTILINE)


def _curate(body: str) -> str:
    # Adopt each new rule by its reflection's label, once per distinct rule.
    blocks = _fenced(body)
    if "rules" in blocks:  # the small-model curator: "[R1] rule" lines, a plain playbook
        existing = {line[2:] for line in blocks.get("playbook", "").splitlines()}
        candidates = _RULE_LINE.findall(blocks["rules"])
    else:
        existing = {content for _, content in _EXISTING.findall(body)}
        candidates = [
            (label.removeprefix("reflection "), str(json.loads(text).get("key_insight", "")))
            for label, text in blocks.items()
            if label.startswith("reflection ")
        ]
    adopted: dict[str, str] = {}
    for label, rule in candidates:
        if rule.strip() and rule.strip() not in existing:
            adopted.setdefault(rule.strip(), label)
    return json.dumps({"reasoning": "new rules", "add": list(adopted.values()), "operations": []})


_PROPOSED = re.compile(r"^\[(P\d+\.\d+)\] (\{.*\})$", re.MULTILINE)


def _aggregate(body: str) -> str:
    # Answer by reference: every proposal stands except repeats of an earlier one.
    blocks = _fenced(body)
    if "proposals" in blocks:  # the small-model aggregator: "[P1.2] rule" lines
        proposed = _RULE_LINE.findall(blocks["proposals"])
    else:
        proposed = []
        for label, text in blocks.items():
            if label.startswith("proposal "):
                for ref, line in _PROPOSED.findall(text):
                    op = json.loads(line)
                    proposed.append((ref, f"{op.get('type')}|{op.get('id')}|{op.get('content')}"))
    seen: set[str] = set()
    drop = []
    for ref, key in proposed:
        if key in seen:
            drop.append(ref)
        seen.add(key)
    return json.dumps({"reasoning": "repeats dropped", "drop": drop, "operations": []})


def fake_learner(*, insight: InsightFn | None = None) -> FunctionChatModel:
    """Return a chat model that plays reflector, curator and aggregator offline.

    Args:
        insight: ``(input, ground_truth, output) -> rule`` used by the reflector;
            return "" for "nothing to learn". Default: ``default_insight``.

    Example::

        combee = Combee(prompt_id="demo", model=fake_learner())
    """
    rule_fn = insight or default_insight
    return role_player(lambda body: _reflect(body, rule_fn), _curate)


def role_player(reflect: Callable[[str], str], curate: Callable[[str], str]) -> FunctionChatModel:
    """A chat model answering each learner role's prompt with the given functions.

    Each function gets the prompt's body (every message after the system one)
    and returns the reply text; the small-model reflector and the aggregator are
    ``fake_learner``'s own.
    """

    def reply(messages: Sequence[BaseMessage]) -> str:
        system = message_text(messages[0].content) if messages else ""
        body = "\n".join(message_text(m.content) for m in messages[1:])
        if "You are the reflector" in system:
            return reflect(body)
        if "You study one run" in system:  # the small-model reflector
            return _reflect_small(body)
        if "You are the aggregator" in system:
            return _aggregate(body)
        if "You are the curator" in system:
            return curate(body)
        return "{}"

    return FunctionChatModel(reply)
