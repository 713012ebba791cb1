"""Choosing a role profile: ``roles="auto"`` and the values ``AlgorithmSettings.roles`` takes.

``AutoRoles`` starts with the profile the model suits (small for models known
to be small) and switches to the small one, once, when the full profile's
replies keep failing to parse or hitting their length limit.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlparse

from langchain_core.language_models import BaseChatModel

from langgraph_combee._algorithm.roles import (
    Aggregation,
    FullRoles,
    Labelled,
    RoleProfile,
    SmallRoles,
)
from langgraph_combee._core.ops import DeltaOp
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Reflection, Trace
from langgraph_combee._errors import ConfigurationError
from langgraph_combee._llm.calls import CallStats, LLMCaller

logger = logging.getLogger("langgraph_combee.learner")

"""The names ``AlgorithmSettings(roles=...)`` takes (or a ``RoleProfile`` instance)."""

_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*b\b", re.IGNORECASE)
SMALL_PARAMS_B = 8.0
"""Models of at most this many billion parameters (by their name) get the small profile."""
_LOOPBACK = ("localhost", "127.0.0.1", "::1", "0.0.0.0")


_NAME_ATTRS = ("model_name", "model", "model_id", "deployment_name")
_URL_ATTRS = ("openai_api_base", "base_url", "api_base", "endpoint")


def _first_text(model: BaseChatModel, attrs: tuple[str, ...]) -> str:
    """The first of ``attrs`` that ``model`` sets to a non-empty str ("" when none does).

    Chat model classes name the same setting differently (``model_name`` on
    ChatOpenAI, ``model`` on ChatAnthropic, ...).
    """
    for attr in attrs:
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return ""


def known_small(model: BaseChatModel) -> str | None:
    """Why ``model`` is known to be small, or None when nothing says so.

    Small: the bundled local model (``LocalChatOpenAI``); a name stating at
    most ``SMALL_PARAMS_B`` billion parameters (``qwen2.5:1.5b``,
    ``llama-3.2-3b-instruct``); an OpenAI-compatible server on loopback (a
    llama.cpp, Ollama or LM Studio server on the same machine) unless the name
    states a larger size.
    """
    if getattr(model, "local_model", None) is not None or type(model).__name__ == (
        "LocalChatOpenAI"
    ):
        return "the bundled local model"
    name = _first_text(model, _NAME_ATTRS)
    sizes = [float(m) for m in _SIZE.findall(name)]
    if sizes and min(sizes) <= SMALL_PARAMS_B:
        return f"model name {name!r} states {min(sizes):g}B parameters"
    host = urlparse(_first_text(model, _URL_ATTRS)).hostname or ""
    if host in _LOOPBACK and not sizes:
        return f"a server on loopback ({host}), as local llama.cpp / Ollama servers are"
    return None


SWITCH_MIN_UNUSABLE = 3
"""Unusable replies (unparsed or cut at the length limit) before ``AutoRoles`` may switch."""


@dataclass
class AutoRoles(RoleProfile):
    """The default: the profile the model suits, switching to small if full replies fail.

    Starts small for a model ``known_small`` says is small, full otherwise.
    While full, it counts unusable replies (unparsed after a repair, or cut at
    their length limit) against all calls; at ``SWITCH_MIN_UNUSABLE`` or more,
    making up at least half of the calls, it switches to the small profile for
    good, logs a warning and records why (``describe()``).
    """

    model: BaseChatModel
    current: RoleProfile = field(init=False)
    reason: str = field(init=False)
    switched: bool = field(init=False, default=False)
    _calls: int = field(init=False, default=0)
    _unusable: int = field(init=False, default=0)

    name: ClassVar[str] = "auto"

    def __post_init__(self) -> None:
        small = known_small(self.model)
        self.current = SmallRoles() if small else FullRoles()
        self.reason = small or "no sign of a small model"

    def active(self) -> RoleProfile:
        """The profile answering now."""
        return self.current

    def needs_reflection(self, trace: Trace) -> bool:
        """As the active profile says."""
        return self.current.needs_reflection(trace)

    async def reflect(
        self, caller: LLMCaller, trace: Trace, playbook: Playbook, stats: CallStats
    ) -> Reflection | None:
        """The active profile's reflection."""
        return await self.current.reflect(caller, trace, playbook, stats)

    async def curate(
        self,
        caller: LLMCaller,
        run_name: str,
        playbook: Playbook,
        group: Sequence[Labelled],
        stats: CallStats,
        *,
        token_budget: int | None,
    ) -> list[DeltaOp] | None:
        """The active profile's curator."""
        return await self.current.curate(
            caller, run_name, playbook, group, stats, token_budget=token_budget
        )

    async def aggregate(
        self,
        caller: LLMCaller,
        playbook: Playbook,
        proposals: Sequence[Sequence[DeltaOp]],
        labelled: Sequence[Labelled],
        stats: CallStats,
        *,
        token_budget: int | None,
    ) -> Aggregation:
        """The active profile's aggregator."""
        return await self.current.aggregate(
            caller, playbook, proposals, labelled, stats, token_budget=token_budget
        )

    def observe(self, stats: CallStats) -> None:
        """Count unusable replies of the full profile; switch to small when they dominate."""
        if self.switched or isinstance(self.current, SmallRoles):
            return
        self._calls += sum(stats.calls.values())
        self._unusable += sum(stats.unparsed.values()) + sum(stats.truncated.values())
        if self._unusable >= SWITCH_MIN_UNUSABLE and 2 * self._unusable >= self._calls:
            self.current = SmallRoles()
            self.switched = True
            self.reason = (
                f"switched from full: {self._unusable} of {self._calls} replies were unusable "
                "(unparsable or cut at their length limit)"
            )
            logger.warning("learner roles: %s; using the small-model profile", self.reason)

    def describe(self) -> dict[str, Any]:
        """The active profile, that it was chosen automatically, and why."""
        return {
            "profile": self.current.name,
            "chosen": "switched" if self.switched else "auto",
            "reason": self.reason,
        }


def make_roles(roles: object, model: BaseChatModel) -> RoleProfile:
    """The profile for a ``AlgorithmSettings(roles=...)`` setting.

    Raises:
        ConfigurationError: Not ``"auto"``, ``"full"``, ``"small"`` or a RoleProfile.
    """
    if isinstance(roles, RoleProfile):
        return roles
    if roles == "auto":
        return AutoRoles(model)
    if roles == "full":
        return FullRoles()
    if roles == "small":
        return SmallRoles()
    raise ConfigurationError("roles", roles, "'auto', 'full', 'small' or a RoleProfile")
