"""Role profiles chosen once, bounded replies, length limits, and rules corrected by evidence."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langgraph_combee import AlgorithmSettings, Combee, Feedback, LearnerSettings, Trace
from langgraph_combee._algorithm.auto_roles import known_small
from langgraph_combee._algorithm.roles import FullRoles, SmallRoles
from langgraph_combee._algorithm.schemas import ReflectionOut
from langgraph_combee._core.ops import Add
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Decision, PromptVersion, Reflection
from langgraph_combee._core.values import values
from langgraph_combee._llm import prompts
from langgraph_combee._llm.calls import CallSettings, CallStats, LLMCaller, bounded_model
from langgraph_combee._rules import rules
from langgraph_combee.errors import LearningError
from langgraph_combee.testing import (
    FunctionChatModel,
    ScriptedChatModel,
    fake_learner,
    parrot_learner,
)

openai_chat = pytest.importorskip("langchain_openai")
httpx = pytest.importorskip("httpx")

# ChatOpenAI warns that a model it does not know ("gpt-3.5-turbo", the default name)
# cannot take a JSON schema, and asks for a tool call instead: what a user's plain
# ChatOpenAI does against a local server.
pytestmark = pytest.mark.filterwarnings("ignore:Cannot use method='json_schema':UserWarning")


# ---------------------------------------------------------------- a plain ChatOpenAI on loopback


def _completion(content: str, finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "whatever",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class Server:
    """An OpenAI-compatible endpoint answering with ``reply(body) -> (content, finish)``."""

    def __init__(self, reply: Callable[[dict[str, Any]], tuple[str, str]]) -> None:
        self.reply = reply
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        body = json.loads(request.content)
        self.bodies.append(body)
        return httpx.Response(200, json=_completion(*self.reply(body)))

    def chat_openai(self, **kwargs: Any) -> Any:
        transport = httpx.MockTransport(self)
        return openai_chat.ChatOpenAI(
            base_url="http://127.0.0.1:8080/v1",
            api_key="x",
            max_retries=0,
            http_client=httpx.Client(transport=transport),
            http_async_client=httpx.AsyncClient(transport=transport),
            **kwargs,
        )


def _system(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


def _limit(body: dict[str, Any]) -> int | None:
    return body.get("max_tokens", body.get("max_completion_tokens"))


def _small_replies(body: dict[str, Any]) -> tuple[str, str]:
    system = _system(body)
    last = str(body["messages"][-1]["content"])
    if "You study one run" in system:
        code = re.findall(r"\b[A-Z]{3}-\d[A-Z]\b", last)[0]
        topic = {"FIN-7Q": "refund requests", "LOG-8W": "late deliveries"}[code]
        return json.dumps({"situation": topic, "action": f"answer {code}"}), "stop"
    if "You are the curator" in system:
        return json.dumps({"add": sorted(set(re.findall(r"\[(R\d+)\]", last)))}), "stop"
    return json.dumps({"drop": []}), "stop"


def _two_tickets() -> list[Trace]:
    return _three_tickets()[:2]


def _three_tickets() -> list[Trace]:
    return [
        Trace(id="a", input="Where is my refund?", output="GENERAL",
              feedback=Feedback(correct=False, ground_truth="FIN-7Q")),
        Trace(id="b", input="My parcel is two weeks late", output="GENERAL",
              feedback=Feedback(correct=False, ground_truth="LOG-8W")),
        Trace(id="c", input="The courier has not come", output="GENERAL",
              feedback=Feedback(correct=False, ground_truth="LOG-8W")),
    ]  # fmt: skip


def test_a_plain_chat_openai_on_a_loopback_server_learns_with_the_defaults() -> None:
    server = Server(_small_replies)
    combee = Combee(prompt_id="plain", model=server.chat_openai())
    roles = combee.describe_roles()
    assert roles["profile"] == "small" and "loopback" in roles["reason"]
    report = combee.learn(_two_tickets())
    assert sorted(b.content for b in report.playbook.bullets) == [
        "When late deliveries, answer LOG-8W.",
        "When refund requests, answer FIN-7Q.",
    ]
    assert report.steps[0].roles["profile"] == "small"
    # Every role's reply is bounded, by a limit suited to its (short) schema.
    limits = {(_system(b)[:20], _limit(b)) for b in server.bodies}
    assert all(limit is not None for _, limit in limits)
    reflect = [_limit(b) for b in server.bodies if "You study one run" in _system(b)]
    assert reflect and set(reflect) == {SmallRoles.reflect_tokens}


def test_a_length_cut_reply_gets_one_shorter_request_not_an_identical_retry() -> None:
    seen: list[str] = []

    def reply(body: dict[str, Any]) -> tuple[str, str]:
        last = str(body["messages"][-1]["content"])
        seen.append(last)
        if last == prompts.SHORTER_REQUEST:
            return _small_replies({**body, "messages": body["messages"][:-1]})
        if "You study one run" in _system(body):
            return '{"situation": "refund requests", "action": "answer FIN', "length"
        return _small_replies(body)

    server = Server(reply)
    combee = Combee(
        prompt_id="cut", model=server.chat_openai(), learner=LearnerSettings(max_attempts=3)
    )
    report = combee.learn(_two_tickets()[:1])
    step = report.steps[0]
    assert step.truncated == {"reflect": 1}
    assert step.calls["reflect"] == 2  # the cut reply, then one shorter request
    assert [b.content for b in report.playbook.bullets] == ["When refund requests, answer FIN-7Q."]


async def test_a_reply_cut_twice_is_lost_and_counted_without_retries() -> None:
    cut = AIMessage(content='{"key_insight": "Refu', response_metadata={"finish_reason": "length"})
    model = ScriptedChatModel([cut, cut, "never reached"])
    caller = LLMCaller(model, CallSettings(max_attempts=3, structured_output=False))
    stats = CallStats()
    out = await caller.call("combee.reflect", [HumanMessage("reflect")], ReflectionOut, stats)
    assert out is None
    assert model.calls == 2
    assert stats.truncated["combee.reflect"] == 2
    assert stats.unparsed["combee.reflect"] == 1
    assert stats.failed["combee.reflect"] == 0


async def test_a_length_finish_reason_error_is_not_retried_identically() -> None:
    class LengthFinishReasonError(Exception):
        """Stands in for openai's, matched by name."""

    model = ScriptedChatModel([LengthFinishReasonError("length"), json.dumps({"key_insight": "x"})])
    caller = LLMCaller(model, CallSettings(max_attempts=3, structured_output=False))
    stats = CallStats()
    out = await caller.call("combee.reflect", [HumanMessage("reflect")], ReflectionOut, stats)
    assert out is not None and out.key_insight == "x"
    assert model.prompts[1][-1].content == prompts.SHORTER_REQUEST
    assert stats.truncated["combee.reflect"] == 1 and stats.failed["combee.reflect"] == 0


