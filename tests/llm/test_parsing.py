"""The tolerant reader on messy LLM output."""

from __future__ import annotations

import pytest

from langgraph_combee._algorithm.schemas import OpsOut, ReflectionOut, convert_ops, normalize_label
from langgraph_combee._llm.parsing import ReplyParseError, extract_json, parse_reply


def test_plain_fenced_and_prose_wrapped_json() -> None:
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('```json\n{"a": 1}\n```') == {"a": 1}
    assert extract_json('Sure! Here it is:\n{"a": {"b": "}"}}\nHope that helps.') == {
        "a": {"b": "}"}
    }
    assert extract_json('```\n{"a": [1, 2,]}\n```') == {"a": [1, 2]}


def test_first_object_wins_and_non_objects_are_skipped() -> None:
    assert extract_json('[1, 2] then {"x": "y"} and {"z": 1}') == {"x": "y"}


def test_truncated_json_is_closed() -> None:
    text = '{"key_insight": "Route refunds to FIN", "bullet_tags": [{"id": "str-1", "tag": "help'
    data = extract_json(text)
    assert data["key_insight"] == "Route refunds to FIN"
    assert data["bullet_tags"] == [{"id": "str-1", "tag": "help"}]
    assert extract_json('{"a": "b", "c"') == {"a": "b"}
    assert extract_json('{"a": 1, ') == {"a": 1}


def test_garbage_raises_with_the_reply_attached() -> None:
    with pytest.raises(ReplyParseError) as info:
        extract_json("I cannot help with that.")
    assert info.value.reply == "I cannot help with that."


def test_wrong_scalar_types_are_coerced() -> None:
    out = parse_reply(
        '{"key_insight": 42, "root_cause": null, "bullet_tags": {"str-1": "helpful"}}',
        ReflectionOut,
    )
    assert out.key_insight == "42"
    assert out.root_cause == ""
    reflection = out.to_reflection("t1")
    assert [(t.id, t.tag) for t in reflection.bullet_tags] == [("str-1", "helpful")]


def test_schema_mismatch_is_a_parse_error() -> None:
    with pytest.raises(ReplyParseError, match="does not fit"):
        parse_reply('{"operations": "not a list"}', OpsOut)


def test_convert_ops_maps_labels_and_drops_malformed() -> None:
    out = parse_reply(
        """{"operations": [
            {"type": "add", "section": "others", "content": "Rule A", "sources": ["R1", 2]},
            {"type": "UPDATE", "id": "oth-00001", "content": "Rule B", "sources": ["[R2]"]},
            {"type": "delete", "id": "oth-00002"},
            {"type": "ADD", "content": ""},
            {"type": "DANCE"}
        ]}""",
        OpsOut,
    )
    ops = convert_ops(out.operations, labels={"R1": "t1", "R2": "t2"}, default_sources=["t1", "t2"])
    assert [op.type for op in ops] == ["ADD", "UPDATE", "REMOVE"]  # the two malformed left out
    assert ops[0].sources == ["t1"]
    assert ops[1].sources == ["t2"]
    assert ops[2].sources == ["t1", "t2"]


def test_a_label_is_read_back_the_same_way_in_sources_as_everywhere_else() -> None:
    # convert_ops did not upper-case: "r3" credited its trace in the curator's
    # "add" (via adopt) but not in an operation's "sources".
    out = parse_reply(
        """{"operations": [
            {"type": "ADD", "content": "Rule A", "sources": ["r3", " [r1] "]}
        ]}""",
        OpsOut,
    )
    ops = convert_ops(out.operations, labels={"R1": "t1", "R3": "t3"}, default_sources=["t9"])
    assert ops[0].sources == ["t3", "t1"]
    assert normalize_label(" [p2.1] ") == "P2.1"


def test_a_heading_of_the_learners_own_prompt_is_no_op() -> None:
    # Seen on the 0.5B with the full roles: "reflections on recent runs (4)" was added
    # to the playbook and accepted (no user word in it for the guard to refuse).
    out = OpsOut.model_validate(
        {
            "operations": [
                {"type": "ADD", "section": "others", "content": "reflections on recent runs (4)"},
                {"type": "ADD", "section": "others", "content": "Current playbook:"},
                {"type": "ADD", "section": "others", "content": "Route refunds to FIN-7Q."},
            ]
        }
    )
    ops = convert_ops(out.operations, labels={}, default_sources=["t1"])
    assert [op.content for op in ops] == ["Route refunds to FIN-7Q."]  # type: ignore[union-attr]
