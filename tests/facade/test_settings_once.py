"""The settings objects are checked once, where they are built; every part reads them as given."""

from __future__ import annotations

import traceback
from typing import Any

import pytest

from langgraph_combee import (
    AlgorithmSettings,
    CaptureSettings,
    Combee,
    LearnerSettings,
    ServingSettings,
)
from langgraph_combee._adoption.replay import ReplaySettings
from langgraph_combee._agent.serving import Server
from langgraph_combee._algorithm.engine import LearningEngine
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import fake_learner


def test_every_part_holds_the_very_settings_objects_given() -> None:
    capture, serving = CaptureSettings(capture_limit=9), ServingSettings(focus_rules=2)
    learner, algorithm = LearnerSettings(min_batch=3), AlgorithmSettings(copies=3)
    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        capture=capture,
        serving=serving,
        learner=learner,
        algorithm=algorithm,
    )
    try:
        server = combee._agent.server
        assert server.capture_settings is capture and server.serving_settings is serving
        engine = combee._engine("tenant-a")
        assert engine.algorithm is algorithm and engine.learner is learner
        replays = combee._replayer.settings
        assert replays.algorithm is algorithm and replays.serving is serving
        assert replays.learner is learner
        assert combee.learner.settings is learner
    finally:
        combee.close()


BAD: list[tuple[type[Any], str, object, str]] = [
    (CaptureSettings, "capture_limit", 0, "an int >= 1"),
    (CaptureSettings, "durability", "always", "'buffered' or 'write_through'"),
    (ServingSettings, "focus_rules", 21, "an int from 0 (off) to 20"),
    (ServingSettings, "drop_rivals", "yes", "True or False"),
    (LearnerSettings, "min_batch", 0, "an int >= 1"),
    (LearnerSettings, "max_concurrency", 0, "an int >= 1"),
    (AlgorithmSettings, "token_budget", 10, "None or an int >= 50"),
    (AlgorithmSettings, "max_replays", 0, "an int >= 1"),
]


@pytest.mark.parametrize(("kind", "name", "bad", "allowed"), BAD)
def test_a_bad_value_is_refused_once_by_the_settings_object(
    kind: type[Any], name: str, bad: object, allowed: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        kind(**{name: bad})
    assert (caught.value.name, caught.value.value) == (name, bad)
    assert allowed in caught.value.allowed
    assert str(caught.value) == f"{name}={bad!r} is not allowed: {caught.value.allowed}"
    # Raised where the settings object is checked, not by a part re-checking a copy.
    raised_in = traceback.extract_tb(caught.value.__traceback__)[-1].filename
    assert raised_in.endswith("_settings.py")


def test_the_parts_do_not_check_the_settings_again() -> None:
    # A value forced past the check reaches the parts untouched: they hold no checks of
    # their own, so the settings object's message is the only one a user ever sees.
    serving = ServingSettings()
    object.__setattr__(serving, "focus_rules", 99)
    algorithm = AlgorithmSettings()
    object.__setattr__(algorithm, "token_budget", 7)
    learner = LearnerSettings()
    object.__setattr__(learner, "max_concurrency", 0)
    server = Server(registry_for=lambda _: None, queue_for=lambda _: None, serving=serving)  # type: ignore[arg-type, return-value]
    try:
        assert server.serving_settings.focus_rules == 99
    finally:
        server.close(flush=False)
    engine = LearningEngine(fake_learner(), algorithm=algorithm, learner=learner)
    assert engine.context.token_budget == 7 and engine.caller.settings.max_concurrency == 0
    assert ReplaySettings(serving=serving, algorithm=algorithm).focus_rules == 99


def test_roles_takes_a_role_profile_by_its_shape_and_refuses_anything_else() -> None:
    from langgraph_combee._algorithm.roles import SmallRoles

    profile = SmallRoles()
    assert AlgorithmSettings(roles=profile).roles is profile

    class Describes:
        def describe(self) -> dict[str, Any]:
            return {}

    for bad in (Describes(), "compact", 3):
        with pytest.raises(ConfigurationError) as caught:
            AlgorithmSettings(roles=bad)  # type: ignore[arg-type]
        assert caught.value.allowed == "'auto', 'full', 'small' or a RoleProfile"