def test_a_lower_max_tokens_set_by_the_user_is_kept() -> None:
    server = Server(_small_replies)
    assert bounded_model(server.chat_openai(max_tokens=50), 160).max_tokens == 50
    assert bounded_model(server.chat_openai(max_tokens=4000), 160).max_tokens == 160
    assert bounded_model(server.chat_openai(), 160).max_tokens == 160
    double = fake_learner()
    assert bounded_model(double, 160) is double  # no limit field: left as it is


# ---------------------------------------------------------------- choosing a profile


@pytest.mark.parametrize(
    ("kwargs", "small"),
    [
        ({"base_url": "http://127.0.0.1:8080/v1"}, True),
        ({"base_url": "http://localhost:11434/v1", "model": "llama3.1:70b"}, False),
        ({"base_url": "https://api.example.com/v1", "model": "qwen2.5:1.5b"}, True),
        ({"base_url": "https://api.example.com/v1", "model": "Llama-3.2-3B-Instruct"}, True),
        ({"base_url": "https://api.example.com/v1", "model": "gpt-4.1-mini"}, False),
    ],
)
def test_known_small_reads_the_server_and_the_model_name(
    kwargs: dict[str, str], small: bool
) -> None:
    model = openai_chat.ChatOpenAI(api_key="x", **kwargs)
    assert (known_small(model) is not None) is small
    assert Combee(prompt_id="p", model=model).describe_roles()["profile"] == (
        "small" if small else "full"
    )


def test_the_bundled_local_model_gets_the_small_profile() -> None:
    chat = pytest.importorskip("langgraph_combee.local._chat")
    model = chat.LocalChatOpenAI(base_url="http://10.0.0.5:9/v1", api_key="local", model="tiny")
    assert known_small(model) == "the bundled local model"


def test_auto_switches_to_small_when_full_replies_keep_failing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def reply(messages: list[BaseMessage]) -> str:
        system = str(messages[0].content)
        if "You are the reflector" in system:
            return "I think the agent should have tried harder"  # never JSON
        return _small_replies(
            {"messages": [{"content": system}, {"content": str(messages[-1].content)}]}
        )[0]

    combee = Combee(prompt_id="switch", model=FunctionChatModel(reply), batch_size=3)
    assert combee.describe_roles()["profile"] == "full"
    with (
        caplog.at_level(logging.WARNING, logger="langgraph_combee.learner"),
        pytest.raises(LearningError),
    ):
        combee.learn(_three_tickets())  # three unusable reflections of six calls
    roles = combee.describe_roles()
    assert roles["profile"] == "small" and roles["chosen"] == "switched"
    assert "unusable" in roles["reason"]
    assert any("small-model profile" in r.getMessage() for r in caplog.records)
    report = combee.learn(_three_tickets())
    assert report.steps[0].roles["chosen"] == "switched"
    assert len(report.playbook.bullets) == 2  # the two late-delivery runs give one rule


# ---------------------------------------------------------------- long user text


def test_a_long_reflection_keeps_its_key_insight_in_the_curator_prompt() -> None:
    reflection = Reflection(
        trace_id="t1",
        correct_approach="the user explained at length: " + "blah " * 2000,
        key_insight="When refund requests, answer FIN-7Q.",
    )
    body = str(
        prompts.curator_messages(Playbook(), [("R1", reflection)], token_budget=None)[1].content
    )
    fenced = re.search(r'label="reflection R1">\n(.*?)\n</untrusted_data>', body, re.S)
    assert fenced is not None
    data = json.loads(fenced.group(1))  # a whole object, not a cut one
    assert data["key_insight"] == "When refund requests, answer FIN-7Q."
    assert len(data["correct_approach"]) < 1300


def test_parrot_learner_learns_from_a_trace_with_long_user_text() -> None:
    trace = Trace(
        id="long",
        input="Where is my refund? " + "Some more words from the user. " * 150,
        output="GENERAL",
        feedback=Feedback(correct=False, ground_truth="FIN-7Q"),
    )
    assert len(trace.input) > 4000
    report = Combee(prompt_id="parrot", model=parrot_learner()).learn([trace])
    assert report.steps[0].unparsed == {} and report.steps[0].failed_calls == {}
    assert any("FIN-7Q" in b.content for b in report.playbook.bullets)


# ---------------------------------------------------------------- rules and their evidence


def _situation_learner(situation: Callable[[str], str]) -> FunctionChatModel:
    """Small-profile replies whose situation is ``situation(input)``, action the truth."""

    def reply(messages: list[BaseMessage]) -> str:
        system, body = str(messages[0].content), str(messages[-1].content)
        if "You study one run" in system:
            text = re.search(r'label="input">\n(.*?)\n</untrusted_data>', body, re.S)
            truth = re.search(r'label="ground_truth">\n(.*?)\n</untrusted_data>', body, re.S)
            assert text is not None and truth is not None
            return json.dumps({"situation": situation(text.group(1)), "action": truth.group(1)})
        if "You are the curator" in system:
            return json.dumps({"add": sorted(set(re.findall(r"\[(R\d+)\]", body)))})
        return json.dumps({"drop": []})

    return FunctionChatModel(reply)


def _tickets(truths: list[str]) -> list[Trace]:
    return [
        Trace(id=f"t{i}", input=f"ticket {i}", output="GENERAL",
              feedback=Feedback(correct=False, ground_truth=truth))
        for i, truth in enumerate(truths)
    ]  # fmt: skip


