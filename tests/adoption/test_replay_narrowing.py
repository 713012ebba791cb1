"""Verified adoption narrows a rule that breaks or pulls runs through some of its alternatives.

A rule "When parcel tracking or parcel, LOG-5T." that pulls a damaged-parcel
ticket to LOG-5T through "parcel" loses that alternative and keeps the rest;
before, the whole rule was dropped and its case left uncovered.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, SystemMessage

from langgraph_combee import AlgorithmSettings, Combee, Feedback, ServingSettings, Trace
from langgraph_combee._core.evidence import ReplayReport
from langgraph_combee._core.situations import alternatives, input_words, situation_words
from langgraph_combee._core.types import TraceMessage
from langgraph_combee.testing import FunctionChatModel, fake_learner

APP_PROMPT = "Route the ticket. Answer with the team code only."
WHEN = re.compile(r"^- (?:\[[\w-]+\] )?When (.+?), answer (\S+?)\.?$")

TRUTH = {
    "refund urgent": "FIN",
    "ship urgent": "SHIP",
    "refund for shipping": "SHIP",
    "lamp broken": "HW",
    "urgent help": "FIN",
    "printer jammed": "HW",
}


def when_follower(*, greedy: bool = False) -> FunctionChatModel:
    """Answers with the code of the last rule one of whose alternatives the ticket names.

    ``greedy``: any learned FIN rule in the prompt makes it answer FIN, named or not.
    """

    def reply(messages: Sequence[BaseMessage]) -> str:
        system = str(messages[0].text) if isinstance(messages[0], SystemMessage) else ""
        words = input_words(str(messages[-1].text))
        hits = []
        for line in system.splitlines():
            m = WHEN.match(line)
            if m is None:
                continue
            if greedy and m.group(2) == "FIN":
                return "FIN"
            if any((need := situation_words(a)) and need <= words for a in alternatives(m[1])):
                hits.append(m.group(2))
        return hits[-1] if hits else "NONE"

    return FunctionChatModel(reply)


def run(trace_id: str, text: str, output: str) -> Trace:
    return Trace(
        id=trace_id,
        input=text,
        output=output,
        messages=[
            TraceMessage(role="human", content=text),
            TraceMessage(role="ai", content=output),
        ],
        feedback=Feedback(correct=TRUTH[text] == output, ground_truth=TRUTH[text]),
    )


def evaluator(trace: Trace) -> Feedback:
    return Feedback(correct=trace.output == TRUTH[trace.input], source="evaluator")


def learn(
    rules: dict[str, str],
    batch: list[Trace],
    agent: FunctionChatModel | None = None,
    prompt: str = APP_PROMPT,
    drop_rivals: bool = True,
) -> tuple[Combee, ReplayReport]:
    combee = Combee(
        prompt_id="narrowing",
        model=fake_learner(insight=lambda text, truth, output: rules.get(text, "")),
        evaluator=evaluator,
        batch_size=8,
        algorithm=AlgorithmSettings(agent_model=agent or when_follower(), agent_prompt=prompt),
        serving=ServingSettings(drop_rivals=drop_rivals),
    )
    replay = combee.learn(batch).steps[0].replay
    assert replay is not None
    return combee, replay


def contents(combee: Combee) -> list[str]:
    return [b.content for b in combee.current().playbook.bullets]


def test_a_rule_that_pulls_a_run_through_one_alternative_loses_only_that_one() -> None:
    combee, replay = learn(
        {"refund urgent": "When refund or urgent, answer FIN."},
        [run("t1", "refund urgent", "NONE"), run("t2", "ship urgent", "NONE")],
    )
    assert contents(combee) == ["When refund, answer FIN."]
    (verdict,) = replay.rules
    assert verdict.kept and verdict.content == "When refund, answer FIN."
    assert verdict.evidence.status == "narrowed"
    assert verdict.evidence.pulled == ["t2"]
    assert "left out 'urgent'" in verdict.evidence.reason
    (bullet,) = combee.current().playbook.bullets
    assert bullet.replay is not None and bullet.replay.status == "narrowed"
    assert replay.dropped == []


def test_a_rule_that_breaks_a_right_run_through_one_alternative_loses_only_that_one() -> None:
    combee, replay = learn(
        {"refund urgent": "When refund or urgent, answer FIN."},
        [run("t1", "refund urgent", "NONE"), run("r1", "refund for shipping", "SHIP")],
        prompt=f"{APP_PROMPT}\n- When shipping, answer SHIP.",
    )
    (verdict,) = replay.rules
    assert verdict.evidence.broken == ["r1"]
    assert verdict.evidence.status == "narrowed"
    assert contents(combee) == ["When urgent, answer FIN."]


def test_a_rule_left_with_no_alternative_is_still_dropped() -> None:
    combee, replay = learn(
        {"refund urgent": "When urgent, answer FIN."},
        [run("t1", "refund urgent", "NONE"), run("t2", "ship urgent", "NONE")],
    )
    assert contents(combee) == []
    (verdict,) = replay.rules
    assert verdict.evidence.status == "rejected"
    assert not verdict.kept


def test_a_rule_that_pulls_more_runs_naming_none_of_it_than_it_fixes_is_dropped() -> None:
    # The agent took the rule's answer for two tickets the rule does not name, and
    # the rule turned one run right: narrowing cannot help, the rule goes.
    combee, replay = learn(
        {"refund urgent": "When refund or urgent, answer FIN."},
        [
            run("t1", "refund urgent", "NONE"),
            run("t3", "lamp broken", "NONE"),
            run("t4", "printer jammed", "NONE"),
        ],
        agent=when_follower(greedy=True),
    )
    assert contents(combee) == []
    (verdict,) = replay.rules
    assert verdict.evidence.status == "rejected"
    assert verdict.evidence.fixed == ["t1"]
    assert verdict.evidence.pulled == ["t3", "t4"]


def test_a_stray_pull_of_a_run_wrong_before_is_outweighed_by_the_runs_it_fixed() -> None:
    # "lamp broken" was wrong before and names nothing of the rule: the model copied
    # the rule's answer onto it. That costs no right answer, and the rule turned its
    # own run right, so it stays, verified, with the pull on its evidence.
    combee, replay = learn(
        {"refund urgent": "When refund or urgent, answer FIN."},
        [run("t1", "refund urgent", "NONE"), run("t3", "lamp broken", "NONE")],
        agent=when_follower(greedy=True),
    )
    assert contents(combee) == ["When refund or urgent, answer FIN."]
    (verdict,) = replay.rules
    assert verdict.kept
    assert verdict.evidence.status == "verified"
    assert verdict.evidence.pulled == ["t3"]
    assert "outweighs the 1 run(s)" in verdict.evidence.reason


def test_a_stray_pull_of_a_run_right_before_still_drops_the_rule() -> None:
    # The same copy onto "lamp broken", which was right before: a right answer lost.
    combee, replay = learn(
        {"refund urgent": "When refund or urgent, answer FIN."},
        [run("t1", "refund urgent", "NONE"), run("t3", "lamp broken", "HW")],
        agent=when_follower(greedy=True),
    )
    assert contents(combee) == []
    (verdict,) = replay.rules
    assert verdict.evidence.status == "rejected"
    assert verdict.evidence.broken == ["t3"]


def test_a_pull_of_a_run_another_rule_came_from_is_not_stray() -> None:
    # "lamp broken" was wrong before, but the step learned "When lamp, answer HW."
    # from it: copying FIN onto it costs that rule its fix. The FIN rule is dropped,
    # and the lamp rule, judged again without it, turns its run right. (With the
    # rivals of a matched rule left out, the lamp run never sees the FIN rule.)
    combee, replay = learn(
        {
            "refund urgent": "When refund or urgent, answer FIN.",
            "lamp broken": "When lamp, answer HW.",
        },
        [run("t1", "refund urgent", "NONE"), run("t3", "lamp broken", "NONE")],
        agent=when_follower(greedy=True),
        drop_rivals=False,
    )
    fin, lamp = replay.rules
    assert fin.evidence.status == "rejected"
    assert fin.evidence.pulled == ["t3"]
    assert lamp.evidence.status == "verified"
    assert contents(combee) == ["When lamp, answer HW."]


def test_a_run_whose_request_names_a_rule_is_not_shown_its_rivals_in_replay() -> None:
    # The same step with the rivals left out (the default): the lamp run is served
    # its own rule and not the FIN rule, so nothing pulls it and both rules stand.
    combee, replay = learn(
        {
            "refund urgent": "When refund or urgent, answer FIN.",
            "lamp broken": "When lamp, answer HW.",
        },
        [run("t1", "refund urgent", "NONE"), run("t3", "lamp broken", "NONE")],
        agent=when_follower(greedy=True),
    )
    fin, lamp = replay.rules
    assert fin.evidence.status == "verified" and fin.evidence.pulled == []
    assert lamp.evidence.status == "verified"
    assert contents(combee) == ["When refund or urgent, answer FIN.", "When lamp, answer HW."]


def test_a_rule_with_a_stray_and_a_drawn_pull_is_narrowed_for_the_drawn_one() -> None:
    # Two fixes; "ship urgent" is drawn through "urgent", "lamp broken" through nothing.
    combee, replay = learn(
        {
            "refund urgent": "When refund or urgent, answer FIN.",
            "urgent help": "When refund or urgent, answer FIN.",
        },
        [
            run("t1", "refund urgent", "NONE"),
            run("t5", "urgent help", "NONE"),
            run("t2", "ship urgent", "NONE"),
            run("t3", "lamp broken", "NONE"),
        ],
        agent=when_follower(greedy=True),
    )
    (verdict,) = replay.rules
    assert verdict.evidence.status == "narrowed"
    assert sorted(verdict.evidence.pulled) == ["t2", "t3"]
    assert "left out 'urgent'" in verdict.evidence.reason
    assert "outweighs the 1 run(s)" in verdict.evidence.reason
    assert contents(combee) == ["When refund, answer FIN."]


def test_a_rule_whose_situation_fits_every_input_is_not_kept_for_its_pulls() -> None:
    # "any question" has no content word: it draws every ticket, so the pull of
    # "lamp broken" is the rule's doing, not a stray copy, and it is dropped as before.
    combee, replay = learn(
        {"refund urgent": "When any question, answer FIN."},
        [run("t1", "refund urgent", "NONE"), run("t3", "lamp broken", "NONE")],
        agent=when_follower(greedy=True),
    )
    assert contents(combee) == []
    (verdict,) = replay.rules
    assert verdict.evidence.status == "rejected"
    assert verdict.evidence.fixed == ["t1"]
    assert verdict.evidence.pulled == ["t3"]


def test_a_pull_through_a_word_of_the_situation_is_not_stray() -> None:
    # A situation written as a clause, as the full profile writes them: "ship urgent"
    # holds not all of its words, but it holds "urgent", which drew it to FIN.
    combee, replay = learn(
        {"refund urgent": "When the customer wants a refund for an urgent order, answer FIN."},
        [run("t1", "refund urgent", "NONE"), run("t2", "ship urgent", "NONE")],
        agent=when_follower(greedy=True),
    )
    assert contents(combee) == []
    (verdict,) = replay.rules
    assert verdict.evidence.status == "rejected"
    assert verdict.evidence.pulled == ["t2"]


def test_a_narrowed_rule_weighs_its_stray_pulls_only_against_the_fixes_it_keeps() -> None:
    # Its one fix, "urgent help", came through "urgent", which narrowing takes out
    # for "ship urgent": "When refund, answer FIN." fixes nothing it was learned
    # from, so the stray pull of "lamp broken" is outweighed by nothing.
    combee, replay = learn(
        {"urgent help": "When refund or urgent, answer FIN."},
        [
            run("t5", "urgent help", "NONE"),
            run("t2", "ship urgent", "NONE"),
            run("t3", "lamp broken", "NONE"),
        ],
        agent=when_follower(greedy=True),
    )
    assert contents(combee) == []
    (verdict,) = replay.rules
    assert verdict.evidence.status == "rejected"
    assert verdict.evidence.fixed == ["t5"]
    assert sorted(verdict.evidence.pulled) == ["t2", "t3"]


def test_a_rule_that_is_not_a_when_rule_is_dropped_as_before() -> None:
    _, replay = learn(
        {"refund urgent": "Answer FIN for refunds or anything polite."},
        [run("t1", "refund urgent", "NONE"), run("t2", "ship urgent", "NONE")],
        agent=when_follower(greedy=True),
    )
    (verdict,) = replay.rules
    assert verdict.evidence.status in ("rejected", "unverified")
    assert verdict.evidence.status != "narrowed"


def test_a_rule_is_not_narrowed_down_to_alternatives_of_generic_words() -> None:
    # "any question" fits every ticket: left alone, the rule would pull every run.
    combee, replay = learn(
        {"refund urgent": "When urgent or any question, answer FIN."},
        [run("t1", "refund urgent", "NONE"), run("t2", "ship urgent", "NONE")],
    )
    assert contents(combee) == []
    (verdict,) = replay.rules
    assert verdict.evidence.status == "rejected"
    assert not verdict.kept


def test_narrowing_an_update_keeps_the_alternatives_the_rule_had_before() -> None:
    # v1 verified "When refund, answer FIN."; v2's step widened it with "urgent", and a
    # run served before v1 names "refund": that alternative was accepted and is not
    # the step's change, so the update is rejected and v1's text stays, instead of
    # the rule losing the case it was verified on.
    rules = {"refund urgent": "When refund, answer FIN.", "urgent help": "When urgent, answer FIN."}
    combee = Combee(
        prompt_id="narrowing",
        model=fake_learner(insight=lambda text, truth, output: rules.get(text, "")),
        evaluator=evaluator,
        batch_size=8,
        algorithm=AlgorithmSettings(agent_model=when_follower(), agent_prompt=APP_PROMPT),
    )
    combee.learn([run("t1", "refund urgent", "NONE")])
    assert contents(combee) == ["When refund, answer FIN."]
    replay = (
        combee.learn([run("t4", "urgent help", "NONE"), run("r1", "refund for shipping", "SHIP")])
        .steps[0]
        .replay
    )
    assert replay is not None
    (verdict,) = replay.rules
    assert verdict.evidence.broken == ["r1"]
    assert verdict.evidence.status == "rejected"
    assert contents(combee) == ["When refund, answer FIN."]


def test_a_stored_bullet_with_a_status_from_a_newer_release_still_loads() -> None:
    from langgraph_combee._core.playbook import Bullet

    stored = {"id": "oth-00001", "section": "others", "content": "When refund, answer FIN."}
    narrowed = Bullet.model_validate({**stored, "replay": {"status": "narrowed", "version": 3}})
    assert narrowed.replay is not None and narrowed.replay.status == "narrowed"
    newer = Bullet.model_validate({**stored, "replay": {"status": "re-verified", "version": 3}})
    assert newer.replay is not None
    assert (newer.replay.status, newer.replay.version) == ("unverified", 3)
    assert Bullet.model_validate(stored).replay is None  # a playbook stored before replay


def test_a_rebased_candidate_keeps_the_rule_as_replay_narrowed_it() -> None:
    # Both candidates are learned from v0; v1 is approved after v2, so it is rebased:
    # its stored ops are re-applied to v2, and they must not bring the wide rule back.
    from langgraph_combee import ManualApproval

    rules = {
        "refund urgent": "When refund or urgent, answer FIN.",
        "lamp broken": "When lamp, answer HW.",
    }
    combee = Combee(
        prompt_id="narrowing",
        model=fake_learner(insight=lambda text, truth, output: rules.get(text, "")),
        evaluator=evaluator,
        batch_size=8,
        acceptance=ManualApproval(),
        algorithm=AlgorithmSettings(agent_model=when_follower(), agent_prompt=APP_PROMPT),
    )
    step = combee.learn([run("t1", "refund urgent", "NONE"), run("t2", "ship urgent", "NONE")])
    assert step.steps[0].replay is not None
    assert [v.evidence.status for v in step.steps[0].replay.rules] == ["narrowed"]
    combee.learn([run("t3", "lamp broken", "NONE")])
    combee.approve(2)
    head = combee.approve(1)
    assert head.rebased_from == 0
    assert sorted(contents(combee)) == ["When lamp, answer HW.", "When refund, answer FIN."]
