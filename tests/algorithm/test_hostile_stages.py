"""Hostile inputs for the kinds and formats stages: crafted requests, odd ops, odd replies."""

from __future__ import annotations

import asyncio

from langgraph_combee._algorithm.stages import correcting
from langgraph_combee._algorithm.strategies import StepContext
from langgraph_combee._core.ops import Tag, Update
from tests.algorithm.test_stages import _labelled, _one_role, _state

KINDER = "You say what several"


def _lamps() -> list:
    return [_labelled(1, "The lamp on Elm Road flickers", "SR-305"),
            _labelled(2, "Street light out by the school", "SR-305")]  # fmt: skip


def test_kinds_renames_an_update_of_a_rule_in_force_as_an_update() -> None:
    # The step widens a rule in force (an UPDATE backed by two runs): it is named
    # again and stays an UPDATE of that rule, never a crash nor a new ADD.
    ops = [
        Tag(id="others-00002", helpful=1, sources=["t1"]),
        Update(id="others-00001", content="When lamp or light, answer SR-305.",
               sources=["t1", "t2"]),
    ]  # fmt: skip
    caller = _one_role(KINDER, '{"kind": "a broken street light"}')
    state, counts = asyncio.run(correcting.kinds(StepContext(caller=caller), _state(_lamps(), ops)))
    assert state.ops[0] == ops[0]
    assert state.ops[1] == Update(
        id="others-00001", content="When a broken street light, answer SR-305.",
        sources=["t1", "t2"],
    )  # fmt: skip
    assert counts == {"named": 1, "kept": 0}