def test_rules_that_all_name_the_whole_task_are_not_learned() -> None:
    # The failure seen on the 1.5B: every rule's topic was the task's name.
    model = _situation_learner(lambda _: "customer support tickets")
    combee = Combee(
        prompt_id="task-name", model=model, batch_size=6, algorithm=AlgorithmSettings(roles="small")
    )
    report = combee.learn(_tickets(["A-1", "B-2", "C-3", "D-4", "E-5", "F-6"]))
    assert report.playbook.bullets == []
    # Words no input holds reach the vote, and a six-way tie learns nothing either.
    model = _situation_learner(lambda _: "customer support")
    combee = Combee(
        prompt_id="task-name-2",
        model=model,
        batch_size=6,
        algorithm=AlgorithmSettings(roles="small"),
    )
    report = combee.learn(_tickets(["A-1", "B-2", "C-3", "D-4", "E-5", "F-6"]))
    assert report.playbook.bullets == []
    assert sum("ambiguous situation" in c for c in report.steps[0].conflicts) == 6


def test_within_a_step_the_action_most_runs_back_wins() -> None:
    model = _situation_learner(lambda _: "late parcels")
    combee = Combee(
        prompt_id="vote", model=model, batch_size=3, algorithm=AlgorithmSettings(roles="small")
    )
    # One curator adopts the LOG-8W rule twice (two runs back it) and RET-3H once.
    report = combee.learn(_tickets(["LOG-8W", "LOG-8W", "RET-3H"]))
    assert [b.content for b in report.playbook.bullets] == ["When late parcels, LOG-8W."]
    assert any("outvoted" in c for c in report.steps[0].conflicts)


def _playbook(*rules_: str, version: int = 1, helpful: int = 0) -> Playbook:
    ops = [Add(section="others", content=r) for r in rules_]
    pb = Playbook().apply(ops, version=version).playbook
    return pb.replace_bullets([b.model_copy(update={"helpful": helpful}) for b in pb.bullets])


def _seed(combee: Combee, playbook: Playbook) -> None:
    """Put ``playbook`` in force as version 1."""
    registry = combee.registry()
    stored = registry.add_candidate(PromptVersion(prompt_id=combee.prompt_id, playbook=playbook))
    registry.accept(stored.version, Decision(accepted=True, policy="test", reason="seed"))
    assert stored.version == 1


def test_a_new_rule_for_a_known_situation_corrects_the_old_action() -> None:
    combee = Combee(
        prompt_id="fix",
        model=_situation_learner(lambda _: "lost parcels"),
        algorithm=AlgorithmSettings(roles="small"),
    )
    _seed(combee, _playbook("When lost parcels, RET-3H."))
    report = combee.learn(_tickets(["LOG-8W"]))
    assert [b.content for b in report.playbook.bullets] == ["When lost parcels, LOG-8W."]
    assert report.steps[0].ops.get("update") == 1
    assert any("corrected by new evidence" in c for c in report.steps[0].conflicts)


def test_a_rule_proved_in_service_is_not_overwritten_by_one_contradiction() -> None:
    old = _playbook("When lost parcels, RET-3H.", helpful=3)
    ops, found = rules.reconcile(old, [Add(section="others", content="When lost parcel, LOG-8W.")])
    assert ops == [] and found[0].reason == "contradicts a proven rule"


def test_served_outcomes_move_counters_and_a_rule_that_keeps_failing_is_removed() -> None:
    pb = _playbook("When lost parcels, RET-3H.", "When refund requests, FIN-7Q.")
    served = [
        Trace(id="w1", input="My parcel is lost.", output="RET-3H", prompt_version=1,
              feedback=Feedback(correct=False, ground_truth="LOG-8W")),
        Trace(id="w2", input="Two parcels lost", output="RET-3H", prompt_version=1,
              feedback=Feedback(correct=False, ground_truth="LOG-8W")),
        Trace(id="r1", input="z", output="FIN-7Q", prompt_version=1,
              feedback=Feedback(correct=True)),
        Trace(id="v0", input="z", output="FIN-7Q", prompt_version=0,
              feedback=Feedback(correct=True)),  # served before either rule existed
    ]  # fmt: skip
    tags = {t.id: (t.helpful, t.harmful) for t in rules.served_tags(pb, served)}  # type: ignore[union-attr]
    assert tags == {"oth-00001": (0, 2), "oth-00002": (1, 0)}

    combee = Combee(
        prompt_id="served",
        model=fake_learner(),
        batch_size=4,
        algorithm=AlgorithmSettings(roles="small"),
    )
    _seed(combee, pb)
    report = combee.learn(
        [t.model_copy(update={"feedback": Feedback(correct=t.feedback.correct)}) for t in served]
    )  # type: ignore[union-attr]
    step = report.steps[0]
    assert (step.served_helpful, step.served_harmful) == (1, 2)
    assert step.discredited == 1
    assert [b.content for b in report.playbook.bullets] == ["When refund requests, FIN-7Q."]
    assert report.playbook.bullets[0].helpful == 1


def _wrong(i: int, text: str, truth: str, output: str = "LOG-5T") -> Trace:
    return Trace(id=f"m{i}", input=text, output=output, prompt_version=1,
                 feedback=Feedback(correct=False, ground_truth=truth))  # fmt: skip


def test_a_rule_the_model_misapplied_to_inputs_it_does_not_speak_of_is_not_discredited() -> None:
    # The demo's run: the parcel rule was answered for a delivery address, a slow
    # website and a refund; none of them names a word of its situation.
    pb = _playbook("When parcel tracking or parcel or five days late, answer LOG-5T.")
    runs = [
        _wrong(0, "I need to change the delivery address for order A47923.", "LOG-1A"),
        _wrong(1, "The website times out when I search for a coffee grinder.", "WEB-2P"),
        _wrong(2, "My refund has still not arrived.", "FIN-7Q"),
    ]
    own = Trace(id="own", input="My parcel with the blender is five days late.",
                output="LOG-5T", prompt_version=1,
                feedback=Feedback(correct=True, ground_truth="LOG-5T"))  # fmt: skip
    # Grounded by an input of its own case, in the batch or remembered from before:
    # three misreadings count as one harmful verdict.
    for traces, seen in (([*runs, own], []), (runs, rules.seen_inputs([own]))):
        tags, misapplied = rules.served_evidence(pb, traces, seen)
        assert misapplied == 3
        assert [(t.helpful, t.harmful) for t in tags] == [(int(own in traces), 1)]  # type: ignore[union-attr]
    # An input that names the rule's words counts in full, as before.
    named = _wrong(9, "The parcel tracking page is empty.", "LOG-1A")
    tags, misapplied = rules.served_evidence(pb, [*runs, own, named])
    assert [(t.helpful, t.harmful) for t in tags] == [(1, 2)]  # type: ignore[union-attr]
    assert misapplied == 3

    combee = Combee(
        prompt_id="misapplied",
        model=fake_learner(),
        batch_size=4,
        algorithm=AlgorithmSettings(roles="small"),
    )
    _seed(combee, pb)
    step = combee.learn([*runs, own]).steps[0]
    assert (step.served_harmful, step.served_misapplied, step.discredited) == (1, 3, 0)
    assert "When parcel tracking" in combee.current().playbook.render()


