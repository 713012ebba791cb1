"""Acceptance policies: when is a candidate version swapped in.

A policy looks at a candidate and the version in force and returns a
``Decision`` (accept or reject, with its reason and figures), or None to leave
the candidate pending (manual approval, a canary still collecting runs).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from langgraph_combee._core.types import Decision, PromptVersion


@runtime_checkable
class AcceptancePolicy(Protocol):
    """Decides whether a candidate version replaces the current one."""

    name: str

    async def decide(self, candidate: PromptVersion, current: PromptVersion) -> Decision | None:
        """Return a decision now, or None to leave the candidate pending."""
        ...


class AcceptAll:
    """Accept every candidate at once (the default)."""

    name = "accept_all"

    async def decide(self, candidate: PromptVersion, current: PromptVersion) -> Decision | None:
        """Accept the candidate."""
        return Decision(accepted=True, policy=self.name, reason="every candidate is accepted")

    def __repr__(self) -> str:
        return "AcceptAll()"
