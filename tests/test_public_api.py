"""The public surface: small, sorted, complete, and every name documented."""

from __future__ import annotations

import importlib

import langgraph_combee
import langgraph_combee.errors
import langgraph_combee.testing


def test_all_is_sorted_and_small() -> None:
    names = langgraph_combee.__all__
    assert names == sorted(names)
    assert len(names) <= 26


def test_all_is_complete() -> None:
    public = {
        name
        for name, value in vars(langgraph_combee).items()
        if not name.startswith("_") and not isinstance(value, type(langgraph_combee))
    }
    assert public == set(langgraph_combee.__all__)


def test_every_exported_name_resolves_and_has_a_docstring() -> None:
    for module in (langgraph_combee, langgraph_combee.errors, langgraph_combee.testing):
        for name in module.__all__:
            value = getattr(module, name)
            if callable(value) and not name.endswith(("Reply", "Function")):
                assert (value.__doc__ or "").strip(), f"{module.__name__}.{name} has no docstring"


def test_errors_share_one_root() -> None:
    for name in langgraph_combee.errors.__all__:
        error = getattr(langgraph_combee.errors, name)
        assert issubclass(error, langgraph_combee.CombeeError)


def test_implementation_modules_are_private() -> None:
    for name in ("_combee", "_core", "_learning", "_storage", "_agent", "_learner"):
        assert importlib.import_module(f"langgraph_combee.{name}")
