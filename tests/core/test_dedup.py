"""Lexical and semantic de-duplication."""

from __future__ import annotations

from collections.abc import Sequence

from langgraph_combee._core.dedup import deduplicate, lexical_similarity
from langgraph_combee.types import Bullet, Playbook


def _b(bid: str, content: str, **kw: object) -> Bullet:
    return Bullet(id=bid, section=str(kw.pop("section", "others")), content=content, **kw)  # type: ignore[arg-type]


def test_lexical_similarity_scores_paraphrase_above_unrelated() -> None:
    a = "Route refund requests to the FIN-REFUNDS team."
    b = "Route refund requests to the FIN-REFUNDS team!"
    c = "Always answer in metric units."
    assert lexical_similarity(a, b) == 1.0
    assert lexical_similarity(a, c) == 0.0


def test_merge_keeps_older_id_sums_counters_unions_provenance() -> None:
    pb = Playbook(
        bullets=[
            _b(
                "oth-2",
                "Route refund tickets to FIN-REFUNDS.",
                helpful=1,
                harmful=1,
                provenance=["t2"],
                created_version=2,
                updated_version=2,
            ),
            _b(
                "oth-1",
                "Route refund tickets to FIN-REFUNDS please.",
                helpful=3,
                provenance=["t1"],
                created_version=1,
                updated_version=1,
            ),
            _b("oth-3", "Answers use metric units.", created_version=1),
        ]
    )
    result = deduplicate(pb)
    assert [(m.kept_id, m.dropped_id) for m in result.merges] == [("oth-1", "oth-2")]
    kept = result.playbook.get("oth-1")
    assert kept is not None
    assert (kept.helpful, kept.harmful) == (4, 1)
    assert kept.provenance == ["t1", "t2"]
    assert kept.content == "Route refund tickets to FIN-REFUNDS please."
    assert [b.id for b in result.playbook.bullets] == ["oth-1", "oth-3"]


def test_duplicates_merge_across_sections_and_no_change_returns_same_playbook() -> None:
    # Small models file one insight under several sections: it is still one insight.
    pb = Playbook(
        bullets=[
            _b("a", "Check the units.", section="others"),
            _b("b", "Check the units.", section="common_mistakes_to_avoid"),
        ]
    )
    result = deduplicate(pb)
    assert [(m.kept_id, m.dropped_id) for m in result.merges] == [("a", "b")]
    assert [(b.id, b.section) for b in result.playbook.bullets] == [("a", "others")]
    distinct = Playbook(bullets=[_b("a", "Check the units."), _b("b", "Refunds go to FIN.")])
    unchanged = deduplicate(distinct)
    assert unchanged.merges == ()
    assert unchanged.playbook is distinct


def test_only_pairs_with_a_changed_bullet_are_compared() -> None:
    pb = Playbook(
        bullets=[
            _b("a", "Check the units."),
            _b("b", "Check the units."),
            _b("c", "Refunds go to FIN."),
        ]
    )
    assert deduplicate(pb, changed={"c"}).merges == ()
    assert [(m.kept_id, m.dropped_id) for m in deduplicate(pb, changed={"b"}).merges] == [
        ("a", "b")
    ]


class _FakeEmbedder:
    """Maps texts to fixed vectors: texts mentioning 'refund' point the same way."""

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        return [[1.0, 0.05] if "refund" in t.lower() else [0.0, 1.0] for t in texts]


def test_semantic_dedup_uses_the_embedder() -> None:
    pb = Playbook(
        bullets=[
            _b("a", "Refund questions go to FIN."),
            _b("b", "Anything about a refund belongs with finance."),
            _b("c", "Shipping delays go to LOG."),
        ]
    )
    assert deduplicate(pb).merges == ()
    result = deduplicate(pb, embedder=_FakeEmbedder())
    assert [(m.kept_id, m.dropped_id) for m in result.merges] == [("a", "b")]
    assert result.merges[0].similarity > 0.9


def test_semantic_dedup_never_merges_rules_naming_other_values() -> None:
    # Review: "the semantic path is left to its cosine" merged two rules for one
    # situation with two codes (any embedding puts them close), losing one side and
    # hiding the contradiction the rules layer settles.
    pb = Playbook(
        bullets=[
            _b("a", "Refund questions go to FIN-7Q."),
            _b("b", "Refund questions go to PAY-2D."),
            _b("c", "When a refund is asked for, never answer FIN-7Q."),
            _b("d", "When a refund is asked for, always answer FIN-7Q."),
        ]
    )
    merges = deduplicate(pb, embedder=_FakeEmbedder()).merges
    assert [(m.kept_id, m.dropped_id) for m in merges] == [("a", "d")]  # the same rule


def test_lexical_dedup_never_merges_a_value_refused_with_it_asked_for() -> None:
    asked = "When a customer asks for a refund of a damaged or late order, always answer FIN-7Q."
    refused = asked.replace("always", "never")
    assert lexical_similarity(asked, refused) >= 0.7
    pb = Playbook(bullets=[_b("a", asked), _b("b", refused)])
    assert deduplicate(pb).merges == ()
