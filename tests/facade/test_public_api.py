"""The public surface: small, sorted, complete, one home per name, and public paths shown."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

import langgraph_combee
import langgraph_combee.errors
import langgraph_combee.local
import langgraph_combee.testing
import langgraph_combee.types
from langgraph_combee import (
    AlgorithmSettings,
    BatchSizeController,
    CaptureSettings,
    Combee,
    LearnerBudget,
    LearnerSettings,
    ServingSettings,
)
from langgraph_combee._errors import CombeeError
from langgraph_combee._settings import MOVED
from langgraph_combee.errors import ConfigurationError
from langgraph_combee.testing import FlakyStore, fake_learner
from tests.helpers import failing_traces

PUBLIC = (langgraph_combee, langgraph_combee.types, langgraph_combee.errors)
SETTINGS = (CaptureSettings, ServingSettings, LearnerSettings, AlgorithmSettings)


def _public_names(module: Any) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_all_is_sorted_and_complete(module: Any) -> None:
    names = module.__all__
    assert names == sorted(names)
    assert _public_names(module) == set(names)


def test_the_root_stays_small() -> None:
    assert 15 <= len(langgraph_combee.__all__) <= 22


def test_each_public_name_has_one_public_home() -> None:
    homes: dict[str, str] = {}
    for module in (*PUBLIC, langgraph_combee.testing, langgraph_combee.local):
        for name in module.__all__:
            assert name not in homes, f"{name} is in {homes[name]} and {module.__name__}"
            homes[name] = module.__name__


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_public_classes_show_their_public_path(module: Any) -> None:
    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, type):
            assert value.__module__ == module.__name__, name
    assert repr(Combee) == "<class 'langgraph_combee.Combee'>"
    assert repr(langgraph_combee.types.PromptVersion).endswith(
        "langgraph_combee.types.PromptVersion'>"
    )


def test_every_exported_name_resolves_and_has_a_docstring() -> None:
    for module in (*PUBLIC, langgraph_combee.testing):
        for name in module.__all__:
            value = getattr(module, name)
            if callable(value) and not name.endswith(("Reply", "Function", "Fn", "Listener")):
                assert (value.__doc__ or "").strip(), f"{module.__name__}.{name} has no docstring"


def _our_errors(cls: type) -> set[type]:
    found = {cls}
    for sub in cls.__subclasses__():
        # A private class (``_UnknownPromptError``) is caught where it is raised.
        if sub.__module__.startswith("langgraph_combee") and not sub.__name__.startswith("_"):
            found |= _our_errors(sub)
    return found


def test_every_error_is_in_the_errors_module_only_and_in_its_tree() -> None:
    exported = {getattr(langgraph_combee.errors, n) for n in langgraph_combee.errors.__all__}
    assert _our_errors(CombeeError) == exported
    tree = langgraph_combee.errors.__doc__ or ""
    for error in exported:
        assert issubclass(error, CombeeError)
        assert re.search(rf"\b{error.__name__}\b", tree), f"{error.__name__} missing from the tree"
        assert error.__name__ not in langgraph_combee.__all__
        assert error.__name__ not in langgraph_combee.local.__all__


def test_implementation_modules_are_private() -> None:
    rooms = ("_llm", "_guard", "_rules", "_algorithm", "_adoption")
    for name in ("_combee", "_core", *rooms, "_storage", "_agent", "_learner", "_settings"):
        assert importlib.import_module(f"langgraph_combee.{name}")


# Names an annotation of Combee's public API may use without langgraph-combee exporting them.
_EXTERNAL = {
    "Any", "Awaitable", "Callable", "Coroutine", "Iterable", "Iterator", "Literal", "Mapping",
    "Sequence", "None", "BaseChatModel", "BaseStore", "Callbacks", "RunnableConfig", "Never",
    "Combee", "R", "Node", "StateGraph", "CompiledStateGraph", "BaseMessage", "SystemMessage",
}  # fmt: skip
_ALIASES = {"BatchSize", "MissingFeedback", "DropPolicy", "Durability", "ReplayMode"}


def test_every_type_in_combees_signatures_is_importable_from_a_public_module() -> None:
    public = {name for module in PUBLIC for name in module.__all__}
    unknown: dict[str, set[str]] = {}
    for attr, member in inspect.getmembers(Combee):
        if attr.startswith("_") and attr != "__init__":
            continue
        func = member.fget if isinstance(member, property) else member
        if not callable(func):
            continue
        try:
            signature = inspect.signature(func)
        except (TypeError, ValueError):
            continue
        texts = [str(p.annotation) for p in signature.parameters.values()]
        texts.append(str(signature.return_annotation))
        for text in texts:
            for token in re.findall(r"\b[A-Z][A-Za-z0-9_]*\b", text):
                if token not in public and token not in _EXTERNAL and token not in _ALIASES:
                    unknown.setdefault(attr, set()).add(token)
    assert unknown == {}


# ---- Combee's own public names: what a user calls, nothing internal ----------

# Every public name of a Combee, class and instance. An internal that shows up
# here (a helper the middleware calls, a part the learner uses) belongs to the
# agent side (``combee._agent``) or the learner's parts instead.
COMBEE_PUBLIC = [
    "aapprove", "aclose", "acurrent", "adiff", "afeedback", "aflush", "aget", "ahistory",
    "alearn", "approve", "areject", "arollback", "astart", "asteps", "astop", "capture",
    "close", "current", "describe", "describe_roles", "diff", "feedback", "flush",
    "from_conn_string", "get", "history", "instrument", "learn", "learner", "middleware",
    "model", "next_batch_size", "node", "prompt_id", "queue", "registry", "reject",
    "rollback", "running", "start", "steps", "stop", "store", "system_prompt", "tracer",
    "wrap_model",
]  # fmt: skip


def test_combees_public_names_are_exactly_the_documented_ones() -> None:
    combee = Combee(prompt_id="p", model=fake_learner())
    names = {n for n in dir(combee) if not n.startswith("_")}
    assert sorted(names) == COMBEE_PUBLIC
    for name in COMBEE_PUBLIC:
        member = inspect.getattr_static(Combee, name)
        doc = member.fget.__doc__ if isinstance(member, property) else member.__doc__
        assert (doc or "").strip(), f"Combee.{name} has no docstring"


@pytest.mark.parametrize("name", ["prompt_id", "model", "store"])
def test_what_combee_was_built_on_is_read_only(name: str) -> None:
    combee = Combee(prompt_id="p", model=fake_learner())
    with pytest.raises(AttributeError):
        setattr(combee, name, None)


def test_flush_writes_captured_traces_to_the_queue_at_once() -> None:
    # No timed flush during the test: only flush() writes.
    combee = Combee(prompt_id="p", capture=CaptureSettings(flush_seconds=3600.0))
    for trace in failing_traces(3):
        combee.capture(trace)
    assert combee.queue().pending_count() == 0  # still in memory
    assert combee.flush() == 3
    assert combee.queue().pending_count() == 3
    assert combee.flush() == 0  # nothing left to write
    combee.close()


async def test_aflush_is_flush_for_async_callers() -> None:
    combee = Combee(prompt_id="p", capture=CaptureSettings(flush_seconds=3600.0))
    combee.capture(failing_traces(1)[0])
    assert await combee.aflush() == 1
    assert await combee.queue().apending_count() == 1
    await combee.aclose()


def test_flush_keeps_traces_in_memory_while_the_store_fails() -> None:
    store = FlakyStore()
    combee = Combee(prompt_id="p", store=store, capture=CaptureSettings(flush_seconds=3600.0))
    with store.outage():
        combee.capture(failing_traces(1)[0])
        assert combee.flush() == 0  # never raises: the trace waits in memory
        assert combee.describe()["serving"]["buffered"] == 1
    assert combee.flush() == 1
    assert combee.queue().pending_count() == 1
    combee.close()


# ---- Combee's arguments: about ten, plus four settings objects --------------


def test_combee_takes_about_ten_arguments() -> None:
    parameters = inspect.signature(Combee).parameters
    named = [p for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert [p.name for p in named] == [
        "prompt_id",
        "model",
        "store",
        "strategy",
        "batch_size",
        "evaluator",
        "acceptance",
        "guard",
        "scope",
        "capture",
        "serving",
        "learner",
        "algorithm",
    ]


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_keyword_names_the_settings_object_that_holds_it(old: str) -> None:
    argument, settings, field = MOVED[old]
    with pytest.raises(ConfigurationError) as caught:
        Combee(prompt_id="p", **{old: 1})
    assert caught.value.name == old
    assert f"{argument}={settings.__name__}({field}=...)" in str(caught.value)
    assert field in {f.name for f in dataclasses.fields(settings)}


def test_an_old_keyword_is_refused_by_from_conn_string() -> None:
    with pytest.raises(ConfigurationError, match=r"serving=ServingSettings\(refresh_seconds"):
        Combee.from_conn_string("memory", prompt_id="p", refresh_seconds=1.0)


def test_an_unknown_keyword_is_a_type_error_with_a_suggestion() -> None:
    with pytest.raises(TypeError, match=r"'acceptence'.*did you mean 'acceptance'"):
        Combee(prompt_id="p", acceptence=None)
    with pytest.raises(TypeError, match=r"did you mean learner=LearnerSettings\(poll_seconds"):
        Combee(prompt_id="p", poll_second=1.0)


def test_every_old_keyword_is_a_field_of_some_settings_object() -> None:
    fields = {f.name for s in SETTINGS for f in dataclasses.fields(s)}
    assert set(MOVED) - {"reflector"} == fields


@pytest.mark.parametrize("kind", SETTINGS, ids=lambda k: k.__name__)
def test_settings_are_frozen_documented_and_replace_checks_again(kind: type[Any]) -> None:
    settings = kind()
    field = dataclasses.fields(kind)[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(settings, field.name, 1)
    doc = kind.__doc__ or ""
    for f in dataclasses.fields(kind):
        assert f"{f.name}:" in doc, f"{kind.__name__}.{f.name} is not documented"
    with pytest.raises(ConfigurationError, match="no_such_field"):
        settings.replace(no_such_field=1)
    with pytest.raises(ConfigurationError, match=field.name):
        settings.replace(**{field.name: object()})


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("capture", {"capture_limit": 5}, "None or a CaptureSettings"),
        ("serving", CaptureSettings(), "None or a ServingSettings"),
        ("learner", LearnerSettings, "None or a LearnerSettings"),
        ("algorithm", "fast", "None or a AlgorithmSettings"),
    ],
)
def test_a_settings_argument_of_the_wrong_type_is_named(
    name: str, value: object, allowed: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Combee(prompt_id="p", **{name: value})  # type: ignore[arg-type]
    assert caught.value.name == name and caught.value.allowed == allowed


def test_every_settings_field_reaches_the_part_that_uses_it() -> None:
    budget = LearnerBudget(calls_per_hour=100)

    def listener(new: object, previous: object) -> None:
        return None

    capture = CaptureSettings(
        capture_limit=7,
        drop_policy="drop_newest",
        flush_seconds=0.25,
        durability="write_through",
        max_message_chars=300,
        max_trace_chars=900,
        feedback_wait_seconds=9.0,
    )
    serving = ServingSettings(refresh_seconds=3.0, first_read_seconds=0.5, on_version=[listener])
    learner = LearnerSettings(
        max_concurrency=3,
        timeout_seconds=12.0,
        max_attempts=5,
        backoff_seconds=0.1,
        callbacks=[],
        budget=budget,
        min_batch=2,
        max_wait_seconds=4.0,
        poll_seconds=0.3,
        lease_seconds=40.0,
        step_backoff_seconds=2.0,
        on_missing_feedback="drop",
    )
    algorithm = AlgorithmSettings(
        copies=3,
        fan_in=2,
        seed=11,
        token_budget=800,
        roles="small",
        replay=False,
        max_replays=5,
        agent_prompt="app prompt",
    )
    combee = Combee(
        prompt_id="p",
        model=fake_learner(),
        store=InMemoryStore(),
        capture=capture,
        serving=serving,
        learner=learner,
        algorithm=algorithm,
    )
    server = combee._agent.server
    # Each part holds the very object given, not a copy checked a second time.
    assert server.capture_settings is capture and server.serving_settings is serving
    assert (server.limits.max_message_chars, server.limits.max_trace_chars) == (300, 900)
    assert server.flush_seconds == 0.25
    assert combee._agent.feedback_wait_seconds == 9.0
    assert listener in server.listeners
    engine = combee._engine(None)
    assert engine.algorithm is algorithm and engine.learner is learner
    calls = engine.caller.settings
    assert (calls.max_concurrency, calls.timeout_seconds, calls.max_attempts) == (3, 12.0, 5)
    assert (calls.backoff_initial, calls.backoff_max) == (0.1, 0.8)
    assert engine.caller.budget is budget
    assert combee._learner_parts.feedback_source is learner.feedback_source
    assert combee._learner_parts.on_missing_feedback == "drop"
    assert combee.learner.settings is learner
    assert combee._writer.lease_seconds == 40.0
    assert combee.describe_roles()["profile"] == "small"
    replays = combee._replayer.settings
    assert (replays.algorithm, replays.serving, replays.learner) == (algorithm, serving, learner)
    assert replays.algorithm is algorithm and replays.serving is serving
    assert replays.learner is learner and replays.max_replays == 5
    assert combee._replayer.mode is False
    assert combee._replayer._prompt == "app prompt"


# ---- batch_size= takes a BatchSizeController --------------------------------


def test_batch_size_takes_a_controller_and_each_tenant_measures_its_own() -> None:
    controller = BatchSizeController(candidates=(2, 3))
    combee = Combee(prompt_id="p", model=fake_learner(), batch_size=controller)
    assert combee.next_batch_size(tenant="a") == 2
    combee.learn(failing_traces(2), tenant="a")
    assert combee.next_batch_size(tenant="a") == 3  # a measured size 2
    assert combee.next_batch_size(tenant="b") == 2  # b has measured nothing
    assert controller.samples == []  # the one given stays a template


@pytest.mark.parametrize("bad", ["a.b", "_", "", 5])
def test_next_batch_size_refuses_a_tenant_the_other_calls_refuse(bad: object) -> None:
    # next_batch_size(tenant="a.b") answered 4 (and made an engine for
    # it), where queue(), registry(), feedback() and learn() refuse that tenant.
    combee = Combee(prompt_id="p", model=fake_learner())
    with pytest.raises(ConfigurationError, match=f"tenant={bad!r}"):
        combee.next_batch_size(tenant=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=f"tenant={bad!r}"):
        combee.queue(tenant=bad)  # type: ignore[arg-type]
    assert list(combee._engines) == [None]


def test_batch_size_refuses_anything_else() -> None:
    with pytest.raises(ConfigurationError, match="BatchSizeController"):
        Combee(prompt_id="p", batch_size=2.5)  # type: ignore[arg-type]


def test_the_api_reference_documents_every_public_name() -> None:
    from pathlib import Path

    reference = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    for module in (langgraph_combee, langgraph_combee.types):
        for name in module.__all__:
            assert f"::: {module.__name__}.{name}\n" in reference, name
