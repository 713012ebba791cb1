"""Collect raw replies of the local models bound to the tool task's tools (a test fixture).

Each local model is asked for requests of the ``tools`` task through a plain
``ChatOpenAI`` (no recovery of text tool calls), with and without the house
rules, and after one tool result; every reply is written as it came back (text,
native tool calls, finish reason) with the request, the tools that were bound
and ``calls``, what ``recover`` reads in it (to be checked by hand).
``tests/local/test_tool_recovery.py`` checks ``recover_tool_calls`` on them.

    flock /tmp/llm.lock python -m benchmarks.tool_replies --out tests/data/tool_replies.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI  # type: ignore[import-not-found, unused-ignore]

from langgraph_combee.local import LocalModel
from langgraph_combee.local._chat import recover
from langgraph_combee.tasks import ToolCalls


def _reply(model: Any, messages: list[BaseMessage], schemas: dict[str, Any]) -> dict[str, Any]:
    reply = model.invoke(messages)
    content = reply.content if isinstance(reply.content, str) else str(reply.content)
    finish = reply.response_metadata.get("finish_reason")
    found = recover(content, schemas, cut_off=finish == "length")
    return {
        "content": content,
        "native_tool_calls": [{"name": c["name"], "args": c["args"]} for c in reply.tool_calls],
        "finish_reason": finish,
        # What recovery reads in it today: review each by hand before committing.
        "calls": [[c["name"], c["args"]] for c in found.calls],
    }


def collect(size: str, n: int) -> list[dict[str, Any]]:
    """``n`` requests, each asked with and without rules, plus a few second turns."""
    task = ToolCalls()
    tools = task.tools()
    names = [t.name for t in tools]
    schemas = {
        spec["function"]["name"]: spec["function"]["parameters"]
        for spec in map(convert_to_openai_tool, tools)
    }
    rows: list[dict[str, Any]] = []
    with LocalModel(size, n_parallel=1) as server:  # type: ignore[arg-type]
        plain = ChatOpenAI(
            base_url=server.base_url,
            api_key="local",  # type: ignore[arg-type]
            model=server.model_name,
            temperature=0.0,
            max_tokens=160,
        ).bind_tools(tools)
        for index, example in enumerate(task.examples(n, seed=1, split="train")):
            for with_rules in (False, True):
                system = SystemMessage(task.prompt(with_rules=with_rules))
                messages: list[BaseMessage] = [system, HumanMessage(example.input)]
                row = {
                    "model": size,
                    "turn": 1,
                    "with_rules": with_rules,
                    "input": example.input,
                    "tools": names,
                    **_reply(plain, messages, schemas),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
            if index % 2 == 0:
                order = example.input.split("NW-")[1][:5]
                lookup = AIMessage(
                    content="",
                    tool_calls=[
                        {
                            "name": "lookup_order",
                            "args": {"order_id": f"NW-{order}"},
                            "id": "call_1",
                            "type": "tool_call",
                        }
                    ],
                )
                result = ToolMessage(
                    f"Order NW-{order}: found, delivered, paid by card.", tool_call_id="call_1"
                )
                messages = [
                    SystemMessage(task.prompt(with_rules=True)),
                    HumanMessage(example.input),
                    lookup,
                    result,
                ]
                row = {
                    "model": size,
                    "turn": 2,
                    "with_rules": True,
                    "input": example.input,
                    "tools": names,
                    **_reply(plain, messages, schemas),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    """Collect from both sizes and write the fixture."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("tests/data/tool_replies.json"))
    parser.add_argument("-n", type=int, default=12, help="requests per model")
    parser.add_argument("--sizes", default="0.5b,1.5b")
    args = parser.parse_args()
    rows = [row for size in args.sizes.split(",") for row in collect(size, args.n)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {len(rows)} replies to {args.out}")


if __name__ == "__main__":
    main()
