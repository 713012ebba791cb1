"""What later steps read of earlier ones: step records in the store, and the inputs remembered."""

from __future__ import annotations

import json

from langchain_core.messages import BaseMessage
from langgraph.store.memory import InMemoryStore

from langgraph_combee import Combee, Feedback, Trace
from langgraph_combee._core.types import StepReport
from langgraph_combee._storage.steps import StepLog, StepRecord
from langgraph_combee.testing import FunctionChatModel, fake_learner

KINDER = "You say what several"


def test_a_step_report_or_record_with_fields_no_stage_writes_any_more_still_loads() -> None:
    report = StepReport.model_validate(
        {"strategy": "combee", "batch_size": 4, "vague_alternatives": 2, "telling_words": 3}
    )
    assert report.batch_size == 4 and "vague alternative" not in report.reasons()
    store = InMemoryStore()
    log = StepLog(store, "p")
    log.add(StepRecord(summary="old step"))
    (item,) = store.search(log._namespace)
    stored = {**item.value, "reasons": {"vague alternative": 2}, "vague_alternatives": 2}
    store.put(log._namespace, item.key, stored)
    records = log.recent()
    assert [(r.summary, r.reasons) for r in records] == [("old step", {"vague alternative": 2})]


def test_a_label_answered_right_in_two_steps_is_named_from_both_steps_inputs() -> None:
    # One right run per step: only the input remembered from the step before shows
    # two requests sharing the label, which the ``confirmed`` stage needs.
    asked: list[str] = []
    base = fake_learner()

    def reply(messages: list[BaseMessage]) -> str:
        if str(messages[0].content).startswith(KINDER):
            asked.append(str(messages[-1].content))
            return json.dumps({"kind": "money back on an order"})
        return str(base.fn(messages))

    runs = [
        Trace(id=f"t{i}", input=text, output="refund",
              feedback=Feedback(correct=True, ground_truth="refund", source="operator"))
        for i, text in enumerate(["I want a refund for my order", "Money back please"])
    ]  # fmt: skip
    combee = Combee(prompt_id="p", model=FunctionChatModel(reply), batch_size=1)
    bullets = [b.content for b in combee.learn(runs).playbook.bullets if not b.pending]
    assert len(asked) == 1 and "I want a refund" in asked[0] and "Money back" in asked[0]
    assert bullets == ["When money back on an order, answer refund."]
