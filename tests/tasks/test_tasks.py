"""Task environments: seeded examples, train/test separation, scoring, agents and doubles."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from langgraph_combee import Combee, Feedback, LearnerSettings, Trace
from langgraph_combee._core.types import ToolCall
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.tasks import (
    TASKS,
    Example,
    HouseFormats,
    Task,
    TicketRouting,
    ToolCalls,
    clean_answer,
    evaluate,
    get_task,
    ticket_input,
)
from langgraph_combee.tasks._tools import Call, parse_calls, render_calls
from langgraph_combee.testing import ScriptedChatModel

NAMES = sorted(TASKS)


@pytest.fixture(params=NAMES)
def task(request: pytest.FixtureRequest) -> Task:
    return get_task(request.param)


# ---- registry and generation ---------------------------------------------


def test_registry_knows_every_task() -> None:
    assert isinstance(get_task("tickets"), TicketRouting)
    assert isinstance(get_task("formats"), HouseFormats)
    assert isinstance(get_task("tools"), ToolCalls)
    with pytest.raises(ConfigurationError, match="'nope'"):
        get_task("nope")


def test_ticket_routing_has_twenty_plus_rules_with_unguessable_codes() -> None:
    task = get_task("tickets")
    codes = [rule.marker for rule in task.rule_set]
    assert len(codes) >= 20
    assert len(set(codes)) == len(codes)
    assert all(code in task.rules for code in codes)
    assert task.rules.count("\n- ") == len(codes)


def test_examples_are_deterministic_by_seed(task: Task) -> None:
    first = task.examples(30, 7, "train")
    assert first == task.examples(30, 7, "train")
    assert first != task.examples(30, 8, "train")
    assert [e.input for e in task.examples(10, 7, "train")] == [e.input for e in first[:10]]


def test_examples_cover_the_rules_evenly(task: Task) -> None:
    n = 2 * len(task.rule_set)
    counts: dict[str, int] = {}
    for example in task.examples(n, 0, "train"):
        counts[example.meta["rule"]] = counts.get(example.meta["rule"], 0) + 1
    assert counts == {rule.id: 2 for rule in task.rule_set}


def test_train_and_test_never_share_an_input_or_a_template(task: Task) -> None:
    train = [e for seed in range(3) for e in task.examples(60, seed, "train")]
    test = [e for seed in range(3) for e in task.examples(60, seed, "test")]
    assert not {e.input for e in train} & {e.input for e in test}
    assert {e.meta["split"] for e in train} == {"train"}
    assert {e.meta["split"] for e in test} == {"test"}
    assert not {e.meta["template"] for e in train} & {e.meta["template"] for e in test}


def test_every_answer_follows_its_rule(task: Task) -> None:
    for example in task.examples(40, 0, "test"):
        assert task.score(example.answer, example)


@pytest.mark.parametrize(
    ("n", "seed", "split"),
    [(-1, 0, "train"), (True, 0, "train"), (2, "0", "train"), (2, 0, "dev")],
)
def test_bad_example_arguments_are_rejected(n: object, seed: object, split: object) -> None:
    with pytest.raises(ConfigurationError):
        get_task("tickets").examples(n, seed, split)  # type: ignore[arg-type]


def test_ticket_inputs_name_only_their_own_topic() -> None:
    task = get_task("tickets")
    for split in ("train", "test"):
        for example in task.examples(200, 11, split):
            matched = [rule.id for rule in task.rule_set if rule.matches(example.input)]
            assert matched == [example.meta["rule"]], example.input
    for rule in task.rule_set:
        assert [r.id for r in task.rule_set if r.stated_in(rule.text)] == [rule.id]


def test_format_rules_are_each_stated_by_one_line_only() -> None:
    task = get_task("formats")
    for rule in task.rule_set:
        assert [r.id for r in task.rule_set if r.stated_in(rule.text)] == [rule.id]


# ---- scoring ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "right"),
    [
        ("FIN-7Q", True),
        ("fin-7q", True),
        ("  `FIN-7Q`.", True),
        ("**FIN-7Q**", True),
        ("```\nFIN-7Q\n```", True),
        ("Team: FIN-7Q", True),
        ("FIN–7Q", True),
        ("FIN-7", False),
        ("ACC-2M", False),
        ("GENERAL", False),
        ("", False),
    ],
)
def test_ticket_scoring_takes_the_first_code(reply: str, right: bool) -> None:
    example = Example(input="refund please", answer="FIN-7Q")
    assert get_task("tickets").score(reply, example) is right


@pytest.mark.parametrize(
    ("reply", "expected", "right"),
    [
        ("2500", "2500", True),
        ("2500 g", "2500", True),
        ("'2500'.", "2500", True),
        ("2.5 kg", "2500", False),
        ("2,500", "2500", False),
        ("25000", "2500", False),
        ("2024/03/05", "2024/03/05", True),
        ("2024-03-05", "2024/03/05", False),
        ("DUBOIS, Marie", "DUBOIS, Marie", True),
        ("Dubois, Marie", "DUBOIS, Marie", True),
        ("Marie Dubois", "DUBOIS, Marie", False),
        ("Y", "Y", True),
        ("Yes", "Y", False),
        ("eur 12.50", "EUR 12.50", True),
        ("€12.50", "EUR 12.50", False),
        ("+49301234567", "+49301234567", True),
        ("+49 30 1234 567", "+49301234567", False),
        ("9:00", "09:00", False),
    ],
)
def test_format_scoring_needs_the_house_format(reply: str, expected: str, right: bool) -> None:
    assert get_task("formats").score(reply, Example(input="q", answer=expected)) is right


def test_clean_answer_keeps_the_first_line_without_markup() -> None:
    assert clean_answer('\n\n  "**fin-7q**."\nbecause...') == "FIN-7Q"
    assert clean_answer("```text\n  2024/03/05 \n```") == "2024/03/05"
    assert clean_answer("") == ""


# ---- agents and doubles ----------------------------------------------------


def _scripted(task: Task, examples: list[Example]) -> list[str | AIMessage]:
    """Replies that give each example's answer: its text, or its tool calls then "Done."."""
    if not isinstance(task, ToolCalls):
        return [e.answer for e in examples]
    replies: list[str | AIMessage] = []
    for example in examples:
        for index, call in enumerate(parse_calls(example.answer)):
            replies.append(
                AIMessage(
                    content="",
                    tool_calls=[{"name": call.name, "args": dict(call.args), "id": f"c{index}"}],
                )
            )
        replies.append("Done.")
    return replies


