"""The pure playbook diff the registry uses (``langgraph_combee._core.diff``)."""

from __future__ import annotations

from langgraph_combee._core.diff import PlaybookDiff, diff_playbooks
from langgraph_combee._core.ops import Add, Remove, Tag, Update
from langgraph_combee._core.playbook import Playbook

BASE = (
    Playbook()
    .apply(
        [
            Add(section="strategies_and_insights", content="Check units.", sources=["t1"]),
            Add(section="others", content="Ask for the order id.", sources=["t2", "t3"]),
            Add(section="others", content="Cite the policy.", sources=["t4"]),
        ]
    )
    .playbook
)
CHECK, ASK, CITE = (b.id for b in BASE.bullets)


def test_identical_playbooks_have_an_empty_diff() -> None:
    diff = diff_playbooks(BASE, BASE.model_copy(deep=True))
    assert diff.is_empty() and diff == PlaybookDiff()
    assert diff.summary() == "+0 -0 ~0"
    assert diff.render() == "(no changes)"


def test_each_kind_of_change_is_classified() -> None:
    new = BASE.apply(
        [
            Add(section="others", content="Never guess.", sources=["t9"]),
            Remove(id=ASK),
            Update(id=CHECK, content="Check units and currency.", sources=["t7"]),
            Tag(id=CITE, helpful=2, harmful=1, sources=["t8"]),
        ],
        version=2,
    ).playbook
    diff = diff_playbooks(BASE, new)
    assert [b.content for b in diff.added] == ["Never guess."]
    assert [b.id for b in diff.removed] == [ASK]
    assert [(o.id, n.content) for o, n in diff.updated] == [(CHECK, "Check units and currency.")]
    assert [(n.helpful, n.harmful) for _, n in diff.retagged] == [(2, 1)]
    assert diff.summary() == "+1 -1 ~1 (1 retagged)"
    assert diff.render().splitlines() == [
        "+ [oth-00003] (others) Never guess.  [traces: t9]",
        f"- [{ASK}] (others) Ask for the order id.  [traces: t2, t3]",
        f"~ [{CHECK}] (strategies_and_insights) 'Check units.' -> 'Check units and currency.'"
        "  [traces: t7]",
        f"# [{CITE}] helpful 0->2, harmful 0->1: Cite the policy.  [traces: t8]",
    ]


def test_section_moves_are_updates_and_version_stamps_are_ignored() -> None:
    moved = [
        b.model_copy(update={"section": "others"}) if b.id == CHECK else b for b in BASE.bullets
    ]
    restamped = [b.model_copy(update={"updated_version": 9}) for b in BASE.bullets]
    diff = diff_playbooks(BASE, BASE.replace_bullets(moved))
    assert [o.id for o, _ in diff.updated] == [CHECK]
    assert "(strategies_and_insights -> others) Check units." in diff.render()
    assert diff_playbooks(BASE, BASE.replace_bullets(restamped)).is_empty()


def test_render_caps_trace_ids_and_long_content() -> None:
    many = [f"t{n}" for n in range(8)]
    new = Playbook().apply([Add(section="others", content="word " * 100, sources=many)]).playbook
    (line,) = diff_playbooks(Playbook(), new).render().splitlines()
    assert line.endswith("[traces: t0, t1, t2, t3, t4 (+3 more)]")
    assert "..." in line and len(line) < 300
