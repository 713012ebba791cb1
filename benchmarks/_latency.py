"""The latency model, a recorder of learner calls, and the critical-path lower bound.

The lower bound of a learning step is what an ideal runtime (no CPU cost, unlimited
concurrency) would need: the sum, over the step's sequential stages ("waves"), of
the longest single call in that stage. For the parallel strategies a wave is a run
of consecutive calls of one stage (map, level-1 proposals, level-2 aggregation, or
naive's single curator call); in the sequential strategy every call is its own wave
(reflect, curate, reflect, curate, ...).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from langgraph_combee.testing import LatencyChatModel

STAGES: tuple[str, ...] = ("reflect", "propose", "aggregate", "curate")


@dataclass(frozen=True)
class LatencyModel:
    """Simulated latency of one hosted-model call: fixed cost, prefill and decode.

    ``seconds = base_seconds + input_tokens / prefill_tps + output_tokens / decode_tps``.
    """

    base_seconds: float = 0.5
    prefill_tps: float = 1500.0
    decode_tps: float = 60.0

    def __post_init__(self) -> None:
        if self.base_seconds < 0 or self.prefill_tps <= 0 or self.decode_tps <= 0:
            raise ValueError(
                f"{self!r} is not allowed: expected base_seconds >= 0 and positive token rates"
            )

    def parts(self, input_tokens: int, output_tokens: int) -> tuple[float, float, float]:
        """The (base, prefill, decode) seconds of a call."""
        return (
            self.base_seconds,
            input_tokens / self.prefill_tps,
            output_tokens / self.decode_tps,
        )

    def seconds(self, input_tokens: int, output_tokens: int) -> float:
        """Simulated seconds of a call with these token counts."""
        return sum(self.parts(input_tokens, output_tokens))

    def chat_model(self, inner: BaseChatModel, *, time_scale: float) -> LatencyChatModel:
        """``inner`` wrapped so each call waits ``time_scale`` times this model's latency."""
        return LatencyChatModel(
            inner,
            base_seconds=self.base_seconds,
            seconds_per_input_token=1.0 / self.prefill_tps,
            seconds_per_output_token=1.0 / self.decode_tps,
            time_scale=time_scale,
        )

    def as_dict(self) -> dict[str, float]:
        """The parameters, for a JSON record."""
        return {
            "base_seconds": self.base_seconds,
            "prefill_tokens_per_second": self.prefill_tps,
            "decode_tokens_per_second": self.decode_tps,
        }


@dataclass(frozen=True)
class CallRecord:
    """One learner LLM call: its stage, token counts and measured (real) duration."""

    stage: str
    input_tokens: int
    output_tokens: int
    measured_seconds: float = 0.0
    ok: bool = True


class CallRecorder(BaseCallbackHandler):
    """Records every chat-model call of the learner, in start order.

    The stage comes from the ``combee_stage`` metadata the learner puts on each
    call (``reflect``, ``propose``, ``aggregate``, ``curate``); token counts from
    the reply's ``usage_metadata`` (the test doubles' estimate, the same one
    ``LatencyChatModel`` waits on).
    """

    run_inline = True  # keep start order exact; the handler does no I/O

    def __init__(self) -> None:
        super().__init__()
        self._order: list[UUID] = []
        self._stage: dict[UUID, str] = {}
        self._started: dict[UUID, float] = {}
        self._done: dict[UUID, CallRecord] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Note the call's stage and start time."""
        stage = str((metadata or {}).get("combee_stage", ""))
        if not stage:
            stage = next(
                (t.removeprefix("combee.") for t in tags or () if t.startswith("combee.")), "?"
            )
        self._order.append(run_id)
        self._stage[run_id] = stage
        self._started[run_id] = time.perf_counter()

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Note the call's token counts and duration."""
        if run_id not in self._stage:
            return
        input_tokens = output_tokens = 0
        generation = response.generations[0][0] if response.generations else None
        if isinstance(generation, ChatGeneration) and isinstance(generation.message, AIMessage):
            usage = generation.message.usage_metadata
            if usage is not None:
                input_tokens = int(usage.get("input_tokens", 0))
                output_tokens = int(usage.get("output_tokens", 0))
        self._done[run_id] = CallRecord(
            stage=self._stage[run_id],
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            measured_seconds=time.perf_counter() - self._started[run_id],
        )

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A failed call still occupied its stage; it is kept with no tokens."""
        if run_id in self._stage:
            self._done[run_id] = CallRecord(
                stage=self._stage[run_id],
                input_tokens=0,
                output_tokens=0,
                measured_seconds=time.perf_counter() - self._started[run_id],
                ok=False,
            )

    @property
    def calls(self) -> list[CallRecord]:
        """Every finished call, in start order."""
        return [self._done[r] for r in self._order if r in self._done]


def split_steps(calls: Sequence[CallRecord], sizes: Sequence[int]) -> list[list[CallRecord]]:
    """Cut the ordered calls into steps of ``sizes`` calls each (steps never overlap).

    Raises:
        ValueError: the sizes do not add up to the number of calls.
    """
    if sum(sizes) != len(calls):
        raise ValueError(f"step sizes {list(sizes)} do not add up to {len(calls)} calls")
    steps, start = [], 0
    for size in sizes:
        steps.append(list(calls[start : start + size]))
        start += size
    return steps


def waves(step: Sequence[CallRecord], *, sequential: bool) -> list[list[CallRecord]]:
    """The step's sequential stages: runs of same-stage calls, or one call each if sequential."""
    out: list[list[CallRecord]] = []
    for call in step:
        if out and not sequential and out[-1][-1].stage == call.stage:
            out[-1].append(call)
        else:
            out.append([call])
    return out


def critical_path(
    steps: Sequence[Sequence[CallRecord]], model: LatencyModel, *, sequential: bool
) -> list[CallRecord]:
    """The longest call (under ``model``) of every wave of every step, in order."""
    return [
        max(wave, key=lambda c: model.seconds(c.input_tokens, c.output_tokens))
        for step in steps
        for wave in waves(step, sequential=sequential)
    ]


def lower_bound(
    steps: Sequence[Sequence[CallRecord]], model: LatencyModel, *, sequential: bool
) -> float:
    """Critical-path lower bound, in simulated seconds, of running these steps."""
    return sum(
        model.seconds(c.input_tokens, c.output_tokens)
        for c in critical_path(steps, model, sequential=sequential)
    )


def critical_breakdown(
    steps: Sequence[Sequence[CallRecord]], model: LatencyModel, *, sequential: bool
) -> dict[str, dict[str, float]]:
    """Lower-bound seconds by stage, split into base, prefill and decode."""
    out: dict[str, dict[str, float]] = {}
    for call in critical_path(steps, model, sequential=sequential):
        base, prefill, decode = model.parts(call.input_tokens, call.output_tokens)
        row = out.setdefault(call.stage, {"base": 0.0, "prefill": 0.0, "decode": 0.0})
        row["base"] += base
        row["prefill"] += prefill
        row["decode"] += decode
    return out
