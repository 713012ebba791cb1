"""Task environments: seeded examples, train/test separation, scoring, agents and doubles."""

from __future__ import annotations

import pytest

from langgraph_combee import Combee, Feedback, Trace
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.tasks import (
    TASKS,
    Example,
    HouseFormats,
    Task,
    TicketRouting,
    clean_answer,
    evaluate,
    get_task,
)
from langgraph_combee.testing import ScriptedChatModel

NAMES = sorted(TASKS)


@pytest.fixture(params=NAMES)
def task(request: pytest.FixtureRequest) -> Task:
    return get_task(request.param)


# ---- registry and generation ---------------------------------------------


def test_registry_knows_both_tasks() -> None:
    assert isinstance(get_task("tickets"), TicketRouting)
    assert isinstance(get_task("formats"), HouseFormats)
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


def test_agents_build_and_answer_with_a_scripted_model(task: Task) -> None:
    examples = task.examples(3, 0, "test")
    model = ScriptedChatModel(replies=[e.answer for e in examples])
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
