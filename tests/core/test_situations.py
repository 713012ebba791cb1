"""The rules a request names, repeated after the playbook (``situations.RuleIndex``).

The bundled 1.5B reads a list of two dozen "When ..., answer ..." rules and still
answers with the wrong one; the rules whose situation the request names are
repeated after the list for that request. These tests pin which rules match,
their order, what the agent is sent, and that verified adoption replays with
the same text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langgraph_combee import AlgorithmSettings, Combee, Feedback, ServingSettings, Trace
from langgraph_combee._core.conventions import Convention, closing
from langgraph_combee._core.playbook import RENDER_HEADER, Bullet, Playbook
from langgraph_combee._core.situations import FOCUS_HEADER, RuleIndex, focused, parse_rule
from langgraph_combee._core.types import TraceMessage
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import FunctionChatModel, ScriptedChatModel, fake_learner
from tests.agent.test_middleware import accept_rules, rendered_without

APP_PROMPT = "You route support tickets to a team code."
RULES = [
    "When refund or money back, answer FIN-7Q.",
    "When desk lamp repair or broken lamp, answer LOG-8W.",
    "When lamp, answer HW-6R.",
    "When password reset, answer SEC-4X.",
    "Keep answers short.",
]


def index(*rules: str) -> RuleIndex:
    return RuleIndex(list(rules or RULES))


# --------------------------------------------------------------------------- matching


def test_a_rule_matches_when_all_words_of_one_alternative_occur() -> None:
    found = index().matching("Can I have my money back for the kettle?")
    assert [r.text() for r in found] == ["When money back, answer FIN-7Q."]


def test_one_word_of_a_two_word_alternative_is_no_match() -> None:
    assert index().matching("I forgot my password yesterday") == []
    assert index().matching("The money is gone") == []


def test_plurals_and_case_match_as_situations_do() -> None:
    found = index().matching("REFUNDS take how long?")
    assert [r.action for r in found] == ["answer FIN-7Q"]


def test_the_most_specific_rule_comes_first() -> None:
    found = index().matching("My desk lamp needs a repair, the lamp flickers")
    assert [r.text() for r in found] == [
        "When desk lamp repair, answer LOG-8W.",
        "When lamp, answer HW-6R.",
    ]


def test_a_rule_with_more_named_alternatives_wins_a_tie_and_actions_are_given_once() -> None:
    rules = RuleIndex(
        [
            "When parcel, answer LOG-5T.",
            "When refund or money back, answer FIN-7Q.",
            "When refund, answer FIN-7Q.",
        ]
    )
    found = rules.matching("A refund please, I want my money back for the parcel")
    assert [r.text() for r in found] == [
        "When refund or money back, answer FIN-7Q.",
        "When parcel, answer LOG-5T.",
    ]


def test_a_tie_goes_to_the_rule_sharing_more_of_the_requests_words() -> None:
    rules = RuleIndex(
        [
            "When form accessibility or forms or font, answer UX-3S.",
            "When return or desk lamp return form, answer RET-3H.",
        ]
    )
    found = rules.matching("The return form page gives me an error")
    assert [r.action for r in found] == ["answer RET-3H", "answer UX-3S"]


def test_a_tie_goes_to_the_rule_the_word_is_central_to() -> None:
    rules = RuleIndex(
        [
            "When invoice request or company or accounts, answer ACC-2M.",
            "When refund time or refund or kettle, answer FIN-7Q.",
        ]
    )
    found = rules.matching("The refund is missing from my bank account")
    assert [r.text() for r in found] == [
        # "time" is a word of requests of every kind: "refund time" matches as "refund".
        "When refund time or refund, answer FIN-7Q.",
        "When accounts, answer ACC-2M.",
    ]


def test_the_limit_is_kept() -> None:
    text = "refund for the broken lamp and a password reset"
    assert len(index().matching(text, limit=2)) == 2
    assert len(index().matching(text)) == 3
    assert index().matching(text, limit=0) == []


def test_text_that_is_not_a_rule_never_matches() -> None:
    only_prose = RuleIndex(["Keep answers short.", "Answer in English.", ""])
    assert not only_prose
    assert only_prose.matching("Keep answers short please, in English") == []
    assert only_prose.focus("anything") == ""


def test_words_of_any_script_match() -> None:
    rules = RuleIndex(["When remboursement, answer FIN-7Q.", "When 退款, answer FIN-7Q."])
    assert [r.action for r in rules.matching("Où est mon REMBOURSEMENT ?")] == ["answer FIN-7Q"]
    assert [r.text() for r in rules.matching("我的退款在哪里")] == ["When 退款, answer FIN-7Q."]


def test_a_situation_of_stop_words_only_never_matches_everything() -> None:
    rules = RuleIndex(["When the user asks, answer FIN-7Q.", "When it is, answer X."])
    assert rules.matching("the user asks: what is it?") == []


@pytest.mark.parametrize("text", ["", " ", "\x00\ufffd", "a" * 100_000, "When refund, answer"])
def test_odd_requests_do_not_raise(text: str) -> None:
    assert isinstance(index().focus(text), str)


def test_a_long_request_is_matched_on_its_start() -> None:
    text = "x " * 3000 + "refund"
    assert index().matching(text) == []
    assert index().matching("refund " + "x " * 3000) != []


def test_focus_text_and_the_served_playbook() -> None:
    rules = index()
    focus = rules.focus("my money back")
    assert focus == f"{FOCUS_HEADER}\n- When money back, answer FIN-7Q."
    assert focused("PLAYBOOK", rules, "my money back") == f"PLAYBOOK\n{focus}"
    assert focused("PLAYBOOK", rules, "hello") == "PLAYBOOK"
    assert focused("PLAYBOOK", rules, "my money back", limit=0) == "PLAYBOOK"
    assert focused("", rules, "my money back") == ""


def test_pending_bullets_are_not_indexed() -> None:
    playbook = Playbook(
        bullets=[
            Bullet(id="a", section="others", content=RULES[0]),
            Bullet(id="b", section="others", content=RULES[3], pending=True),
        ]
    )
    rules = RuleIndex.of(playbook)
    assert rules.matching("refund") and not rules.matching("password reset")


# --------------------------------------------------------------------------- rivals


def sectioned(*items: tuple[str, str]) -> Playbook:
    return Playbook(
        bullets=[Bullet(id=f"b{i}", section=sec, content=c) for i, (sec, c) in enumerate(items)]
    )


def test_the_rules_asking_another_value_are_left_out_for_a_request() -> None:
    playbook = sectioned(
        ("billing", "When refund or money back, answer FIN-7Q."),
        ("billing", "When chargeback, answer FIN-7Q."),  # the same action: it stays
        ("billing", "When invoice, answer ACC-2M."),
        ("security", "When password reset, answer SEC-4X."),
        ("style", "Keep answers short."),
    )
    served = focused(playbook.render(), RuleIndex.of(playbook), "my money back please")
    assert served == (
        f"{RENDER_HEADER}\n"
        "### Billing\n"
        "- When refund or money back, answer FIN-7Q.\n"
        "- When chargeback, answer FIN-7Q.\n"
        "### Style\n"  # "### Security" had only a rival: its heading goes too
        "- Keep answers short.\n"
        f"{FOCUS_HEADER}\n- When money back, answer FIN-7Q."
    )
    # Off, or no rule named: the whole playbook.
    whole = focused(playbook.render(), RuleIndex.of(playbook), "my money back", drop_rivals=False)
    assert whole == f"{playbook.render()}\n{FOCUS_HEADER}\n- When money back, answer FIN-7Q."
    assert focused(playbook.render(), RuleIndex.of(playbook), "hello") == playbook.render()


def test_only_rules_whose_action_is_the_reply_itself_are_rivals() -> None:
    rules = [
        "When refund or money back, answer FIN-7Q.",
        "When invoice, route to ACC-2M.",  # another shape: no rival
        "When password reset, answer SEC-4X.",  # a rival
        "When booking for a manager, pass cabin='business'.",  # an argument: adds up
        "When booking a flight, call check_seats first.",  # no value
        "When a refund is asked for a damaged or lost parcel, answer LOG-8W.",  # prose
    ]
    index = RuleIndex(rules)
    assert index.rivals_of(index.matching("my money back")) == {f"- {rules[2]}"}
    assert index.rivals_of([]) == frozenset()
    assert index.rivals_of(index.matching("booking for my manager")) == frozenset()


def test_the_conventions_stay_last_when_rivals_are_left_out() -> None:
    convention = Convention("end", "Kind regards, the desk").content()
    playbook = sectioned(
        ("others", "When refund, answer FIN-7Q."),
        ("others", "When invoice, answer ACC-2M."),
        ("others", convention),
    )
    served = focused(playbook.render(), RuleIndex.of(playbook), "a refund")
    assert "ACC-2M" not in served
    assert served.endswith(
        f"- When refund, answer FIN-7Q.\n{FOCUS_HEADER}\n- When refund, answer FIN-7Q.\n\n"
        f"{closing([Convention('end', 'Kind regards, the desk')])}"
    )


def test_the_rule_served_by_meaning_leaves_its_rivals_out_too() -> None:
    playbook = sectioned(
        ("others", "When journalism, answer PR-7M."), ("others", "When refund, answer FIN-7Q.")
    )
    index = RuleIndex.of(playbook)
    served = focused(
        playbook.render(),
        index,
        "press kit",
        closest=lambda text: [parse_rule(playbook.bullets[0].content)],
    )
    assert "FIN-7Q" not in served and served.endswith("- When journalism, answer PR-7M.")


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_bad_drop_rivals_is_refused_naming_the_value(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="drop_rivals"):
        ServingSettings(drop_rivals=bad)  # type: ignore[arg-type]


def test_drop_rivals_off_serves_the_agent_the_whole_playbook() -> None:
    combee = Combee(prompt_id="router", serving=ServingSettings(drop_rivals=False))
    try:
        version = accept_rules(combee, *RULES)
        model = ScriptedChatModel(["FIN-7Q"], cycle=True)
        agent = create_agent(model, [], system_prompt=APP_PROMPT, middleware=[combee.middleware()])
        agent.invoke({"messages": [HumanMessage("refund please")]})
        assert system_of(model) == (
            f"{APP_PROMPT}\n\n{version.render()}\n{FOCUS_HEADER}\n- When refund, answer FIN-7Q."
        )
    finally:
        combee._agent.server.close(flush=False)


@pytest.mark.parametrize("bad", [-1, 21, 2.0, "3", True, None])
def test_bad_focus_rules_are_refused_naming_the_value(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="focus_rules"):
        ServingSettings(focus_rules=bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- served


@pytest.fixture
def combee() -> Iterator[Combee]:
    # The focus by words alone (rules by meaning: tests/core/test_nearest.py).
    instance = Combee(prompt_id="router", serving=ServingSettings(focus_embedder=None))
    yield instance
    instance._agent.server.close(flush=False)


def system_of(model: ScriptedChatModel) -> str:
    system = model.prompts[-1][0]
    assert isinstance(system, SystemMessage)
    return str(system.text)


def test_the_agent_is_sent_the_rules_its_request_names_after_the_playbook(
    combee: Combee,
) -> None:
    version = accept_rules(combee, *RULES)
    model = ScriptedChatModel(["FIN-7Q"], cycle=True)
    agent = create_agent(model, [], system_prompt=APP_PROMPT, middleware=[combee.middleware()])

    agent.invoke({"messages": [HumanMessage("Can I get my money back?")]})
    # The rules that answer another code are left out for this request; the rule
    # that names no value stays.
    playbook = rendered_without(version, RULES[1], RULES[2], RULES[3])
    assert system_of(model) == (
        f"{APP_PROMPT}\n\n{playbook}\n{FOCUS_HEADER}\n- When money back, answer FIN-7Q."
    )

    agent.invoke({"messages": [HumanMessage("Hello there")]})
    assert system_of(model) == f"{APP_PROMPT}\n\n{version.render()}"


def test_the_latest_human_message_is_matched(combee: Combee) -> None:
    accept_rules(combee, *RULES)
    model = ScriptedChatModel(["ok"], cycle=True)
    agent = create_agent(model, [], middleware=[combee.middleware()])
    agent.invoke(
        {
            "messages": [
                HumanMessage("I want a refund"),
                HumanMessage([{"type": "text", "text": "No: reset my password reset link"}]),
            ]
        }
    )
    assert system_of(model).endswith(f"{FOCUS_HEADER}\n- When password reset, answer SEC-4X.")


def test_focus_rules_zero_serves_the_playbook_alone() -> None:
    combee = Combee(prompt_id="router", serving=ServingSettings(focus_rules=0))
    try:
        version = accept_rules(combee, *RULES)
        model = ScriptedChatModel(["FIN-7Q"], cycle=True)
        agent = create_agent(model, [], system_prompt=APP_PROMPT, middleware=[combee.middleware()])
        agent.invoke({"messages": [HumanMessage("refund please")]})
        assert system_of(model) == f"{APP_PROMPT}\n\n{version.render()}"
    finally:
        combee._agent.server.close(flush=False)


def test_content_block_prompts_get_the_focus_in_the_playbook_block(combee: Combee) -> None:
    version = accept_rules(combee, *RULES)
    block = {"type": "text", "text": APP_PROMPT, "cache_control": {"type": "ephemeral"}}
    model = ScriptedChatModel(["ok"], cycle=True)
    agent = create_agent(
        model, [], system_prompt=SystemMessage(content=[block]), middleware=[combee.middleware()]
    )
    agent.invoke({"messages": [HumanMessage("refund please")]})
    content = model.prompts[-1][0].content
    assert content[0] == block
    assert content[1]["text"].startswith(rendered_without(version, *RULES[1:4]))
    assert content[1]["text"].endswith("- When refund, answer FIN-7Q.")


# --------------------------------------------------------------------------- replayed


def wrong_runs(truth: str, *texts: str) -> list[Trace]:
    """One-turn runs that answered "NONE" where ``truth`` was right."""
    return [
        Trace(
            id=f"t{i}",
            input=text,
            output="NONE",
            messages=[
                TraceMessage(role="human", content=text),
                TraceMessage(role="ai", content="NONE"),
            ],
            feedback=Feedback(correct=False, ground_truth=truth),
        )
        for i, text in enumerate(texts)
    ]


def test_verified_adoption_replays_with_the_focus_the_agent_would_be_sent() -> None:
    sent: list[str] = []

    def agent_reply(messages: Sequence[BaseMessage]) -> str:
        system = str(messages[0].text) if isinstance(messages[0], SystemMessage) else ""
        sent.append(system)
        # An agent that follows only the rules repeated for its request.
        _, _, focus = system.partition(FOCUS_HEADER)
        return "FIN-7Q" if "FIN-7Q" in focus else "NONE"

    def evaluator(trace: Trace) -> Feedback:
        return Feedback(correct=trace.output == "FIN-7Q")

    rule = "When refund or money back, answer FIN-7Q."
    combee = Combee(
        prompt_id="router",
        model=fake_learner(insight=lambda text, truth, output: rule),
        evaluator=evaluator,
        batch_size=4,
        algorithm=AlgorithmSettings(agent_model=FunctionChatModel(agent_reply)),
    )
    try:
        report = combee.learn(wrong_runs("FIN-7Q", "my refund please", "I want my money back"))
        assert any(FOCUS_HEADER in s for s in sent), sent
        assert [b.content for b in combee.current().playbook.bullets] == [rule]
        replay = report.steps[0].replay
        assert replay is not None and replay.calls >= 2
    finally:
        combee._agent.server.close(flush=False)
