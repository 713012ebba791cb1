"""The blocking admin methods of ``Combee`` are derived from their async twins."""

from __future__ import annotations

import inspect

import pytest

from langgraph_combee import Combee, ManualApproval
from langgraph_combee.errors import CombeeClosedError, ConfigurationError
from langgraph_combee.testing import fake_learner
from tests.helpers import failing_traces

TWINS = [("approve", "aapprove"), ("reject", "areject"), ("rollback", "arollback")]


@pytest.mark.parametrize(("sync", "async_"), TWINS)
def test_a_blocking_method_keeps_its_twins_signature_and_its_own_docstring(
    sync: str, async_: str
) -> None:
    blocking, twin = getattr(Combee, sync), getattr(Combee, async_)
    assert inspect.signature(blocking) == inspect.signature(twin)
    assert blocking.__name__ == sync and not inspect.iscoroutinefunction(blocking)
    assert (blocking.__doc__ or "").strip() and blocking.__doc__ != twin.__doc__


def test_the_blocking_methods_run_their_async_twins() -> None:
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=2, acceptance=ManualApproval())
    combee.learn(failing_traces(2))
    combee.learn(failing_traces(2, prefix="more"))
    assert combee.approve(1, reason="ok").version == 1
    assert combee.reject(2).status == "rejected"
    back = combee.rollback(0, reason="start over")
    assert back.version == 3 and combee.current().version == 3
    with pytest.raises(ConfigurationError, match="reason"):
        combee.approve(2, reason=5)  # type: ignore[arg-type]


@pytest.mark.parametrize("sync", [sync for sync, _ in TWINS])
def test_a_closed_combee_names_the_blocking_method(sync: str) -> None:
    combee = Combee(prompt_id="p")
    combee.close()
    with pytest.raises(CombeeClosedError, match=rf"closed: {sync}\(\) cannot run"):
        getattr(Combee, sync)(combee, 1)