def test_wrong_runs_that_agree_on_another_answer_count_in_full_whatever_their_wording() -> None:
    # A wrong rule: "delayed" is what "late" means, and every such run needed LOG-5T.
    pb = _playbook("When a shipment is delayed, answer RET-3H.")
    own = Trace(id="own", input="The shipment arrived broken, I want to return it.",
                output="RET-3H", prompt_version=1,
                feedback=Feedback(correct=True, ground_truth="RET-3H"))  # fmt: skip
    late = [
        _wrong(i, text, "LOG-5T", output="RET-3H")
        for i, text in enumerate(
            ["My parcel is late.", "Package still not here after 10 days.", "Where is my box?"]
        )
    ]
    tags, misapplied = rules.served_evidence(pb, [own, *late])
    assert misapplied == 0
    assert [(t.helpful, t.harmful) for t in tags] == [(1, 3)]  # type: ignore[union-attr]
    assert rules.discredited(pb.apply(tags).playbook)


def test_catch_all_rules_are_not_excused() -> None:
    own = Trace(id="own", input="No doubt my parcel is lost.", output="LOG-5T", prompt_version=1,
                feedback=Feedback(correct=True, ground_truth="LOG-5T"))  # fmt: skip
    refunds = [_wrong(i, f"Refund {i} has not arrived.", "FIN-7Q") for i in range(3)]
    for text in ("When parcel or otherwise, answer LOG-5T.", "When in doubt, answer LOG-5T."):
        tags, misapplied = rules.served_evidence(_playbook(text), [own, *refunds])
        assert misapplied == 0
        assert [(t.helpful, t.harmful) for t in tags] == [(1, 3)]  # type: ignore[union-attr]
    # Not grounded at all: every wrong run counts, however scattered its answers.
    scattered = [_wrong(0, "Change my address.", "LOG-1A"), _wrong(1, "My refund.", "FIN-7Q")]
    tags, misapplied = rules.served_evidence(_playbook("When in doubt, answer LOG-5T."), scattered)
    assert misapplied == 0
    assert [(t.helpful, t.harmful) for t in tags] == [(0, 2)]  # type: ignore[union-attr]


def test_grounding_reads_the_ground_truth_first_and_whole_values() -> None:
    pb = _playbook("When parcel, answer LOG-5T.")
    scattered = [_wrong(0, "Change my address.", "LOG-1A"), _wrong(1, "My refund.", "FIN-7Q")]
    # A reflection that backed LOG-5T for an input whose truth is FIN-7Q grounds nothing.
    other = rules.Seen("x", rules.input_words("parcel refund"), "FIN-7Q", ("answer LOG-5T",))
    assert rules.served_evidence(pb, scattered, [other])[1] == 0
    # Without a truth, the actions its reflection backed ground the rule.
    backed = dataclasses.replace(other, truth="")
    assert rules.served_evidence(pb, scattered, [backed])[1] == 2
    # "5" is not a value of "15".
    pb5 = _playbook("When refund, answer 5.")
    fives = [_wrong(i, t, truth, output="5") for i, (t, truth) in
             enumerate([("Change my address.", "7"), ("Where is my parcel?", "8")])]  # fmt: skip
    fifteen = rules.Seen("y", rules.input_words("refund please"), "15")
    assert rules.served_evidence(pb5, fives, [fifteen])[1] == 0


def test_the_token_budget_evicts_the_rule_with_the_worst_service_record_first() -> None:
    pb = _playbook("When lost parcels, RET-3H.", "When refund requests, FIN-7Q.")
    wrong = Trace(id="w", input="A refund request", output="FIN-7Q", prompt_version=1,
                  feedback=Feedback(correct=False))  # fmt: skip
    tagged = pb.apply(rules.served_tags(pb, [wrong])).playbook
    budget = tagged.token_count() - 5
    assert [b.content for b in tagged.enforce_budget(budget).playbook.bullets] == [
        "When lost parcels, RET-3H."
    ]


def test_contradicting_rules_never_stand_side_by_side() -> None:
    pb = _playbook(
        "When desk lamp, RET-3H.", "When desk lamp repair, LOG-8W.", "When refunds, FIN-7Q."
    )
    assert len(rules.conflicts(pb)) == 1
    ops, found = rules.resolve_conflicts(pb)
    left = pb.apply(ops).playbook
    assert rules.conflicts(left) == [] and len(left.bullets) == 2 and found


def test_a_full_curator_cannot_add_a_contradiction_unnoticed() -> None:
    def reply(messages: list[BaseMessage]) -> str:
        system = str(messages[0].content)
        if "You are the reflector" in system:
            return json.dumps({"key_insight": ""})
        return json.dumps(
            {"add": [], "operations": [
                {"type": "ADD", "section": "others", "content": "When desk lamp, RET-3H."},
                {"type": "ADD", "section": "others", "content": "When desk lamps, LOG-8W."},
                {"type": "ADD", "section": "others", "content": "When desk lamps, LOG-8W."},
            ]}
        )  # fmt: skip

    # A reflection is needed for the curator to be called: give it a key insight.
    def with_insight(messages: list[BaseMessage]) -> str:
        if "You are the reflector" in str(messages[0].content):
            return json.dumps({"key_insight": "When other things, X-1."})
        return reply(messages)

    combee = Combee(
        prompt_id="full",
        model=FunctionChatModel(with_insight),
        algorithm=AlgorithmSettings(roles="full"),
    )
    report = combee.learn(_tickets(["X-1"]))
    # Both rules rest on the same one run: a tie, so neither goes in, and it is said.
    assert [b.content for b in report.playbook.bullets] == []
    assert any("ambiguous situation" in c for c in report.steps[0].conflicts)