def test_agents_build_and_answer_with_a_scripted_model(task: Task) -> None:
    examples = task.examples(3, 0, "test")
    model = ScriptedChatModel(replies=_scripted(task, examples))
    agent = task.build_agent(model)
    result = evaluate(task, agent, examples, max_concurrency=1)
    assert result.accuracy == 1.0
    assert result.errors == 0
    assert model.prompts[0][0].text == task.system_prompt


def test_rules_in_the_prompt_are_the_ceiling(task: Task) -> None:
    test = task.examples(2 * len(task.rule_set), 0, "test")
    model = task.double_model()
    baseline = evaluate(task, task.build_agent(model), test)
    ceiling = evaluate(task, task.build_agent(model, with_rules=True), test)
    assert baseline.accuracy == 0.0
    assert ceiling.accuracy == 1.0
    assert set(ceiling.by_rule(test).values()) == {1.0}
    assert task.rules in task.prompt(with_rules=True)


def test_a_failing_run_is_scored_wrong_not_raised() -> None:
    task = get_task("tickets")
    examples = task.examples(2, 0, "test")
    model = ScriptedChatModel(replies=[RuntimeError("model down"), examples[1].answer])
    result = evaluate(task, task.build_agent(model), examples, max_concurrency=1)
    assert result.errors == 1
    assert result.correct == (False, True)
    assert result.answers[0] == ""


