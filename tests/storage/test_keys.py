"""The namespace layout and the validation of prompt ids and tenants."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_combee._errors import ConfigurationError
from langgraph_combee._storage import Lease, PromptRegistry, TraceQueue
from langgraph_combee._storage.keys import PromptSpace, parse_version_key, version_key


def test_namespaces_follow_the_documented_layout() -> None:
    assert PromptSpace("support-agent").namespace("versions") == (
        "combee",
        "support-agent",
        "_",
        "versions",
    )
    assert PromptSpace("p", "acme").namespace("queue_index") == (
        "combee",
        "p",
        "acme",
        "queue_index",
    )


def test_version_keys_are_zero_padded_and_sort_by_number() -> None:
    assert version_key(7) == "0000000007"
    assert sorted(version_key(v) for v in (10, 9, 100)) == [version_key(v) for v in (9, 10, 100)]
    assert parse_version_key("0000000042") == 42
    assert parse_version_key("head") is None and parse_version_key("42") is None
    for bad in (-1, 10**10, 1.0, True):
        with pytest.raises(ConfigurationError, match="version="):
            version_key(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "   ", "a.b", "v1.2", "nul\x00", 5, None])
def test_bad_prompt_ids_are_refused_naming_the_value(bad: Any) -> None:
    store = InMemoryStore()
    for build in (
        lambda: PromptRegistry(store, bad),
        lambda: TraceQueue(store, bad),
        lambda: Lease(store, bad, holder="me"),
    ):
        with pytest.raises(ConfigurationError) as info:
            build()
        assert info.value.name == "prompt_id" and info.value.value == bad
        assert repr(bad) in str(info.value) and "'.'" in str(info.value)


@pytest.mark.parametrize("bad", ["", "acme.eu", "_", 3])
def test_bad_tenants_are_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match=f"tenant={bad!r}".replace(".", r"\.")):
        PromptRegistry(InMemoryStore(), "p", tenant=bad)


def test_a_store_is_required() -> None:
    not_a_store: Any = {}
    with pytest.raises(ConfigurationError, match="store=\\{\\}"):
        PromptRegistry(not_a_store, "p")
    with pytest.raises(ConfigurationError, match="BaseStore"):
        TraceQueue(not_a_store, "p")
    assert isinstance(InMemoryStore(), BaseStore)