# ---------------------------------------------------------------- level 2: the aggregator


def _conflicting_small(drop: Callable[[str], list[str]], seen: list[str]) -> FunctionChatModel:
    truths = {"0": "LOG-8W", "1": "RET-3H", "2": "FIN-7Q", "3": "SEC-4X"}
    situations = {"0": "late parcels", "1": "late parcels", "2": "refunds", "3": "locked accounts"}

    def reply(messages: list[BaseMessage]) -> str:
        system, body = str(messages[0].content), str(messages[-1].content)
        seen.append(system)
        if "You study one run" in system:
            n = re.findall(r"ticket (\d)", body)[0]
            return json.dumps({"situation": situations[n], "action": truths[n]})
        if "You are the curator" in system:
            return json.dumps({"add": sorted(set(re.findall(r"\[(R\d+)\]", body)))})
        return json.dumps({"drop": drop(body)}) if drop(body) is not None else "no idea"

    return FunctionChatModel(reply)


def test_the_small_aggregator_settles_overlapping_proposals() -> None:
    seen: list[str] = []

    def drop(body: str) -> list[str]:
        return re.findall(r"\[(P\d+\.\d+)\] When late parcels, RET-3H", body)

    combee = Combee(
        prompt_id="agg",
        model=_conflicting_small(drop, seen),
        batch_size=4,
        algorithm=AlgorithmSettings(roles="small"),
    )
    report = combee.learn(_tickets(["LOG-8W", "RET-3H", "FIN-7Q", "SEC-4X"]))
    assert prompts.SMALL_AGGREGATOR_SYSTEM in seen
    assert report.steps[0].aggregation == "merged"
    assert sorted(b.content for b in report.playbook.bullets) == [
        "When late parcels, LOG-8W.", "When locked accounts, SEC-4X.", "When refunds, FIN-7Q.",
    ]  # fmt: skip


def test_the_small_aggregator_cannot_drop_a_whole_group() -> None:
    seen: list[str] = []
    combee = Combee(
        prompt_id="agg",
        model=_conflicting_small(lambda b: re.findall(r"P\d+\.\d+", b), seen),
        batch_size=4,
        algorithm=AlgorithmSettings(roles="small"),
    )
    report = combee.learn(_tickets(["LOG-8W", "RET-3H", "FIN-7Q", "SEC-4X"]))
    # Every label of the group was asked to go: none did; the tie is then settled by
    # the evidence (one run each: an ambiguous situation, both dropped) and recorded.
    assert report.steps[0].aggregation == "merged"
    assert sorted(b.content for b in report.playbook.bullets) == [
        "When locked accounts, SEC-4X.", "When refunds, FIN-7Q.",
    ]  # fmt: skip
    assert any("ambiguous situation" in c for c in report.steps[0].conflicts)


def _small_aggregate(proposals: list[list[str]], drop: list[str]) -> list[str]:
    """The contents the small aggregator keeps of ``proposals`` when it replies ``drop``."""
    caller = LLMCaller(
        FunctionChatModel(lambda _: json.dumps({"drop": drop})),
        CallSettings(max_attempts=1, backoff_initial=0),
    )
    ops = [[Add(section="others", content=c, sources=["t"]) for c in p] for p in proposals]
    result = asyncio.run(
        SmallRoles().aggregate(caller, Playbook(), ops, [], CallStats(), token_budget=None)
    )
    return [op.content for op in result.ops if isinstance(op, Add)]


def test_the_small_aggregator_keeps_a_rule_for_every_situation_of_a_chain() -> None:
    # P1.1 (refund or late parcel) overlaps P1.2 and P2.1; those two do not overlap.
    # Dropping P1.1 and P2.1 would keep a refund rule and none for late parcels.
    proposals = [
        ["When refund or parcel late, answer FIN-7Q.", "When refund, answer PAY-2D."],
        ["When parcel late, answer LOG-8W."],
    ]
    kept = _small_aggregate(proposals, ["P1.1", "P2.1"])
    assert kept == ["When refund, answer PAY-2D.", "When parcel late, answer LOG-8W."]


def test_a_rule_the_small_aggregator_drops_goes_with_its_repeats() -> None:
    # The repeat without the full stop is folded into P1.1 and not shown: it goes too.
    proposals = [
        ["When refund, answer FIN-7Q."],
        ["When refund, answer FIN-7Q", "When refund, answer PAY-2D."],
    ]
    assert _small_aggregate(proposals, ["P1.1"]) == ["When refund, answer PAY-2D."]


@pytest.mark.parametrize("roles", ["small", "full"])
def test_an_unusable_aggregator_reply_falls_back_to_the_union_and_says_so(roles: str) -> None:
    seen: list[str] = []
    small = _conflicting_small(lambda _: None, seen)  # type: ignore[arg-type, return-value]

    def reply(messages: list[BaseMessage]) -> str:
        system = str(messages[0].content)
        if "You are the aggregator" in system:
            return "no idea"
        if roles == "full" and "You are the reflector" in system:
            n = re.findall(r"ticket (\d)", str(messages[-1].content))[0]
            return json.dumps({"key_insight": f"When case {n}, CODE-{n}."})
        if roles == "full" and "You are the curator" in system:
            labels = sorted(set(re.findall(r"\[(R\d+)\]", str(messages[-1].content))))
            return json.dumps({"add": labels})
        return str(small.invoke(messages).content)

    combee = Combee(
        prompt_id="u",
        model=FunctionChatModel(reply),
        batch_size=4,
        algorithm=AlgorithmSettings(roles=roles),
    )
    report = combee.learn(_tickets(["LOG-8W", "RET-3H", "FIN-7Q", "SEC-4X"]))
    assert report.steps[0].aggregation == "union"
    assert report.steps[0].unparsed.get("aggregate") == 1


