"""Deterministic application of delta ops, rendering, budget and stats."""

from __future__ import annotations

import pytest

from langgraph_combee._core.playbook import DEFAULT_SECTIONS, normalize_section, section_slug
from langgraph_combee.types import Add, Bullet, Playbook, Remove, Tag, Update


def _pb(*contents: str, section: str = "strategies_and_insights") -> Playbook:
    return Playbook().apply([Add(section=section, content=c) for c in contents]).playbook


def test_add_assigns_stable_ids_per_section_and_never_reuses_them() -> None:
    pb = _pb("first", "second")
    assert [b.id for b in pb.bullets] == ["str-00001", "str-00002"]
    pb = pb.apply([Remove(id="str-00002")]).playbook
    pb = pb.apply([Add(section="strategies_and_insights", content="third")]).playbook
    assert [b.id for b in pb.bullets] == ["str-00001", "str-00003"]
    other = pb.apply([Add(section="common_mistakes_to_avoid", content="x")]).playbook
    assert other.bullets[-1].id == "mis-00001"


def test_add_records_provenance_and_version() -> None:
    result = Playbook().apply(
        [Add(section="others", content="c", sources=["t1", "t2", "t1"])], version=4
    )
    bullet = result.playbook.bullets[0]
    assert bullet.provenance == ["t1", "t2"]
    assert (bullet.created_version, bullet.updated_version) == (4, 4)
    assert result.counts() == {"add": 1, "update": 0, "remove": 0, "tag": 0}


def test_update_keeps_id_and_counters_and_merges_provenance() -> None:
    pb = Playbook().apply([Add(section="others", content="old", sources=["a"])]).playbook
    pb = pb.apply([Tag(id="oth-00001", helpful=2, harmful=1)]).playbook
    result = pb.apply([Update(id="oth-00001", content="new", sources=["b"])], version=2)
    bullet = result.playbook.bullets[0]
    assert (bullet.id, bullet.content, bullet.helpful, bullet.harmful) == (
        "oth-00001",
        "new",
        2,
        1,
    )
    assert bullet.provenance == ["a", "b"]
    assert bullet.updated_version == 2


def test_unknown_ids_and_empty_content_are_reported_not_fatal() -> None:
    pb = _pb("keep me")
    result = pb.apply(
        [
            Update(id="nope-1", content="x"),
            Remove(id="nope-2"),
            Tag(id="nope-3", helpful=1),
            Add(section="others", content="   "),
            Add(section="others", content="ok"),
        ]
    )
    assert [o.reason for o in result.skipped] == [
        "unknown bullet id 'nope-1'",
        "unknown bullet id 'nope-2'",
        "unknown bullet id 'nope-3'",
        "empty content",
    ]
    assert [b.content for b in result.playbook.bullets] == ["keep me", "ok"]


def test_apply_never_mutates_the_original() -> None:
    pb = _pb("a")
    pb.apply([Update(id="str-00001", content="b"), Tag(id="str-00001", helpful=5)])
    assert pb.bullets[0].content == "a"
    assert pb.bullets[0].helpful == 0


def test_unknown_section_names_are_mapped() -> None:
    pb = Playbook()
    assert pb.resolve_section("Common Mistakes") == "common_mistakes_to_avoid"
    assert pb.resolve_section("Strategies & Insights") == "strategies_and_insights"
    assert pb.resolve_section("totally new") == "others"
    custom = Playbook(sections=["routing_rules", "tone"])
    assert custom.resolve_section("unknown") == "tone"
    assert section_slug("routing_rules") == "rr"
    assert normalize_section("Context-Clues & Indicators") == "context_clues_and_indicators"


def test_render_groups_by_section_and_is_empty_for_empty_playbook() -> None:
    assert Playbook().render() == ""
    pb = (
        Playbook()
        .apply(
            [
                Add(section="common_mistakes_to_avoid", content="Do not guess codes."),
                Add(section="strategies_and_insights", content="Read the whole ticket."),
            ]
        )
        .playbook
    )
    text = pb.render()
    assert text.index("### Strategies and insights") < text.index("### Common mistakes to avoid")
    assert "- Do not guess codes." in text and "[mis-00001]" not in text  # the agent's view
    assert "- [mis-00001] Do not guess codes." in pb.render(ids=True)  # a reviewer's
    assert DEFAULT_SECTIONS[0] == "strategies_and_insights"


def test_budget_evicts_least_useful_oldest_first_and_reports_each() -> None:
    pb = Playbook(
        bullets=[
            Bullet(id="a", section="others", content="useful " * 30, helpful=5, updated_version=1),
            Bullet(id="b", section="others", content="harmful " * 30, harmful=3, updated_version=2),
            Bullet(id="c", section="others", content="neutral old " * 20, updated_version=1),
            Bullet(id="d", section="others", content="neutral new " * 20, updated_version=3),
        ]
    )
    assert pb.enforce_budget(None).evicted == ()
    assert pb.enforce_budget(10_000).playbook is pb
    budget = pb.token_count() - 70
    result = pb.enforce_budget(budget)
    assert [e.bullet.id for e in result.evicted] == ["b", "c"]
    assert all("token budget" in e.reason for e in result.evicted)
    assert result.playbook.token_count() <= budget
    assert [b.id for b in result.playbook.bullets] == ["a", "d"]


def test_stats_count_bullets_tokens_and_counters() -> None:
    pb = _pb("x", "y").apply([Tag(id="str-00001", helpful=2, harmful=1)]).playbook
    stats = pb.stats()
    assert stats["bullets"] == 2
    assert stats["helpful"] == 2 and stats["harmful"] == 1
    assert stats["sections"] == {"strategies_and_insights": 2}
    assert stats["tokens"] == pb.token_count() > 0


@pytest.mark.parametrize("kind", ["ADD", "UPDATE", "REMOVE", "TAG"])
def test_every_op_kind_round_trips_through_json(kind: str) -> None:
    from pydantic import TypeAdapter

    from langgraph_combee._core.ops import DeltaOp

    op = {
        "ADD": Add(section="others", content="c"),
        "UPDATE": Update(id="x", content="c"),
        "REMOVE": Remove(id="x"),
        "TAG": Tag(id="x", helpful=1),
    }[kind]
    adapter: TypeAdapter[DeltaOp] = TypeAdapter(DeltaOp)
    assert adapter.validate_json(adapter.dump_json(op)) == op
