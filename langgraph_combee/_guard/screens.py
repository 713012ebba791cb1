"""One protocol for the guard's screens: what an op is checked against, what a verdict is.

``BulletGuard`` runs its screens in order on every op that writes text (ADD, UPDATE): first
the deterministic one (``guard.PatternScreen``: the pattern families of ``_guard/data``,
markup, provenance, policy changes, every-user rules), then, when it is given a chat model,
the LLM judge (``judge.JudgeScreen``). A screen answers with a ``ScreenVerdict``: allow,
hold for a person, or refuse, with reasons. The first refusal ends an op's screening (a
later screen is not asked); holds add up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from langgraph_combee._core.ops import Add, Update
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Trace
from langgraph_combee._llm.calls import CallStats, LLMCaller

if TYPE_CHECKING:
    from langgraph_combee._guard.provenance import Evidence

Action = Literal["allow", "hold", "refuse"]
ACTIONS: tuple[Action, ...] = ("allow", "hold", "refuse")


@dataclass(frozen=True, kw_only=True)
class ScreenVerdict:
    """A screen's answer about one op.

    Attributes:
        action: ``allow`` (the op may be applied), ``hold`` (a person must approve it) or
            ``refuse`` (it is quarantined).
        reasons: Why it is held or refused (at least one then; none for ``allow``).
        support: The trusted fields that support the op (``"ground_truth:<trace id>"``...),
            recorded on its bullet when it is applied.
        trust: What would make the untrusted fields its reasons name trusted
            (``QuarantinedOp.trust``), when a setting or a feedback call can.
    """

    action: Action = "allow"
    reasons: tuple[str, ...] = ()
    support: tuple[str, ...] = ()
    trust: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {self.action!r}")
        if not all(isinstance(r, str) for r in self.reasons):
            raise ValueError(f"reasons must be strings, got {self.reasons!r}")
        if self.action == "allow" and self.reasons:
            raise ValueError(f"an 'allow' verdict gives no reasons, got {self.reasons!r}")
        if self.action != "allow" and not self.reasons:
            raise ValueError(f"a {self.action!r} verdict needs at least one reason")

    @classmethod
    def of(
        cls,
        *,
        refuse: Sequence[str] = (),
        hold: Sequence[str] = (),
        support: Sequence[str] = (),
        trust: Sequence[str] = (),
    ) -> ScreenVerdict:
        """The verdict of a screen's findings: refuse if any refuse it, else hold if any hold
        it, else allow."""
        if refuse:
            return cls(
                action="refuse", reasons=tuple(refuse), support=tuple(support), trust=tuple(trust)
            )
        if hold:
            return cls(
                action="hold", reasons=tuple(hold), support=tuple(support), trust=tuple(trust)
            )
        return cls(support=tuple(support))


@dataclass(kw_only=True)
class ScreenContext:
    """What the ops of one screening are checked against.

    Attributes:
        traces: The traces the ops were learned from (None: screened without them, so no
            provenance check).
        playbook: The playbook the ops apply to (an UPDATE keeps its bullet's words).
        caller: The step's learner caller, whose settings, budget and callbacks an LLM screen
            shares; None outside a learning step.
        stats: The step's call accounting, which an LLM screen's calls join.
        evidence: The evidence gathered from each set of cited traces, shared by the ops of
            the screening.
        shared: What a screen keeps for all the ops of the screening, by its own key (the
            judge's call plumbing, built once).
    """

    traces: Sequence[Trace] | None = None
    playbook: Playbook | None = None
    caller: LLMCaller | None = None
    stats: CallStats = field(default_factory=CallStats)
    evidence: dict[tuple[str, ...], Evidence] = field(default_factory=dict)
    shared: dict[str, Any] = field(default_factory=dict)


class Screen(Protocol):
    """A check of the ops that write text, run by ``BulletGuard`` in order.

    Attributes:
        name: What the screen is called in logs and docs (``patterns``, ``judge``).
    """

    name: str

    async def ascreen(self, op: Add | Update, context: ScreenContext) -> ScreenVerdict:
        """The verdict on ``op``. May raise only for what must stop the whole step (a spent
        budget); a screen that cannot read an op refuses it."""
        ...