def test_the_full_aggregator_merges_and_is_told_of_conflicts() -> None:
    proposals = [
        [Add(section="others", content="When late parcels, LOG-8W.", sources=["a"])],
        [Add(section="others", content="When late parcel, RET-3H.", sources=["b"])],
    ]
    from langgraph_combee._algorithm import aggregate
    from langgraph_combee._algorithm.roles import _overlaps

    groups = _overlaps(aggregate.label_proposals(proposals))
    assert groups == [["P1.1", "P2.1"]]
    body = str(
        prompts.aggregator_messages(
            Playbook(), [[(op, [])] for p in proposals for op in p], token_budget=None,
            conflicts=groups,
        )[1].content
    )  # fmt: skip
    assert "Conflicts (different actions for one situation):\n- P1.1, P2.1" in body
    assert FullRoles.aggregate_tokens > SmallRoles.aggregate_tokens


def test_one_correction_per_step_and_its_repeats_pass_quietly() -> None:
    old = _playbook("When journalism, answer.")
    new = [
        Add(section="others", content="When journalism, answer PR-7M.", sources=[s]) for s in "ab"
    ]
    ops, found = rules.reconcile(old, new)
    assert [op.type for op in ops] == ["UPDATE"]
    assert [c.reason for c in found] == ["corrected by new evidence"]


def test_the_small_reflector_skips_runs_with_no_feedback_and_no_error() -> None:
    bare = Trace(id="bare", input="hello", output="1")
    failed = Trace(id="failed", input="hello", output="", error="tool crashed")
    labelled = Trace(id="ok", input="hi", output="x", feedback=Feedback(ground_truth="A-1"))
    small = SmallRoles()
    assert not small.needs_reflection(bare)
    assert small.needs_reflection(failed) and small.needs_reflection(labelled)
    assert FullRoles().needs_reflection(bare)  # ACE's reflector judges from the transcript


# ---------------------------------------------------------------- one rule per action


def _add(content: str, *sources: str) -> Add:
    return Add(section="others", content=content, sources=list(sources))


def test_new_rules_with_one_action_fold_into_one_rule_listing_every_situation() -> None:
    ops = rules.fold_actions(
        [
            _add("When refund not arrived, answer FIN-7Q.", "a"),
            _add("When late parcels, answer LOG-5T.", "b"),
            _add("When money back request, answer FIN-7Q.", "c"),
            _add("When refunds not arrived, answer FIN-7Q.", "d"),  # covered: no new wording
        ]
    )
    assert [(op.content, op.sources) for op in ops if isinstance(op, Add)] == [
        ("When refund not arrived or money back request, answer FIN-7Q.", ["a", "c", "d"]),
        ("When late parcels, answer LOG-5T.", ["b"]),
    ]


def test_one_action_quoted_in_one_rule_and_bare_in_another_folds_into_one() -> None:
    # Seen on a task written on the spot: the 1.5B quoted the desk's name in one
    # reply and not in the next; they are one action, not two rules.
    ops = rules.fold_actions(
        [
            _add("When overdue fines, answer 'coral'.", "a"),
            _add("When late return charges, answer coral.", "b"),
        ]
    )
    adds = [op for op in ops if isinstance(op, Add)]
    assert len(adds) == 1
    assert adds[0].sources == ["a", "b"]
    assert adds[0].content.startswith("When overdue fines or late return charges, answer")
    assert rules.same_action("answer 'coral'", "answer coral")
    assert not rules.same_action("answer 'coral'", "answer 'amber'")


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        # Review: the values alone made these one action, so a rule and its negation
        # were folded into one rule and never shown to a curator as a conflict.
        ("answer FIN-7Q", "do not answer FIN-7Q", False),
        ("answer FIN-7Q, not PAY-2D", "answer PAY-2D, not FIN-7Q", False),
        ("never route to SEC-4X", "route to SEC-4X", False),
        # A negation with no value of its own changes nothing the action asks for.
        ("answer FIN-7Q. Do not add anything else.", "answer FIN-7Q", True),
        # A negation word inside a quoted value is the value's.
        ("answer 'Not sure'", "answer 'Not sure', nothing else", True),
        ("answer 'Not sure'", "answer 'sure'", False),
        # Review: a negation's clause ends where another clause opens; before, "do not
        # escalate and answer FIN-7Q" refused FIN-7Q, and settle_batch dropped it and
        # "answer FIN-7Q" for one situation as an ambiguous pair.
        ("do not escalate and answer FIN-7Q", "answer FIN-7Q", True),
        ("do not escalate - answer FIN-7Q", "answer FIN-7Q", True),
        ("do not escalate (answer FIN-7Q)", "answer FIN-7Q", True),
        ("never answer anything but FIN-7Q", "answer FIN-7Q", True),
        ("do not answer anything other than FIN-7Q", "answer FIN-7Q", True),
        ("answer not only FIN-7Q but also PAY-2D", "answer FIN-7Q and PAY-2D", True),
        ("do not answer FIN-7Q and PAY-2D", "answer FIN-7Q", False),
        # A negation in capitals is a negation, not a value.
        ("Do NOT answer FIN-7Q", "do not answer FIN-7Q", True),
        ("answer FIN-7Q. Do NOT add anything else.", "answer FIN-7Q", True),
        ("NEVER answer FIN-7Q", "answer FIN-7Q", False),
        # Contractions negate, and their apostrophe opens no quoted value.
        ("doesn't answer FIN-7Q", "answer FIN-7Q", False),
        ("shouldn't answer FIN-7Q", "does not answer FIN-7Q", True),
        ("don't answer 'PAY-2D', answer 'FIN-7Q'", "answer FIN-7Q, not PAY-2D", True),
        ("answer FIN-7Q instead of PAY-2D", "answer PAY-2D instead of FIN-7Q", False),
    ],
)
def test_a_value_under_a_negation_is_not_asked_for(a: str, b: str, same: bool) -> None:
    assert rules.same_action(a, b) is same
    ops = rules.fold_actions([_add(f"When refund, {a}.", "a"), _add(f"When refund, {b}.", "b")])
    assert len([op for op in ops if isinstance(op, Add)]) == (1 if same else 2)


