"""Property: with single-line bullets, leaving the rivals out of the rendered playbook
(``situations._without`` through ``focused``) gives exactly what ``Playbook.render``
gives for the playbook without the rival bullets, followed by the focus and closing.

Random playbooks of single-line bullets in random sections (two of them share a
title), random custom headers, duplicates, conventions, non-rule notes, additive
and exclusive actions; random requests and focus limits. Seeded, no extra package.
"""

from __future__ import annotations

import random

import pytest

from langgraph_combee._core.conventions import closing
from langgraph_combee._core.playbook import RENDER_HEADER, Bullet, Playbook
from langgraph_combee._core.situations import (
    MAX_FOCUS_RULES,
    RuleIndex,
    exclusive,
    focus_text,
    focused,
    parse_rule,
)

WORDS = ["refund", "invoice", "parcel", "login", "vip", "lamp", "coffee", "warranty"]
FILLER = ["please", "hi", "my", "order", "is", "late", "thanks", "the"]
CODES = ["FIN-7Q", "ACC-2M", "SEC-4X", "LOG-5T", "fin-7q"]
CABINS = ["economy", "business", "first"]
SECTIONS = ["others", "billing", "strategies_and_insights", "foo_bar", "foo bar", "zeta"]
HEADERS = [
    RENDER_HEADER,
    "### Learned rules",
    "## Rules\nIntro line.",
    "## Rules\n\nIntro after a blank line.",
    "### Others",  # a custom header equal to a section's heading
]


def _situation(rng: random.Random) -> str:
    alts = [" ".join(rng.sample(WORDS, rng.randint(1, 2))) for _ in range(rng.randint(1, 3))]
    return " or ".join(alts)


def _content(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.45:
        return f"When {_situation(rng)}, answer {rng.choice(CODES)}."
    if kind < 0.6:
        return f"When {_situation(rng)}, pass cabin='{rng.choice(CABINS)}'."
    if kind < 0.7:
        return f"When {_situation(rng)}, route to {rng.choice(CODES)} and P{rng.randint(1, 2)}."
    if kind < 0.78:
        return f"When {_situation(rng)}, add the tag '{rng.choice(CABINS)}'."
    if kind < 0.84:
        return "Be polite and brief."
    if kind < 0.88:
        return 'Every reply must end with the line "Bye".'
    if kind < 0.92:
        return "### Others"  # a bullet that looks like a heading once rendered ("- ### Others")
    if kind < 0.96:
        return f"  When {_situation(rng)}, answer {rng.choice(CODES)}.  "
    return f"When {_situation(rng)}, mention {rng.choice(CODES)}."


def _playbook(rng: random.Random) -> Playbook:
    bullets: list[Bullet] = []
    for i in range(rng.randint(1, 12)):
        # Now and then a duplicate, maybe in another section.
        duplicate = bool(bullets) and rng.random() < 0.1
        content = rng.choice(bullets).content if duplicate else _content(rng)
        bullets.append(
            Bullet(
                id=f"b{i}",
                section=rng.choice(SECTIONS),
                content=content,
                pending=rng.random() < 0.05,
            )
        )
    return Playbook(bullets=bullets)


def _request(rng: random.Random) -> str:
    pool = WORDS + FILLER
    return " ".join(rng.choice(pool) for _ in range(rng.randint(1, 5)))


def _expected(playbook: Playbook, index: RuleIndex, request: str, header: str, limit: int) -> str:
    """What ``focused`` should give: the playbook rendered without the rival bullets."""
    rendered = playbook.render(header=header)
    named = index.matching(request, limit=MAX_FOCUS_RULES)
    focus = focus_text(named[:limit])
    if not focus:
        return rendered
    rivals = index.rivals_of(named)
    kept = Playbook(
        sections=playbook.sections,
        bullets=[b for b in playbook.bullets if f"- {b.content}" not in rivals],
    )
    text = kept.render(header=header)
    ending = closing(index.conventions)
    body, tail = text, ""
    if ending and text.endswith(f"\n\n{ending}"):
        body, tail = text[: -len(ending) - 2], f"\n\n{ending}"
    return f"{body}\n{focus}{tail}"


def _check_rivals_sound(index: RuleIndex, request: str) -> None:
    """Every rival line is an exclusive rule of a named rule's shape, with other values."""
    named = index.matching(request, limit=MAX_FOCUS_RULES)
    wanted: dict[str, set[tuple[str, ...]]] = {}
    for rule in named:
        if (slots := exclusive(rule.action)) is not None:
            wanted.setdefault(slots[0], set()).add(slots[1])
    for line in index.rivals_of(named):
        rule = parse_rule(line[2:])
        assert rule is not None, line
        slots = exclusive(rule.action)
        assert slots is not None, line
        assert slots[0] in wanted and slots[1] not in wanted[slots[0]], line


@pytest.mark.parametrize("seed", range(3))
def test_the_cut_equals_rendering_without_the_rivals(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        playbook = _playbook(rng)
        header = rng.choice(HEADERS)
        rendered = playbook.render(header=header)
        if not rendered:
            continue
        index = RuleIndex.of(playbook)
        for _ in range(4):
            request = _request(rng)
            limit = rng.randint(1, 5)
            served = focused(rendered, index, request, limit=limit)
            expected = _expected(playbook.live(), index, request, header, limit)
            assert served == expected, (
                f"\nbullets={[(b.section, b.content, b.pending) for b in playbook.bullets]!r}"
                f"\nheader={header!r}\nrequest={request!r}\nlimit={limit}"
                f"\n--- served\n{served}\n--- expected\n{expected}"
            )
            _check_rivals_sound(index, request)


@pytest.mark.parametrize("seed", range(2))
def test_without_drop_rivals_only_the_focus_is_added(seed: int) -> None:
    rng = random.Random(1000 + seed)
    for _ in range(200):
        playbook = _playbook(rng)
        rendered = playbook.render()
        if not rendered:
            continue
        index = RuleIndex.of(playbook)
        request = _request(rng)
        served = focused(rendered, index, request, limit=3, drop_rivals=False)
        focus = index.focus(request, limit=3)
        if not focus:
            assert served == rendered
            continue
        ending = closing(index.conventions)
        body = rendered[: -len(ending) - 2] if ending else rendered
        tail = f"\n\n{ending}" if ending else ""
        assert served == f"{body}\n{focus}{tail}"
