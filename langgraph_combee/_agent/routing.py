"""Which version a new run is served: HEAD, or the canary candidate for a share of runs.

The agent-side half of a canary trial. The learner side decides (its acceptance
policy starts a trial by writing the canary to the registry and pushing it here
through ``on_canary``); this router only reads the agent's own cache, which the
serving thread refreshes from the registry together with HEAD, so every replica
serves the same share of runs the candidate. Memory only: it runs on the hot path.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable

from langgraph_combee._core.types import PromptVersion
from langgraph_combee._errors import ConfigurationError

__all__ = ["CanaryRouter", "bucket"]

logger = logging.getLogger("langgraph_combee.serving")


def bucket(run_key: str) -> float:
    """A number in [0, 1) fixed by ``run_key``: the same run always lands in the same arm."""
    digest = hashlib.sha256(run_key.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class CanaryRouter:
    """Serve the cached canary to ``fraction`` of runs (stable per run key), else HEAD.

    Args:
        head: The cached HEAD of a tenant (``Server.head``).
        canary: The cached canary of a tenant, or None (``Server.canary``).
        fraction: Share of runs served the canary while one is set, in [0, 1);
            0 (no canary trials) always serves HEAD without reading the canary.

    Raises:
        ConfigurationError: ``fraction`` is not a number in [0, 1).
    """

    def __init__(
        self,
        *,
        head: Callable[[str | None], PromptVersion],
        canary: Callable[[str | None], PromptVersion | None],
        fraction: float = 0.0,
    ) -> None:
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, (int, float))
            or not math.isfinite(fraction)
            or not 0 <= fraction < 1
        ):
            raise ConfigurationError("canary_fraction", fraction, "a number in [0, 1)")
        self._head = head
        self._canary = canary
        self.fraction = float(fraction)

    def __repr__(self) -> str:
        return f"CanaryRouter(fraction={self.fraction})"

    def route(self, tenant: str | None, run_key: str | None) -> PromptVersion:
        """The version a new run of ``tenant`` keyed ``run_key`` is served.

        A run without a key cannot be kept in one arm across its calls, so it is
        served HEAD.
        """
        head = self._head(tenant)
        if self.fraction == 0.0 or run_key is None:
            return head
        canary = self._canary(tenant)
        if canary is None:
            return head
        return canary if bucket(run_key) < self.fraction else head