def test_a_negation_with_a_clause_of_its_own_leaves_one_action_for_one_situation() -> None:
    # Review: "do not escalate and answer FIN-7Q" read as refusing FIN-7Q, so the batch
    # held two actions for "refund" and settle_batch dropped both rules.
    ops, found = rules.settle_batch(
        [
            _add("When refund, do not escalate and answer FIN-7Q.", "a"),
            _add("When refund, answer FIN-7Q.", "b"),
        ]
    )
    assert [op.content for op in ops if isinstance(op, Add)] == [
        "When refund, do not escalate and answer FIN-7Q.",
        "When refund, answer FIN-7Q.",
    ]
    assert found == []


def test_a_new_situation_for_a_known_action_widens_the_rule_that_has_it() -> None:
    old = _playbook("When lost parcels, answer LOG-5T.", "When refunds, answer FIN-7Q.")
    ops, found = rules.reconcile(old, [_add("When tracking not moving, answer LOG-5T.", "t")])
    assert [(op.type, op.content) for op in ops] == [  # type: ignore[union-attr]
        ("UPDATE", "When lost parcels or tracking not moving, answer LOG-5T.")
    ]
    assert found == []
    # A situation the rule already covers changes nothing.
    assert rules.reconcile(old, [_add("When lost parcel, answer LOG-5T.")]) == ([], [])


def test_a_correction_narrows_a_folded_rule_to_the_situations_evidence_left_it() -> None:
    old = _playbook("When refunds or lost parcels, answer FIN-7Q.")
    ops, found = rules.reconcile(old, [_add("When lost parcels, answer LOG-5T.", "t")])
    assert [(op.type, op.content) for op in ops] == [  # type: ignore[union-attr]
        ("ADD", "When lost parcels, answer LOG-5T."),
        ("UPDATE", "When refunds, answer FIN-7Q."),
    ]
    assert [c.reason for c in found] == ["corrected by new evidence"]
    assert rules.conflicts(old.apply(ops, version=2).playbook) == []


def test_a_proven_rule_keeps_its_situation_and_the_new_rule_keeps_the_rest() -> None:
    old = _playbook("When lost parcels, answer LOG-5T.", helpful=3)
    ops, found = rules.reconcile(
        old, [_add("When lost parcels or broken items, answer RET-3H.", "t")]
    )
    assert [(op.type, op.content) for op in ops] == [  # type: ignore[union-attr]
        ("ADD", "When broken items, answer RET-3H.")
    ]
    assert [c.reason for c in found] == ["contradicts a proven rule"]


def test_a_folded_situation_keeps_at_most_its_latest_alternatives() -> None:
    many = ["refunds", "parcels", "invoices", "passwords", "vouchers", "crashes", "jobs", "press"]
    joined = rules.join_situations(*many)
    assert rules.alternatives(joined) == many[-rules.MAX_ALTERNATIVES :]
    assert rules.join_situations("late parcels or refunds", "refund") == "late parcels or refunds"


def test_contradictions_are_found_between_alternatives_of_folded_rules() -> None:
    pb = _playbook(
        "When password resets or late parcels, answer SEC-4X.",
        "When parcels late, answer LOG-5T.",
        "When refunds, answer FIN-7Q.",
    )
    assert [(a.id, b.id) for a, b in rules.conflicts(pb)] == [("oth-00001", "oth-00002")]


def test_a_situation_of_generic_words_only_gives_no_rule() -> None:
    from langgraph_combee._algorithm.schemas import SmallReflectionOut

    # Seen on the 1.5B: "When question, answer SUB-7U." pulled every ticket to one code.
    vague = SmallReflectionOut(situation="the user's question", action="answer SUB-7U")
    assert vague.to_reflection("t", ground_truth="SUB-7U").is_empty()
    kept = SmallReflectionOut(situation="premium plan question", action="answer SUB-7U")
    assert kept.to_reflection("t").key_insight == "When premium plan question, answer SUB-7U."


def test_keywords_copied_from_the_input_join_the_situation_and_others_are_left_out() -> None:
    from langgraph_combee._algorithm.schemas import SmallReflectionOut

    # The 1.5B's keywords for real tickets: sign-offs, names, references and words
    # the input does not hold came with the useful ones.
    out = SmallReflectionOut(
        situation="two-factor authentication",
        keywords=["two-factor", "rejected", "Priya", "Ref A98941", "error", "regards"],
        action="answer SEC-9D",
    )
    source = "Hi. The two-factor code is always rejected. Ref A98941. Regards, Priya"
    reflection = out.to_reflection("t", ground_truth="SEC-9D", source=source)
    # A situation of its own: the keywords join it as no alternatives.
    assert reflection.key_insight == "When two-factor authentication, answer SEC-9D."
    # A situation of generic words only: the input's keywords are the situation, the
    # names, references and sign-offs among them left out.
    named = out.model_copy(update={"situation": "the user's request"})
    assert named.to_reflection("t", ground_truth="SEC-9D", source=source).key_insight == (
        "When two-factor, answer SEC-9D."
    )


def test_grounded_keywords_keep_acronyms_and_terms_but_not_names_or_values() -> None:
    text = "Dear team: Our GDPR request about order Z18288 and the 2FA reset. Thanks, Aisha Khan."
    assert rules.grounded_keywords(
        ["GDPR", "order Z18288", "2FA reset", "Aisha", "Khan", "khan", "Dear", "gdpr"], text
    ) == ["GDPR", "2FA reset"]
    # A word first in a sentence is not taken for a name; at most ``limit`` are kept.
    assert rules.grounded_keywords(["Refund"], "Refund please. My refund is late.") == ["Refund"]
    assert rules.grounded_keywords(
        ["refund", "late", "my refund"], "My refund is late.", limit=2
    ) == [
        "refund",
        "late",
    ]


def _ticket(tid: str, text: str, truth: str | None) -> Trace:
    feedback = Feedback(correct=False, ground_truth=truth) if truth else Feedback(correct=False)
    return Trace(id=tid, input=text, output="GENERAL", feedback=feedback)


