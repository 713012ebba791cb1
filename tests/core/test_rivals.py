"""Rival rules left out for a request (``ServingSettings.drop_rivals``): the edges.

The edges a naive version broke on (the middleware told a focused
prompt by its length, additive actions were rivals, a matching rule past the
focus limit went, lines of multi-line bullets and custom headers were cut), and
attacks it holds against.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage

from langgraph_combee import Combee
from langgraph_combee._core.playbook import RENDER_HEADER, Bullet, Playbook
from langgraph_combee._core.situations import FOCUS_HEADER, RuleIndex, exclusive, focused
from langgraph_combee.testing import FunctionChatModel, ScriptedChatModel
from tests.agent.test_graph import node_graph
from tests.agent.test_middleware import accept_rules
from tests.core.test_situations_focus_edges import sent_and_replayed

APP = "You route support tickets to a team code."
KEEP = "When refund, answer FIN-7Q."
FOCUS = f"{FOCUS_HEADER}\n- {KEEP}"


# An ordinary playbook: for "refund please" the two rivals left out are exactly as long
# as the focus block added (about 1% of the focused requests of small random playbooks
# of such rules, reviewer's sampling).
SAME_LENGTH = [KEEP, "When invoice, answer SEC-4X.", "When late delivery, answer ACC-2M."]


def sectioned(*items: tuple[str, str]) -> Playbook:
    return Playbook(
        bullets=[Bullet(id=f"b{i}", section=s, content=c) for i, (s, c) in enumerate(items)]
    )


@pytest.fixture
def combee() -> Iterator[Combee]:
    instance = Combee(prompt_id="router")
    yield instance
    instance._agent.server.close(flush=False)


# =========================================================================== found


def test_middleware_serves_the_focus_when_the_rivals_left_out_are_as_long_as_the_focus(
    combee: Combee,
) -> None:
    # The middleware tells a focused prompt from the bare playbook by its length only
    # (``len(served) != len(playbook)``). Before drop_rivals the focus only added text;
    # now removed rivals can cancel it out exactly, and the bare playbook is sent.
    version = accept_rules(combee, *SAME_LENGTH)
    served = combee._agent.server.served(version, "refund please")
    assert served != version.render() and len(served) == len(version.render())
    model = ScriptedChatModel(["FIN-7Q"], cycle=True)
    agent = create_agent(model, [], system_prompt=APP, middleware=[combee.middleware()])
    agent.invoke({"messages": [HumanMessage("refund please")]})
    assert model.prompts[-1][0].text == f"{APP}\n\n{served}"


def test_replay_sends_what_the_agent_was_sent_when_the_lengths_cancel_out(
    combee: Combee,
) -> None:
    sent, replayed = sent_and_replayed(combee, [[HumanMessage("refund please")]], rules=SAME_LENGTH)
    assert replayed == sent and sent[0].endswith(FOCUS) and "SEC-4X" not in sent[0]


def test_a_rule_whose_action_names_a_tool_in_backticks_is_no_rival() -> None:
    # Backticks quote a value, but calling a tool first adds up with other rules.
    assert exclusive("call `check_seats` first") is None
    assert exclusive("add the tag 'vip'") is None
    assert exclusive("mention REF-1 in the reply") is None
    assert exclusive("answer FIN-7Q") == ("answer {}", ("fin-7q",))
    assert exclusive("Route to LOG-8W.") == ("route to {}", ("log-8w",))
    assert exclusive("pass cabin='economy'") is None  # an argument: calls add up
    assert exclusive("set the flag 'urgent'") is None
    assert exclusive("label the ticket 'vip'") is None
    assert exclusive("answer FIN-7Q and add the tag 'vip'") is None
    assert exclusive("classify as 'billing'") == ("classify as {}", ("billing",))


def test_a_second_tool_rule_that_also_applies_is_not_left_out() -> None:
    # Tool calls add up (the reply can make both); the word matcher cannot tell
    # "over 100 EUR", so the rule that also applies is removed from the prompt.
    playbook = sectioned(
        ("others", "When a refund, call `lookup_order` first."),
        ("others", "When a refund over 100 EUR, call `manager_approval` first."),
    )
    served = focused(playbook.render(), RuleIndex.of(playbook), "A refund of 250 EUR, order 1234")
    assert "manager_approval" in served


def test_an_additive_tag_rule_that_also_applies_is_not_left_out() -> None:
    playbook = sectioned(
        ("others", "When refund, add the tag 'billing'."),
        ("others", "When VIP customer, add the tag 'vip'."),
    )
    served = focused(playbook.render(), RuleIndex.of(playbook), "Refund please, VIP member here")
    assert "'vip'" in served


def test_a_matching_rule_past_the_focus_limit_is_not_left_out() -> None:
    # Both rules match the request; focus_rules=1 repeats one, and the other, which
    # the request names too, disappears from the playbook.
    playbook = sectioned(
        ("others", "When refund, answer FIN-7Q."), ("others", "When lawyer, answer LEG-1A.")
    )
    index = RuleIndex.of(playbook)
    request = "refund now or my lawyer calls"
    assert len(index.matching(request, limit=3)) == 2
    served = focused(playbook.render(), index, request, limit=1)
    assert "LEG-1A" in served


def test_a_line_inside_a_multi_line_bullet_is_not_cut_out() -> None:
    note = (
        "Examples of good routing:\n- When invoice, answer ACC-2M.\n- When refund, answer FIN-7Q."
    )
    playbook = sectioned(
        ("others", KEEP), ("others", "When invoice, answer ACC-2M."), ("style", note)
    )
    served = focused(playbook.render(), RuleIndex.of(playbook), "refund please")
    assert f"- {note}" in served


def test_a_heading_line_inside_a_bullet_is_not_cut_out() -> None:
    note = "Tone guide\n### Escalations\n\nBe calm and polite."
    playbook = sectioned(
        ("others", KEEP), ("others", "When invoice, answer ACC-2M."), ("style", note)
    )
    served = focused(playbook.render(), RuleIndex.of(playbook), "refund please")
    assert f"- {note}" in served


def test_a_custom_header_that_is_a_heading_is_kept() -> None:
    playbook = sectioned(("others", KEEP), ("others", "When invoice, answer ACC-2M."))
    rendered = playbook.render(header="### Learned rules")
    served = focused(rendered, RuleIndex.of(playbook), "refund please")
    assert served.startswith("### Learned rules\n")


@pytest.mark.parametrize(
    ("focused_action", "other_action", "rival"),
    [
        ("answer FIN-7Q", "answer ＳＥＣ-４Ｘ", True),  # full-width: read in NFKC form
        ("answer 'Yes'", "answer 'yes'", False),  # one value in two cases
        ("answer FIN-7Q and P1", "answer P1 and FIN-7Q", False),  # two values: not one reply
        ("escalate to tier 2 within 4 hours", "escalate to tier 4 within 2 hours", False),
    ],
)
def test_which_actions_are_rivals(focused_action: str, other_action: str, rival: bool) -> None:
    index = RuleIndex([f"When refund, {focused_action}.", f"When invoice, {other_action}."])
    expected = {f"- When invoice, {other_action}."} if rival else set()
    assert index.rivals_of(index.matching("refund")) == expected


# =========================================================================== held


@pytest.mark.parametrize("how", ["middleware", "node", "wrap_model", "system_prompt", "blocks"])
def test_the_apps_own_prompt_is_never_cut(combee: Combee, how: str) -> None:
    rival = "When invoice, answer ACC-2M."
    app = f"{APP}\n- {rival}\n### Others\n"  # lines of the app equal to a rival and a heading
    accept_rules(combee, KEEP, rival)
    if how == "middleware":
        model = ScriptedChatModel(["ok"], cycle=True)
        create_agent(model, [], system_prompt=app, middleware=[combee.middleware()]).invoke(
            {"messages": [HumanMessage("refund please")]}
        )
        text = str(model.prompts[-1][0].text)
    elif how == "blocks":
        model = ScriptedChatModel(["ok"], cycle=True)
        system = SystemMessage(content=[{"type": "text", "text": app}])
        create_agent(model, [], system_prompt=system, middleware=[combee.middleware()]).invoke(
            {"messages": [HumanMessage("refund please")]}
        )
        content: Any = model.prompts[-1][0].content
        assert content[0] == {"type": "text", "text": app}
        text = content[1]["text"]
        assert "ACC-2M" not in text
        return
    elif how == "node":
        fmodel = FunctionChatModel(lambda messages: "ok")
        node_graph(combee, fmodel).invoke(
            {"messages": [SystemMessage(app), HumanMessage("refund please")]}
        )
        text = str(fmodel.prompts[-1][0].text)
    elif how == "wrap_model":
        model = ScriptedChatModel(["ok"], cycle=True)
        combee.wrap_model(model).invoke([SystemMessage(app), HumanMessage("refund please")])
        text = str(model.prompts[-1][0].text)
    else:
        text = combee.system_prompt(app, request="refund please")
    assert text.startswith(app.rstrip())
    assert text.count("ACC-2M") == 1 and text.endswith(FOCUS)


def test_conventions_duplicates_and_spaces_hold() -> None:
    playbook = Playbook(
        bullets=[
            Bullet(id="a", section="others", content=KEEP),
            Bullet(id="b", section="others", content="  When invoice, answer ACC-2M.  "),
            Bullet(id="c", section="billing", content="When invoice, answer ACC-2M."),
            Bullet(id="d", section="billing", content="When invoice, answer ACC-2M."),
            Bullet(id="e", section="style", content='Every reply must end with the line "Bye".'),
            Bullet(id="f", section="style", content="### Billing"),
        ]
    )
    served = focused(playbook.render(), RuleIndex.of(playbook), "refund please")
    assert "ACC-2M" not in served
    assert served == (
        f"{RENDER_HEADER}\n### Others\n- {KEEP}\n### Style\n- ### Billing\n{FOCUS}\n\n"
        'House style: end every reply with the line "Bye" on its own line.'
    )


def test_described_values_are_no_rival_values() -> None:
    date = "pass date='the value in the input, as a date written YYYYMMDD'"
    assert exclusive("pass the value in the input, as a date written YYYYMMDD") is None
    index = RuleIndex(
        [f"When a booking, {date}.", "When a rebooking, pass date='the value in the input'."]
    )
    assert index.rivals_of(index.matching("a booking")) == frozenset()


def test_every_rule_a_request_names_stays_however_many() -> None:
    rules = [f"When w{i}x, answer C-{i}." for i in range(22)]
    index = RuleIndex(rules)
    request = " ".join(f"w{i}x" for i in range(22))
    assert index.rivals_of(index.matching(request, limit=1 << 30)) == frozenset()
    playbook = sectioned(*(("others", r) for r in rules))
    served = focused(playbook.render(), RuleIndex.of(playbook), request)
    assert all(f"- {r}" in served for r in rules)


def test_a_rule_of_prose_is_never_left_out() -> None:
    # Its condition ("over 100 EUR") is beyond the words: it may apply though unmatched.
    playbook = sectioned(
        ("others", "When refund, answer FIN-7Q."),
        ("others", "When a refund is over 100 EUR and the customer is new, answer MGR-1."),
    )
    served = focused(playbook.render(), RuleIndex.of(playbook), "refund of 250 EUR")
    assert "MGR-1" in served