def test_insight_is_empty_for_a_right_answer_and_a_rule_for_a_wrong_one(task: Task) -> None:
    example = task.examples(1, 0, "train")[0]
    assert task.insight(example.input, example.answer, example.answer) == ""
    rule = task.insight(example.input, example.answer, "WRONG")
    assert task.stated_rules(rule) == [task.rule(example.meta["rule"])]


def test_learning_from_train_failures_lifts_held_out_accuracy(task: Task) -> None:
    train = task.examples(2 * len(task.rule_set), 0, "train")
    test = task.examples(len(task.rule_set), 0, "test")
    model = task.double_model()
    v0 = task.build_agent(model)
    traces = [
        Trace(
            input=e.input,
            output=answer,
            feedback=Feedback(correct=False, ground_truth=e.answer),
        )
        for e, answer in zip(train, evaluate(task, v0, train).answers, strict=True)
    ]
    combee = Combee(prompt_id=task.name, model=task.double_learner(), batch_size=16)
    combee.learn(traces)
    learned = task.build_agent(model, middleware=[combee.middleware(capture=False)])
    before = evaluate(task, v0, test).accuracy
    after = evaluate(task, learned, test).accuracy
    assert before == 0.0
    assert after >= 0.6
    assert combee.queue().stats()["pending"] == 0  # capture=False fed nothing back


# ---- the tool task ---------------------------------------------------------


def _call(name: str, **args: str) -> Call:
    return Call.of(name, args)


LOOK = _call("lookup_order", order_id="NW-1")
REFUND = _call("issue_refund", order_id="NW-1", amount="2490")
CASE = _call("open_case", order_id="NW-1", queue="REP-2")


@pytest.mark.parametrize(
    ("made", "expected", "right"),
    [
        ([LOOK, REFUND], [LOOK, REFUND], True),
        ([REFUND], [LOOK, REFUND], False),  # the house rule says look the order up first
        ([REFUND, LOOK], [LOOK, REFUND], False),
        ([_call("lookup_order", order_id="NW-2"), REFUND], [LOOK, REFUND], False),
        ([LOOK, LOOK, REFUND, REFUND], [LOOK, REFUND], True),  # a repeated call counts once
        ([LOOK, _call("issue_refund", order_id="nw-1", amount=" 2490 ")], [LOOK, REFUND], True),
        ([LOOK, _call("issue_refund", order_id="NW-1", amount="24.90")], [LOOK, REFUND], False),
        ([LOOK, CASE], [CASE], True),  # a look-up nobody asked for is harmless
        ([CASE, REFUND], [CASE], False),  # an extra action is not
        ([], [CASE], False),
    ],
)
def test_tool_scoring_compares_the_calls(
    made: list[Call], expected: list[Call], right: bool
) -> None:
    task = get_task("tools")
    example = Example(input="x", answer=render_calls(expected))
    assert task.score(render_calls(made), example) is right


def test_tool_calls_render_and_parse_back() -> None:
    text = render_calls([LOOK, REFUND])
    assert text == "lookup_order(order_id='NW-1'); issue_refund(order_id='NW-1', amount='2490')"
    assert parse_calls(text) == [LOOK, REFUND]
    for junk in ("", "refund it", "os.system('x')", "f(1)", "f(**k)", "f(a=g())"):
        assert parse_calls(junk) == [] or junk == ""


def test_every_tool_task_answer_names_a_bound_tool() -> None:
    task = get_task("tools")
    names = {tool.name for tool in task.tools()}
    for example in task.examples(24, 0, "test"):
        calls = parse_calls(example.answer)
        assert calls and {call.name for call in calls} <= names
        assert example.input.count("NW-") == 1


