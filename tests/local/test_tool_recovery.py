"""Recovering tool calls the local models write as text (``local._chat.recover``).

``tests/data/tool_replies.json`` holds real replies of the embedded 0.5B and
1.5B models bound to the ``tools`` task's tools, collected with a plain
``ChatOpenAI`` (no recovery) by ``python -m benchmarks.tool_replies``; each
carries ``calls``, the calls a reader sees in it (checked by hand).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_openai")

from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

from langgraph_combee.local._chat import (
    _with_recovered_tool_calls,
    recover,
    recover_tool_calls,
)
from langgraph_combee.tasks._tools import make_tools

FIXTURE = Path(__file__).parents[1] / "data" / "tool_replies.json"
REPLIES: list[dict[str, Any]] = json.loads(FIXTURE.read_text())
SCHEMAS = {
    spec["function"]["name"]: spec["function"]["parameters"]
    for spec in map(convert_to_openai_tool, make_tools())
}


def _pairs(text: str, *, cut_off: bool = False) -> list[list[Any]]:
    return [[call["name"], call["args"]] for call in recover(text, SCHEMAS, cut_off=cut_off).calls]


def test_the_fixture_holds_real_replies_of_both_sizes() -> None:
    sizes = {row["model"] for row in REPLIES}
    assert sizes == {"0.5b", "1.5b"}
    assert len(REPLIES) >= 24
    assert all(row["native_tool_calls"] == [] for row in REPLIES)  # all text: what we recover


@pytest.mark.parametrize(
    "row", REPLIES, ids=[f"{r['model']}-{i}-turn{r['turn']}" for i, r in enumerate(REPLIES)]
)
def test_every_real_reply_gives_the_calls_a_reader_sees(row: dict[str, Any]) -> None:
    assert _pairs(row["content"], cut_off=row["finish_reason"] == "length") == row["calls"]


def test_most_real_replies_hold_a_call_and_recovery_finds_them() -> None:
    with_calls = [row for row in REPLIES if row["calls"]]
    assert len(with_calls) >= 0.8 * len(REPLIES)
    doubled = [row for row in with_calls if row["content"].lstrip().startswith("{{")]
    run_ons = [row for row in REPLIES if row["finish_reason"] == "length" and row["calls"]]
    assert doubled, "the 1.5B's doubled braces are in the fixture"
    assert run_ons, "replies cut off after several calls are in the fixture"
    assert all(len(_pairs(row["content"])) > 1 for row in run_ons)


def test_a_reply_cut_off_after_several_calls_runs_only_its_first() -> None:
    row = next(r for r in REPLIES if r["finish_reason"] == "length" and r["calls"])
    found = recover(row["content"], SCHEMAS, cut_off=True)
    assert [c["name"] for c in found.calls] == [row["calls"][0][0]]
    assert found.invalid and all("cut off" in (c["error"] or "") for c in found.invalid)
    result = ChatResult(
        generations=[
            ChatGeneration(
                message=AIMessage(
                    content=row["content"], response_metadata={"finish_reason": "length"}
                )
            )
        ]
    )
    message = _with_recovered_tool_calls(result, _bound()).generations[0].message
    assert isinstance(message, AIMessage) and len(message.tool_calls) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # doubled braces, as the 1.5B writes them (outer only, and inside too)
        (
            '{{"name": "cancel_order", "arguments": {"order_id": "NW-1", "reason": "x"}}}}',
            [["cancel_order", {"order_id": "NW-1", "reason": "x"}]],
        ),
        (
            '{{"name": "send_voucher", "arguments": {{"order_id": "NW-1", "code": "A"}}}}',
            [["send_voucher", {"order_id": "NW-1", "code": "A"}]],
        ),
        # a fenced block with prose around it
        (
            'Sure, I will look it up.\n```json\n{"name": "lookup_order", "arguments": '
            '{"order_id": "NW-2"}}\n```\nLet me know if you need more.',
            [["lookup_order", {"order_id": "NW-2"}]],
        ),
        # Qwen's own tags, two calls
        (
            '<tool_call>\n{"name": "lookup_order", "arguments": {"order_id": "NW-3"}}\n'
            '</tool_call>\n<tool_call>\n{"name": "open_case", "arguments": {"order_id": "NW-3", '
            '"queue": "Q"}}\n</tool_call>',
            [
                ["lookup_order", {"order_id": "NW-3"}],
                ["open_case", {"order_id": "NW-3", "queue": "Q"}],
            ],
        ),
        # arguments as a JSON string, OpenAI's function shape, a list
        (
            '[{"type": "function", "function": {"name": "lookup_order", '
            '"arguments": "{\\"order_id\\": \\"NW-4\\"}"}}]',
            [["lookup_order", {"order_id": "NW-4"}]],
        ),
        # arguments beside the name; an unknown argument dropped; a number made a string
        (
            '{"name": "issue_refund", "order_id": "NW-5", "amount": 2490, "required": ["x"]}',
            [["issue_refund", {"order_id": "NW-5", "amount": "2490"}]],
        ),
        # one call per line, the last cut off by the length limit
        (
            '{"name": "lookup_order", "arguments": {"order_id": "NW-6"}}\n'
            '{"name": "cancel_order", "arguments": {"order_id": "NW-6"',
            [["lookup_order", {"order_id": "NW-6"}]],
        ),
        # the same call twice runs once
        (
            '{"name": "lookup_order", "arguments": {"order_id": "NW-7"}}'
            '{"name": "lookup_order", "arguments": {"order_id": "NW-7"}}',
            [["lookup_order", {"order_id": "NW-7"}]],
        ),
    ],
)
def test_recovery_of_each_shape(text: str, expected: list[list[Any]]) -> None:
    assert _pairs(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I have cancelled your order with cancel_order; the reason is customer_request.",
        "You can use the lookup_order tool with your order id NW-1.",
        'Call {"name": "delete_everything", "arguments": {}} to start.',  # not a bound tool
        '{"order_id": "NW-1", "reason": "x"}',  # arguments without a tool name
        "",
        "{not json at all}",
    ],
)
def test_prose_and_foreign_json_give_no_call(text: str) -> None:
    found = recover(text, SCHEMAS)
    assert found.calls == () and found.invalid == ()


def test_a_bound_tool_with_bad_arguments_is_an_invalid_call() -> None:
    found = recover('{"name": "cancel_order", "arguments": {"order_id": "NW-1"}}', SCHEMAS)
    assert found.calls == ()
    assert [(c["name"], "reason" in (c["error"] or "")) for c in found.invalid] == [
        ("cancel_order", True)
    ]
    found = recover('{"name": "lookup_order", "arguments": ["NW-1"]}', SCHEMAS)
    assert found.calls == () and len(found.invalid) == 1
    echoed = json.dumps(convert_to_openai_tool(make_tools()[0]))  # the tool's spec, echoed back
    found = recover(echoed, SCHEMAS)
    assert found.calls == () and [c["name"] for c in found.invalid] == ["lookup_order"]


def test_names_alone_accept_any_arguments() -> None:
    calls = recover_tool_calls('{"name": "t", "arguments": {"anything": 1}}', ["t"])
    assert [(c["name"], c["args"]) for c in calls] == [("t", {"anything": 1})]


def _result(text: str) -> ChatResult:
    return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def _bound() -> dict[str, Any]:
    return {
        "tools": [
            {"type": "function", "function": {"name": name, "parameters": schema}}
            for name, schema in SCHEMAS.items()
        ]
    }


def test_a_real_doubled_brace_reply_becomes_a_real_tool_call() -> None:
    row = next(r for r in REPLIES if r["model"] == "1.5b" and r["content"].startswith("{{"))
    message = _with_recovered_tool_calls(_result(row["content"]), _bound()).generations[0].message
    assert isinstance(message, AIMessage)
    assert [[c["name"], c["args"]] for c in message.tool_calls] == row["calls"]
    assert message.content == ""


def test_invalid_calls_keep_the_text_and_are_never_executed() -> None:
    text = '{"name": "cancel_order", "arguments": {}}'
    message = _with_recovered_tool_calls(_result(text), _bound()).generations[0].message
    assert isinstance(message, AIMessage)
    assert message.tool_calls == [] and message.content == text
    assert [c["name"] for c in message.invalid_tool_calls] == ["cancel_order"]
    untouched = _with_recovered_tool_calls(_result(text), {}).generations[0].message
    assert isinstance(untouched, AIMessage) and untouched.invalid_tool_calls == []


def test_a_call_an_earlier_turn_made_is_not_run_again() -> None:
    from langchain_core.messages import HumanMessage, ToolMessage

    earlier = AIMessage(
        content="",
        tool_calls=[{"name": "lookup_order", "args": {"order_id": "NW-1"}, "id": "c1"}],
    )
    history = [HumanMessage("refund NW-1"), earlier, ToolMessage("found", tool_call_id="c1")]
    again = '{{"name": "lookup_order", "arguments": {"order_id": "NW-1"}}}'
    message = _with_recovered_tool_calls(_result(again), _bound(), history).generations[0].message
    assert isinstance(message, AIMessage)
    assert message.tool_calls == []  # the reply ends the turn instead of looping
    assert [c["name"] for c in message.invalid_tool_calls] == ["lookup_order"]
    assert "already made" in (message.invalid_tool_calls[0]["error"] or "")
    new = again.replace("lookup_order", "cancel_order").replace('"}}}', '", "reason": "r"}}}')
    message = _with_recovered_tool_calls(_result(new), _bound(), history).generations[0].message
    assert isinstance(message, AIMessage) and [c["name"] for c in message.tool_calls] == [
        "cancel_order"
    ]
