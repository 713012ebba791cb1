"""Pinning: a run is served one version from its first model call to its last.

A version accepted while a run is in flight must not change the run's later
calls (the trace would then mix two prompts and teach the wrong one). The
middleware and the StateGraph helpers all pin through ``Pinner.pin``: the tenant
from the run's config (``scope``), the run's key (the caller's ``run_id``, else
the run's id as an attached tracer knows it), the version from the router (HEAD
or the canary), and the run labelled with that version. What differs is only
where the pin is kept between calls: the hook mode of the middleware keeps it in
the checkpointed agent state; the default middleware mode and the helpers keep
it in a ``Pinner``'s bounded memory, under a key of their choosing.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

from langgraph_combee._agent.runs import (
    given_run_id,
    observed,
    run_id_in_tracers,
    tag_runs,
    version_metadata,
)
from langgraph_combee._core.types import PromptVersion

if TYPE_CHECKING:
    from langgraph_combee._agent.serving import Server

__all__ = ["RUN_ID", "Pin", "Pinner", "Served"]

Level = Literal["graph", "root"]


class _RunId:
    def __repr__(self) -> str:
        return "RUN_ID"


RUN_ID: Hashable = _RunId()
"""``Pinner.pin(key=RUN_ID)``: remember the pin under the run's own key."""


class Pin(NamedTuple):
    """The version a run was pinned to, with what its trace needs.

    A named tuple (immutable, ``_replace`` for a changed copy): one is made per
    new run on the model call's path, and a frozen dataclass costs a
    ``object.__setattr__`` call per field to build.

    Attributes:
        tenant: The run's tenant (``serving.UNSCOPED`` when its scope failed).
        version: The number of the version served.
        run_key: The run's key (None when the run could not be identified).
        started: Monotonic time the run was pinned (its latency starts there).
        failed: A model call of the run raised and its failure was captured: a
            later capture of the run (an outer retry or fallback that recovered,
            or failed again) supersedes that trace.
        failed_in: The LangGraph task (node execution) whose model call failed
            last, while no attempt after it has succeeded: only a call in that
            task is a retry of it (None: no such task, or it is not known).
        model_from: How many messages the run had at its first model call: the
            AI and tool messages before that index came in the run's input
            (None: not known).
        made: The ids of the tool calls the run's own model calls returned so far:
            only those calls and their results are attested, whatever a client
            adds to the state between two model calls (``Command(update=...)``
            when it resumes an interrupted run). None: not known.
    """

    tenant: str | None
    version: int
    run_key: str | None
    started: float
    failed: bool = False
    failed_in: str | None = None
    model_from: int | None = None
    made: tuple[str, ...] | None = None


class Served(Protocol):
    """What pinning needs of the agent side (``side.AgentSide``), which owns the pinner."""

    prompt_id: str
    server: Server

    def tenant_of_run(self, config: Mapping[str, Any] | None) -> str | None: ...

    def select_version(self, tenant: str | None, run_key: str | None = None) -> PromptVersion: ...

    def version_for_run(self, tenant: str | None, version: int) -> PromptVersion: ...


class Pinner:
    """Pins runs for one agent side, remembering at most ``limit`` of them.

    Args:
        side: The agent side serving the runs.
        limit: Pins remembered at once; the oldest is forgotten beyond it (a run
            that never finished must not hold memory forever).
    """

    def __init__(self, side: Served, *, limit: int) -> None:
        self.side = side
        self.limit = limit
        self._pins: OrderedDict[Hashable, Pin] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._pins)

    def pin(
        self,
        config: Mapping[str, Any] | None,
        runtime: object = None,
        *,
        level: Level,
        key: Hashable | None = None,
        fresh_key: bool = True,
    ) -> tuple[Pin, PromptVersion]:
        """The run's pin and its version: recalled under ``key``, else made now.

        Args:
            config: The run's config (tenant scope, run ids, tracers).
            runtime: The node's LangGraph ``Runtime``, when the caller has it.
            level: Which enclosing run gives the run's key when the caller passed
                no ``run_id``: the graph running this node, or the trace's root.
            key: Where the pin is remembered: None (not remembered: the caller
                keeps it), ``RUN_ID`` (under the run's key, when it has one), or
                any other hashable of the caller's.
            fresh_key: Give a run without a key a new random one (it is then
                still traceable, but never recalled by key).

        Returns:
            The pin, and the version it names (from memory when possible).
        """
        if key is not None and key is not RUN_ID:
            found = self.recall(key)
            if found is not None:
                return found, self.side.version_for_run(found.tenant, found.version)
        tenant = self.side.tenant_of_run(config)
        run_key = given_run_id(config, runtime) or run_id_in_tracers(config, level=level)
        if key is RUN_ID:
            key = (tenant, run_key) if run_key is not None else None
            found = self.recall(key)
            if found is not None:
                version = self.side.version_for_run(found.tenant, found.version)
                # A nested graph has a run of its own to label.
                self._label(config, version)
                return found, version
        return self.fresh(config, tenant, run_key, key=key, fresh_key=fresh_key)

    def fresh(
        self,
        config: Mapping[str, Any] | None,
        tenant: str | None,
        run_key: str | None,
        *,
        key: Hashable | None = None,
        fresh_key: bool = True,
    ) -> tuple[Pin, PromptVersion]:
        """A new pin for a run whose tenant and key the caller has read (``pin`` reads them).

        Args:
            config: The run's config (labelled with the version chosen).
            tenant: The run's tenant, as ``side.tenant_of_run(config)`` gives it.
            run_key: The run's key (None: none known).
            key: Where the pin is remembered (None: not remembered; not ``RUN_ID``).
            fresh_key: Give a run without a key a new random one.

        Returns:
            The pin, and the version it names.
        """
        if run_key is None and fresh_key:
            run_key = str(uuid.uuid4())
        version = self.side.select_version(tenant, run_key)
        self._label(config, version)
        pin = Pin(tenant, version.version, run_key, time.monotonic())
        if key is not None:
            self._remember(key, pin)
        return pin, version

    def _label(self, config: Mapping[str, Any] | None, version: PromptVersion) -> None:
        # Only a callback handler could read the labels: without one, none are built.
        if observed(config):
            tag_runs(config, version_metadata(self.side.prompt_id, version))

    def recall(self, key: Hashable | None) -> Pin | None:
        """The pin remembered under ``key``, if any."""
        if key is None:
            return None
        # No lock: one ``get`` is atomic under the GIL (the keys are the callers'
        # strings and tuples of strings, whose hashing runs no Python code), and
        # every run passes here.
        return self._pins.get(key)

    def cold(self, config: Mapping[str, Any] | None, key: Hashable | None) -> bool:
        """Whether pinning under ``key`` would read the store (a new run of an uncached tenant)."""
        if self.recall(key) is not None:
            return False
        return not self.side.server.has_head(self.side.tenant_of_run(config))

    def forget(self, key: Hashable | None) -> None:
        """Drop the pin under ``key`` (its run is over)."""
        if key is not None:
            with self._lock:
                self._pins.pop(key, None)

    def keep(self, key: Hashable, pin: Pin) -> None:
        """Remember ``pin`` under ``key`` (a pin made with ``key=None`` whose run goes on)."""
        self._remember(key, pin)

    def _remember(self, key: Hashable, pin: Pin) -> None:
        with self._lock:
            self._pins[key] = pin
            while len(self._pins) > self.limit:
                self._pins.popitem(last=False)