def test_tool_evaluator_scores_a_trace_from_its_calls_and_names_the_right_ones() -> None:
    task = get_task("tools")
    example = next(e for e in task.examples(12, 0, "train") if e.meta["rule"] == "refunds")
    right = parse_calls(example.answer)
    evaluator = task.evaluator()
    wrong_trace = Trace(
        input=example.input,
        output="Refunded.",
        tool_calls=[ToolCall(name=right[1].name, args=dict(right[1].args))],
    )
    feedback = evaluator(wrong_trace)
    assert feedback is not None and feedback.correct is False
    assert feedback.ground_truth == example.answer
    assert feedback.comment is not None and example.answer in feedback.comment
    assert right[1].render() in feedback.comment  # what the agent made is named too
    right_trace = wrong_trace.model_copy(
        update={"tool_calls": [ToolCall(name=c.name, args=dict(c.args)) for c in right]}
    )
    assert (evaluator(right_trace) or Feedback()).correct is True
    assert evaluator(Trace(input="a request the task never made")) is None


def test_the_tool_agent_answer_is_the_calls_it_made() -> None:
    task = get_task("tools")
    [example] = task.examples(1, 0, "test")
    agent = task.build_agent(task.double_model(), with_rules=True)
    result = agent.invoke(ticket_input(example))
    assert task.answer_of(result) == example.answer
    assert "Done:" in str(result["messages"][-2].text)  # the tools ran


def test_the_tool_agent_gets_room_for_its_calls() -> None:
    task = get_task("tools")
    assert task.agent_max_tokens is not None
    openai = pytest.importorskip("langchain_openai")
    capped = openai.ChatOpenAI(api_key="x", base_url="http://127.0.0.1:9", max_tokens=48)
    roomy = task._agent_model(capped)
    assert roomy.max_tokens == task.agent_max_tokens and capped.max_tokens == 48
    generous = capped.model_copy(update={"max_tokens": 4096})
    assert task._agent_model(generous) is generous  # never lowered
    double = task.double_model()
    assert task._agent_model(double) is double  # no cap to raise


def test_tool_task_learns_live_through_the_middleware_and_its_evaluator() -> None:
    task = get_task("tools")
    train = task.examples(2 * len(task.rule_set), 0, "train")
    test = task.examples(len(task.rule_set), 0, "test")
    model = task.double_model()
    combee = Combee(
        prompt_id=task.name,
        model=task.double_learner(),
        evaluator=task.evaluator(),
        batch_size=len(train),
        learner=LearnerSettings(min_batch=1, max_wait_seconds=0.01, poll_seconds=0.01),
    )
    served = task.build_agent(model, middleware=[combee.middleware()])
    with combee.running():
        for example in train:
            served.invoke(ticket_input(example))
        combee.flush()
        for _ in range(400):
            if combee.queue().pending_count() == 0 and combee.learner.stats.versions:
                break
            combee.learner.wait_for_steps(combee.learner.stats.steps + 1, timeout=0.05)
    learned = task.build_agent(model, middleware=[combee.middleware(capture=False)])
    assert evaluate(task, task.build_agent(model), test).accuracy == 0.0
    assert evaluate(task, learned, test).accuracy >= 0.6


def test_the_demo_serves_the_tool_task_offline(tmp_path: Path) -> None:
    from langgraph_combee.demo._cli import main

    argv = ["--task", "tools", "--model", "test", "--tickets", "24", "--holdout", "12"]
    code = main([*argv, "--window", "6", "--plain", "--out", str(tmp_path)], stream=io.StringIO())
    assert code == 0
    data = json.loads((tmp_path / "demo.json").read_text())
    assert data["config"]["task"] == "tools"
    assert data["accuracy"]["holdout_before"] == 0.0
    assert data["accuracy"]["holdout_after"] >= 0.6
    wrong = [run for run in data["runs"] if not run["correct"]]
    assert wrong and all(parse_calls(run["expected"]) for run in wrong)
    assert all(run["answer"] == "" or parse_calls(run["answer"]) for run in data["runs"])
