"""The step log: a summary of each recent learning step of a prompt, kept in the store.

A learner that runs and writes no version must say why where a person looks:
each step, in ``learn()`` and the background learner alike, writes one
``StepRecord`` (its traces, its rules and what became of them, by reason, the
version written or why none was) under the prompt's namespace (see ``keys``).
Only the most recent ``keep`` (100 by default) stay; ``combee steps`` lists them,
newest first, from any process that opens the store.

Keys are the step's wall-clock nanoseconds (20 digits) and a random suffix, so
they sort by time. Records another release wrote are read without the fields
this one lacks; a record that cannot be read at all is skipped (logged).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import datetime, timezone

from langgraph.store.base import BaseStore
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langgraph_combee._core.types import StepReport
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._storage import _io as io
from langgraph_combee._storage._io import Flow, run_async, run_sync
from langgraph_combee._storage.keys import PromptSpace

logger = logging.getLogger("langgraph_combee.steps")

KEEP_STEPS = 100
"""Step records kept per prompt and tenant (the most recent)."""


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


_clock_lock = threading.Lock()
_last_ns = 0


def _step_ns() -> int:
    """Wall-clock nanoseconds, strictly increasing within this process (keys sort by step)."""
    global _last_ns
    with _clock_lock:
        _last_ns = max(time.time_ns(), _last_ns + 1)
        return _last_ns


class StepRecord(BaseModel):
    """One learning step as the step log keeps it (built from its ``StepReport``).

    Attributes:
        at: When the step ended (UTC).
        tenant: Whose playbook learned (None: the shared one).
        summary: ``StepReport.summary()``: the step in one line.
        traces: Traces the step took.
        rules: ``StepReport.rules()``: proposed, written, held, refused, left out.
        reasons: ``StepReport.reasons()``: why rules did not land, by reason.
        to_trust: ``StepReport.to_trust()``: the settings that would trust the
            untrusted fields its held and refused rules rest on.
        version: The version written, or None.
        accepted: True (in force), False (rejected), None (pending or none written).
        outcome: ``StepReport.outcome()``: the version's fate, or why none was written.
        strategy: The strategy that ran.
        calls: Learner calls by stage.
        input_tokens: Prompt tokens of the step.
        output_tokens: Completion tokens of the step.
        seconds: How long the step took.
        failed_reflections: Traces whose reflection call failed.
    """

    model_config = ConfigDict(extra="ignore")

    at: datetime = Field(default_factory=_utcnow)
    tenant: str | None = None
    summary: str = ""
    traces: int = 0
    rules: dict[str, int] = Field(default_factory=dict)
    reasons: dict[str, int] = Field(default_factory=dict)
    to_trust: list[str] = Field(default_factory=list)
    version: int | None = None
    accepted: bool | None = None
    outcome: str = ""
    strategy: str = ""
    calls: dict[str, int] = Field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    failed_reflections: int = 0

    @classmethod
    def of(cls, report: StepReport, *, tenant: str | None = None) -> StepRecord:
        """The record of ``report``, a step of ``tenant``'s playbook."""
        return cls(
            tenant=tenant,
            summary=report.summary(),
            traces=len(report.trace_ids) or report.batch_size,
            rules=report.rules(),
            reasons=report.reasons(),
            to_trust=report.to_trust(),
            version=report.version,
            accepted=report.accepted,
            outcome=report.outcome(),
            strategy=report.strategy,
            calls=dict(report.calls),
            input_tokens=report.input_tokens,
            output_tokens=report.output_tokens,
            seconds=report.seconds,
            failed_reflections=len(report.failed_reflections),
        )


class StepLog:
    """The recent step records of one prompt (per tenant) in a ``BaseStore``.

    Every method has an async twin prefixed with ``a``.

    Args:
        store: The LangGraph store.
        prompt_id: The prompt's id.
        tenant: The tenant, or None for the shared playbook.
        keep: Records kept (the most recent), an int >= 1.
    """

    def __init__(
        self,
        store: BaseStore,
        prompt_id: str,
        *,
        tenant: str | None = None,
        keep: int = KEEP_STEPS,
    ) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ConfigurationError("keep", keep, "an int >= 1")
        self._store = store
        self._space = PromptSpace(prompt_id, tenant)
        self._namespace = self._space.namespace("steps")
        self.keep = keep

    def __repr__(self) -> str:
        return f"StepLog(prompt_id={self._space.prompt_id!r}, tenant={self._space.tenant!r})"

    def add(self, record: StepRecord) -> None:
        """Write ``record`` and forget the records beyond the most recent ``keep``."""
        run_sync(self._store, self._add_flow(record))

    async def aadd(self, record: StepRecord) -> None:
        """Async twin of ``add``."""
        await run_async(self._store, self._add_flow(record))

    def recent(self, limit: int | None = None) -> list[StepRecord]:
        """The records, newest first (at most ``limit``; None: all kept)."""
        return run_sync(self._store, self._recent_flow(_limit(limit)))

    async def arecent(self, limit: int | None = None) -> list[StepRecord]:
        """Async twin of ``recent``."""
        return await run_async(self._store, self._recent_flow(_limit(limit)))

    def _add_flow(self, record: StepRecord) -> Flow[None]:
        if not isinstance(record, StepRecord):
            raise ConfigurationError("record", record, "a StepRecord")
        key = f"{_step_ns():020d}-{uuid.uuid4().hex[:8]}"
        yield from io.put(self._namespace, key, record.model_dump(mode="json"))
        items = yield from io.search_all(self._namespace)
        old = items[: max(0, len(items) - self.keep)]
        yield from io.batch([io.DeleteRequest(self._namespace, item.key) for item in old])

    def _recent_flow(self, limit: int | None) -> Flow[list[StepRecord]]:
        items = yield from io.search_all(self._namespace)
        records: list[StepRecord] = []
        for item in reversed(items):
            if limit is not None and len(records) >= limit:
                break
            try:
                records.append(StepRecord.model_validate(item.value))
            except ValidationError:
                logger.warning("skipped an unreadable step record %r", item.key)
        return records


def _limit(limit: int | None) -> int | None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigurationError("limit", limit, "None or an int >= 0")
    return limit
