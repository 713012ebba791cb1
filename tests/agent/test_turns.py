"""Worked examples served as conversation turns: the pick, the request sent, the trace kept."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langgraph_combee import Combee, ServingSettings
from langgraph_combee._agent.turns import ExampleSet, NearestShots, as_turns
from langgraph_combee._core.playbook import EXAMPLES_INTRO, EXAMPLES_SECTION, Playbook
from langgraph_combee._rules.examples import example_text
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import ScriptedChatModel
from langgraph_combee.types import Add, Decision, PromptVersion
from tests.agent.test_middleware import (
    APP_PROMPT,
    Middleware,
    ask,
    captured,
    lookup,
    mw,
    tool_then_answer,
)

__all__ = ["mw"]  # a fixture, used by name

RULE = "Refund tickets go to FIN-REFUNDS."
# Oldest first: each is added in a version of its own below.
EXAMPLES = (
    ("my card was charged twice", "BILL-2"),
    ("the parcel never arrived", "SHIP-4"),
    ("the invoice shows the wrong amount", "BILL-2"),
    ("how do I reset my password", "ACC-1"),
    ("the courier left my parcel at the wrong door", "SHIP-4"),
)


def playbook_with(examples: Sequence[tuple[str, str]], *rules: str) -> Playbook:
    book = Playbook().apply([Add(section="others", content=rule) for rule in rules]).playbook
    for number, (request, answer) in enumerate(examples, start=1):
        add = Add(section=EXAMPLES_SECTION, content=example_text(request, answer))
        book = book.apply([add], version=number).playbook
    return book


def accept(combee: Combee, playbook: Playbook) -> PromptVersion:
    registry = combee.registry()
    candidate = registry.add_candidate(PromptVersion(prompt_id=combee.prompt_id, playbook=playbook))
    accepted = registry.accept(
        candidate.version, Decision(accepted=True, policy="manual", reason="test")
    )
    combee._agent.server.publish(accepted)
    return accepted


class KeywordEmbedder:
    """One dimension per keyword: texts sharing a keyword are close (no weights needed)."""

    keywords = ("money", "parcel", "login")
    synonyms: ClassVar[dict[str, tuple[str, ...]]] = {
        "money": ("charged", "invoice", "refund", "paid", "amount"),
        "parcel": ("parcel", "courier", "delivery", "package"),
        "login": ("password", "login", "sign"),
    }

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [
            [
                1.0 if any(w in text.lower() for w in self.synonyms[k]) else 0.0
                for k in self.keywords
            ]
            + [0.1]
            for text in texts
        ]


class BrokenEmbedder:
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("no embedding today")


@pytest.fixture
def examples() -> ExampleSet:
    return ExampleSet(playbook_with(EXAMPLES, RULE))


# ---------------------------------------------------------------- the pick


def test_the_set_holds_the_examples_newest_first_and_no_rule(examples: ExampleSet) -> None:
    assert [shot.request for shot in examples.shots] == [r for r, _ in reversed(EXAMPLES)]
    assert all(shot.answer != RULE for shot in examples.shots)


def test_a_pending_example_is_not_served() -> None:
    book = playbook_with(EXAMPLES[:2])
    pending = book.replace_bullets(
        [b.model_copy(update={"pending": i == 0}) for i, b in enumerate(book.bullets)]
    )
    assert [shot.request for shot in ExampleSet(pending).shots] == [EXAMPLES[1][0]]


def test_by_words_puts_the_examples_sharing_words_first(examples: ExampleSet) -> None:
    chosen = examples.by_words("My parcel never arrived", 2)
    assert [shot.request for shot in chosen] == [
        "the parcel never arrived",
        "the courier left my parcel at the wrong door",
    ]


def test_by_words_takes_one_of_each_answer_before_a_second(examples: ExampleSet) -> None:
    query = "the parcel never arrived and I was charged twice"
    assert [shot.answer for shot in examples.by_words(query, 3)] == ["BILL-2", "SHIP-4", "ACC-1"]
    # Sharing a word beats sharing none, even for a second of one answer.
    chosen = examples.by_words("the courier lost my parcel", 3)
    assert [shot.answer for shot in chosen] == ["SHIP-4", "SHIP-4", "ACC-1"]


def test_by_words_serves_k_even_when_no_word_is_shared(examples: ExampleSet) -> None:
    chosen = examples.by_words("zzz", 3)
    # Newest of each answer, newest first: never nothing.
    assert [shot.request for shot in chosen] == [
        "the courier left my parcel at the wrong door",
        "how do I reset my password",
        "the invoice shows the wrong amount",
    ]
    assert len(examples.by_words("zzz", 10)) == len(EXAMPLES)


def test_by_meaning_picks_the_closest_best_first(examples: ExampleSet) -> None:
    nearest = NearestShots(examples, KeywordEmbedder())
    chosen = nearest.closest("I was charged for a refund I never got", 2)
    assert [shot.answer for shot in chosen] == ["BILL-2", "BILL-2"]
    # Equal scores: the newer first.
    assert chosen[0].request == "the invoice shows the wrong amount"
    assert len(nearest.closest("a login problem", 1)) == 1
    assert nearest.closest("   ", 2) == []


def test_a_wrong_count_of_vectors_raises(examples: ExampleSet) -> None:
    class Short:
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return [[1.0]]

    with pytest.raises(ValueError, match="1 vectors for 5 texts"):
        NearestShots(examples, Short())


def test_each_example_is_a_user_turn_then_an_assistant_turn(examples: ExampleSet) -> None:
    turns = as_turns(examples.shots[:2])
    assert turns == (
        HumanMessage(content=EXAMPLES[-1][0]),
        AIMessage(content=EXAMPLES[-1][1]),
        HumanMessage(content=EXAMPLES[-2][0]),
        AIMessage(content=EXAMPLES[-2][1]),
    )


# ---------------------------------------------------------------- the setting


@pytest.mark.parametrize("value", [-1, 21, 2.0, True, "4", None])
def test_a_bad_example_turns_value_is_named(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="example_turns") as caught:
        ServingSettings(example_turns=value)
    assert repr(value) in str(caught.value)
    assert "an int from 0 to 20" in str(caught.value)


def test_the_default_serves_four() -> None:
    assert ServingSettings().example_turns == 4


# ---------------------------------------------------------------- serving


@pytest.fixture
def combee() -> Iterator[Combee]:
    instance = Combee(prompt_id="router")
    yield instance
    instance._agent.server.close(flush=False)


def test_the_model_gets_the_turns_after_the_system_prompt_without_examples(
    combee: Combee, mw: Middleware
) -> None:
    version = accept(combee, playbook_with(EXAMPLES, RULE))
    model = ScriptedChatModel(["SHIP-4"])
    agent = create_agent(model, [], system_prompt=APP_PROMPT, middleware=[mw(combee)])
    agent.invoke(ask("my parcel never arrived"))
    (prompt,) = model.prompts
    system = prompt[0]
    assert isinstance(system, SystemMessage)
    assert RULE in system.text
    assert EXAMPLES_INTRO not in system.text and "parcel" not in system.text
    assert system.text == f"{APP_PROMPT}\n\n{version.playbook.without_examples().render()}"
    turns, last = prompt[1:-1], prompt[-1]
    assert len(turns) == 8
    assert [type(m) for m in turns] == [HumanMessage, AIMessage] * 4
    assert turns[0].text == "the parcel never arrived"
    assert last == HumanMessage("my parcel never arrived", id=last.id)
    assert combee.describe()["serving"]["example_turns"] == 4


def test_the_trace_holds_the_run_and_not_the_turns(combee: Combee, mw: Middleware) -> None:
    accept(combee, playbook_with(EXAMPLES, RULE))
    model = tool_then_answer("SHIP-4")
    agent = create_agent(model, [lookup], system_prompt=APP_PROMPT, middleware=[mw(combee)])
    agent.invoke(ask("my parcel never arrived"))
    first, after_tool = model.prompts  # a tool call, then the answer
    assert len(first) == 10 and first[1].text == "the parcel never arrived"
    # After a tool result the agent goes on without the examples.
    assert [type(m).__name__ for m in after_tool] == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
    ]
    (trace,) = captured(combee)
    assert trace.input == "my parcel never arrived"
    assert trace.output == "SHIP-4"
    served = {request for request, _ in EXAMPLES}
    assert not any(m.content in served for m in trace.messages)
    assert trace.messages[0].role == "human"
    assert sum(m.role == "human" for m in trace.messages) == 1


def test_zero_turns_keeps_the_examples_in_the_system_prompt(mw: Middleware) -> None:
    combee = Combee(prompt_id="router", serving=ServingSettings(example_turns=0))
    try:
        version = accept(combee, playbook_with(EXAMPLES, RULE))
        model = ScriptedChatModel(["SHIP-4"])
        agent = create_agent(model, [], system_prompt=APP_PROMPT, middleware=[mw(combee)])
        agent.invoke(ask("my parcel never arrived"))
        (prompt,) = model.prompts
        assert prompt[0].text == f"{APP_PROMPT}\n\n{version.render()}"
        assert EXAMPLES_INTRO in prompt[0].text
        assert len(prompt) == 2
    finally:
        combee._agent.server.close(flush=False)


def test_a_playbook_of_examples_alone_sends_the_app_prompt_and_turns(mw: Middleware) -> None:
    combee = Combee(prompt_id="router", serving=ServingSettings(example_turns=1))
    try:
        accept(combee, playbook_with(EXAMPLES))
        model = ScriptedChatModel(["ACC-1"])
        agent = create_agent(model, [], system_prompt=APP_PROMPT, middleware=[mw(combee)])
        agent.invoke(ask("I forgot my password"))
        (prompt,) = model.prompts
        assert prompt[0] == SystemMessage(APP_PROMPT)
        assert [m.text for m in prompt[1:3]] == ["how do I reset my password", "ACC-1"]
    finally:
        combee._agent.server.close(flush=False)


def test_the_focus_embedder_picks_by_meaning_once_per_request() -> None:
    embedder = KeywordEmbedder()
    combee = Combee(
        prompt_id="router", serving=ServingSettings(example_turns=2, focus_embedder=embedder)
    )
    try:
        version = accept(combee, playbook_with(EXAMPLES))
        server = combee._agent.server
        turns = server.example_turns(version, "I paid and got no refund")
        assert [m.text for m in turns] == [
            "the invoice shows the wrong amount",
            "BILL-2",
            "my card was charged twice",
            "BILL-2",
        ]
        calls = len(embedder.calls)
        assert server.example_turns(version, "I paid and got no refund") == turns
        assert len(embedder.calls) == calls  # the pick is cached per version and request
        assert combee.describe()["serving"]["examples_by_meaning"] == 4
    finally:
        combee._agent.server.close(flush=False)


def test_a_failing_embedder_falls_back_to_words() -> None:
    combee = Combee(
        prompt_id="router",
        serving=ServingSettings(example_turns=1, focus_embedder=BrokenEmbedder()),
    )
    try:
        version = accept(combee, playbook_with(EXAMPLES))
        turns = combee._agent.server.example_turns(version, "the parcel never came")
        assert [m.text for m in turns] == ["the parcel never arrived", "SHIP-4"]
        serving = combee.describe()["serving"]
        assert serving["focus_embed_errors"] == 1
        assert serving["examples_by_meaning"] == 0
    finally:
        combee._agent.server.close(flush=False)


def test_the_graph_helpers_keep_the_examples_in_the_system_prompt(combee: Combee) -> None:
    version = accept(combee, playbook_with(EXAMPLES, RULE))
    text = combee.system_prompt(APP_PROMPT, request="my parcel never arrived")
    assert EXAMPLES_INTRO in text
    assert text.startswith(f"{APP_PROMPT}\n\n{version.render()}")