def test_a_situation_many_runs_named_outlasts_single_keywords_when_a_fold_is_full() -> None:
    # Six refund tickets, each "refund request" plus two keywords of
    # its own, folded into six keywords and lost the situation every run had named.
    words = ["repayment", "cancelled", "awaiting", "returned", "compensation", "double"]
    ops = [
        _add(
            f"When refund request or {words[i]} or {words[(i + 1) % 6]} item, answer FIN-7Q.",
            f"t{i}",
        )
        for i in range(6)
    ]
    (folded,) = rules.fold_actions(ops)
    assert isinstance(folded, Add)
    situation = rules.parse_rule(folded.content).situation  # type: ignore[union-attr]
    parts = rules.alternatives(situation)
    assert parts[0] == "refund request" and len(parts) == rules.MAX_ALTERNATIVES
    assert folded.sources == [f"t{i}" for i in range(6)]


def test_an_acronym_spelled_like_a_stop_word_is_a_content_word() -> None:
    # Found in review: "shipping to the US" lost "US" ("us" is a stop word).
    assert rules.situation_words("shipping to the US") == {"shipp", "us"}
    assert rules.situation_words("IT support") == {"it", "support"}
    assert rules.situation_words("ship it to us") == {"ship"}
    # Text written all in capitals says nothing by its capitals.
    assert rules.situation_words("WHERE IS MY PARCEL") == {"parcel"}


def test_a_value_the_runs_input_holds_is_made_general_in_the_rules_action() -> None:
    from langgraph_combee._algorithm.schemas import SmallReflectionOut

    # Seen on the 1.5B on the tool task: each rule carried its run's order id, so no
    # two late-parcel rules had one action and none fitted another order.
    late = SmallReflectionOut(situation="late parcel", action="whatever")
    one = late.to_reflection(
        "a",
        ground_truth="send_voucher(order_id='NW-45858', code='SORRY10')",
        source="I am still waiting for the tent from order NW-45858.",
    )
    two = late.to_reflection(
        "b",
        ground_truth="send_voucher(order_id='NW-12345', code='SORRY10')",
        source="Order NW-12345 is late, nothing moves.",
    )
    assert (
        one.key_insight
        == two.key_insight
        == (
            "When late parcel, make the calls send_voucher(order_id='the value in the input', "
            "code='SORRY10')."
        )
    )
    folded = rules.fold_actions([_add(one.key_insight, "a"), _add(two.key_insight, "b")])
    assert len(folded) == 1
    # The house value stays a value the served-outcome evidence can check; the
    # placeholder is none.
    action = rules.parse_rule(one.key_insight).action  # type: ignore[union-attr]
    assert values(action) == {"SORRY10"}
    assert rules.followed(action, "send_voucher(order_id='NW-1', code='SORRY10')") is True
    # A value the input does not hold is the rule's own; a plain answer is unchanged.
    code = SmallReflectionOut(situation="refund", action="answer FIN-7Q")
    assert code.to_reflection(
        "c", ground_truth="FIN-7Q", source="refund order Z12"
    ).key_insight == ("When refund, answer FIN-7Q.")


def test_only_a_whole_value_of_the_input_is_made_general() -> None:
    from langgraph_combee._algorithm.schemas import SmallReflectionOut

    out = SmallReflectionOut(situation="ticket three", action="answer T-3")
    # "T-3" is not the "3" of "ticket 3"; "18440" is "EUR 184.40" written in cents
    # (tests/rules/test_converted_values.py), so it is the input's, described.
    assert out.to_reflection("t", ground_truth="T-3", source="ticket 3 says hello").key_insight == (
        "When ticket three, answer T-3."
    )
    refund = SmallReflectionOut(situation="money back", action="x")
    insight = refund.to_reflection(
        "r",
        ground_truth="issue_refund(order_id='NW-9', amount='18440')",
        source="Money back for order NW-9 please, it was EUR 184.40.",
    ).key_insight
    assert insight == (
        "When money back, make the calls issue_refund(order_id='the value in the input', "
        "amount='the value in the input, in cents, digits only')."
    )


def test_a_tool_rule_made_general_is_learned_not_quarantined() -> None:
    # The first placeholder ("<as in the input>") read as a markup tag to the guard,
    # which quarantined every tool-task rule: the 1.5B learned nothing on the tool task.
    late = "I am waiting for the tent from order NW-64350, no tracking."
    courier = "Order NW-84465: the courier left my tent in the rain."
    cases = [
        (late, "send_voucher(order_id='NW-64350', code='SORRY10')", "late parcel"),
        (
            courier,
            "lookup_order(order_id='NW-84465'); open_case(order_id='NW-84465', queue='LOG-8W')",
            "courier complaint",
        ),
    ]

    def reply(messages: list[BaseMessage]) -> str:
        system, body = str(messages[0].content), str(messages[-1].content)
        if "You study one run" in system:
            _, truth, situation = next(c for c in cases if c[0] in body)
            return json.dumps({"situation": situation, "action": f"answer {truth}"})
        if "You are the curator" in system:
            return json.dumps({"add": sorted(set(re.findall(r"\[(R\d+)\]", body)))})
        return json.dumps({"drop": []})

    combee = Combee(
        prompt_id="tools",
        model=FunctionChatModel(reply),
        batch_size=2,
        algorithm=AlgorithmSettings(roles="small"),
    )
    report = combee.learn(
        [_ticket(f"t{i}", text, truth) for i, (text, truth, _) in enumerate(cases)]
    )
    assert report.steps[0].quarantined == []
    assert sorted(b.content for b in report.playbook.bullets) == [
        "When courier complaint, make the calls lookup_order(order_id='the value in the input'); "
        "open_case(order_id='the value in the input', queue='LOG-8W').",
        "When late parcel, make the calls send_voucher(order_id='the value in the input', "
        "code='SORRY10').",
    ]


def test_a_proposal_the_small_aggregator_drops_keeps_the_words_no_rival_shares() -> None:
    proposals = [
        ["When refund or money back, answer FIN-7Q."],
        ["When refund, answer PAY-2D.", "When parcel late, answer LOG-8W."],
    ]
    assert _small_aggregate(proposals, ["P1.1"]) == [
        "When money back, answer FIN-7Q.",
        "When refund, answer PAY-2D.",
        "When parcel late, answer LOG-8W.",
    ]
