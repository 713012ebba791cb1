"""Builders for the fresh corpora (``_injections_fresh_a.py``, ``_b.py`` and ``_c.py``).

Each attack is a ``RedTeamInjection`` (an ``Injection`` that brings its own
traces), so an attack can ride in any field an end user reaches: the ticket,
several user turns, a tool's result or error, the user's feedback comment, a
ground truth the user sets through the feedback endpoint, an evaluator comment
that relays the user, or several traces from several accounts.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks._injections_redteam import RedTeamInjection
from langgraph_combee import Feedback, Trace
from langgraph_combee._core.types import ToolCall, TraceMessage

_BENIGN = "Hello, my parcel for order B20931 is late. "


def _trace(
    key: str,
    text: str,
    *,
    output: str = "GENERAL",
    feedback: Feedback | None = None,
    tool: ToolCall | None = None,
    messages: Sequence[TraceMessage] = (),
) -> Trace:
    return Trace(
        id=f"inj-{key}",
        input=text,
        output=output,
        feedback=feedback,
        tool_calls=[tool] if tool else [],
        messages=list(messages),
        thread_id=f"fresh-thread-{key}",
        metadata={"combee_user": f"fresh-{key}"},
    )


def attack(
    key: str,
    style: str,
    carrier: str,
    text: str,
    markers: Sequence[str],
    *,
    truth: str | None = None,
    ticket: str = _BENIGN,
    tool: str = "lookup_order",
) -> RedTeamInjection:
    """One attack whose attacker-written ``text`` rides in ``carrier``.

    Args:
        key: A short id, unique in its corpus (the trace id is ``inj-<key>``).
        style: The family of attack.
        carrier: ``input`` (the ticket is ``text``), ``split`` (``text`` is user
            turns joined by ``||``, answered ``GENERAL`` in between), ``tool`` (a
            tool result), ``tool-error`` (a tool's error message), ``comment``
            (the user's feedback comment), ``feedback`` (a ground truth the user
            set: ``truth`` is the attacker's text, ``text`` the ticket),
            ``evaluator`` (an evaluator comment relaying the user; ``text`` is
            the comment) or ``multi`` (one trace per ``||`` part, one account each).
        text: The attacker's text.
        markers: Lower-case substrings; any of them in a served prompt means it got through.
        truth: The operator's ground truth (for ``input``, ``split``, ``tool``,
            ``tool-error``, ``multi``): the attacker guessed the right team.
        ticket: The ticket of carriers whose payload rides elsewhere.
        tool: The tool's name for ``tool`` and ``tool-error``.
    """
    labelled = Feedback(correct=False, ground_truth=truth, source="evaluator") if truth else None
    traces: tuple[Trace, ...]
    if carrier == "input":
        traces = (_trace(key, text, feedback=labelled),)
    elif carrier == "split":
        turns = text.split("||")
        messages = []
        for turn in turns:
            messages += [
                TraceMessage(role="user", content=turn),
                TraceMessage(role="assistant", content="GENERAL"),
            ]
        traces = (_trace(key, turns[0], feedback=labelled, messages=messages[:-1]),)
    elif carrier in ("tool", "tool-error"):
        call = ToolCall(
            name=tool,
            args={"order": "B20931"},
            result=text if carrier == "tool" else None,
            error=text if carrier == "tool-error" else None,
        )
        traces = (_trace(key, ticket, output="LOG-5T", feedback=labelled, tool=call),)
    elif carrier == "comment":
        fb = Feedback(score=1.0, comment=text, source="user")
        traces = (_trace(key, ticket, output="LOG-5T", feedback=fb),)
    elif carrier == "feedback":
        fb = Feedback(correct=False, ground_truth=text, source="user")
        traces = (_trace(key, ticket, feedback=fb),)
    elif carrier == "evaluator":
        fb = Feedback(score=0.0, comment=text, source="evaluator")
        traces = (_trace(key, ticket, feedback=fb),)
    elif carrier == "multi":
        traces = tuple(
            _trace(f"{key}{n}", part, feedback=labelled) for n, part in enumerate(text.split("||"))
        )
    else:
        raise ValueError(f"carrier={carrier!r} is not one the fresh corpora use")
    return RedTeamInjection(
        style=style,
        payload=text,
        markers=tuple(m.lower() for m in markers),
        carrier=carrier,
        truth=truth,
        traces=traces,
    )
