"""What this process's learning steps did, summed: ``Combee.describe()["steps"]``.

Built from each step's ``StepReport`` (its ``rules()``, ``reasons()``, ``calls``
and tokens), in ``learn()`` and the background learner alike, so that "the
learner runs and nothing changes" comes with its reasons, counted, in the first
place a user looks.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from langgraph_combee._core.types import StepReport

PER = 1000
"""Costs are shown per this many traces taken."""


class StepTally:
    """Cumulative counts of the learning steps that ended (failed steps write no report)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.steps = 0
        self.traces = 0
        self.versions = 0
        self.accepted = 0
        self.rules: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.input_tokens = 0
        self.output_tokens = 0
        self.last: str | None = None

    def add(self, report: StepReport) -> None:
        """Count one step."""
        with self._lock:
            self.steps += 1
            self.traces += len(report.trace_ids) or report.batch_size
            self.versions += report.version is not None
            self.accepted += report.accepted is True
            self.rules.update(report.rules())
            self.reasons.update(report.reasons())
            self.calls.update(report.calls)
            self.input_tokens += report.input_tokens
            self.output_tokens += report.output_tokens
            self.last = report.summary()

    def describe(self) -> dict[str, Any]:
        """The counts: steps, traces, versions, rules, reasons, costs per 1,000 traces.

        ``rules`` sums each step's ``StepReport.rules()`` (proposed, written,
        held, refused, left out); ``reasons`` its ``reasons()``, most frequent
        first; ``per_1000_traces`` the learner calls by stage and the tokens of
        all stages per 1,000 traces taken (None before any step); ``last`` the
        last step's ``summary()``.
        """
        with self._lock:
            per = None
            if self.traces:
                scale = PER / self.traces
                per = {
                    "calls": {
                        stage: round(n * scale, 1) for stage, n in sorted(self.calls.items())
                    },
                    "input_tokens": round(self.input_tokens * scale),
                    "output_tokens": round(self.output_tokens * scale),
                }
            return {
                "steps": self.steps,
                "traces": self.traces,
                "versions_written": self.versions,
                "versions_accepted": self.accepted,
                "rules": {k: self.rules.get(k, 0) for k in _RULES},
                "reasons": dict(self.reasons.most_common()),
                "per_1000_traces": per,
                "last": self.last,
            }


_RULES = ("proposed", "written", "held", "refused", "left_out")
