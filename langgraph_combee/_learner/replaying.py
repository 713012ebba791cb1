"""The hook that runs verified adoption between a learning step and the acceptance policy.

``Combee`` holds one ``Replayer``. The middleware tells it about each of the
agent's model calls (``agent_calls``), so in the agent's own process replay
knows the agent's model, system prompt and tools with no setting; a learner
elsewhere is given them (``AlgorithmSettings(agent_model=..., agent_prompt=...)``). The
pure logic is in ``_adoption/adoption.py`` and ``_adoption/replay.py``; this
room decides whether it runs and makes sure it can never fail a step.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from langchain_core.callbacks import Callbacks
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage

from langgraph_combee._adoption.adoption import adopted_ops, record, verify
from langgraph_combee._adoption.replay import AgentCalls, ReplaySettings, ReplayTarget, make_scorer
from langgraph_combee._algorithm.strategies import StepResult
from langgraph_combee._core.evidence import ReplayReport
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.prompting import with_playbook
from langgraph_combee._core.types import Feedback, Trace
from langgraph_combee._llm.budget import LearnerBudget
from langgraph_combee._settings import ReplayMode

__all__ = ["ReplayMode", "Replayer"]

logger = logging.getLogger("langgraph_combee.replay")


class Replayer:
    """Decides whether a step's candidate is replayed, and replays it without ever raising.

    Args:
        settings: The settings objects one step's replays read (its mode:
            ``AlgorithmSettings.replay``; the agent's own prompt, when the
            learner is told it: ``AlgorithmSettings.agent_prompt``).
        evaluator: Returns the ``Combee``'s evaluator when asked (it may change).
        agent_model: The agent's chat model, when the learner is told it
            (``AlgorithmSettings.agent_model``, a name made a model).
    """

    def __init__(
        self,
        *,
        settings: ReplaySettings,
        evaluator: Callable[[], Callable[[Trace], Feedback | None] | None],
        agent_model: BaseChatModel | None = None,
    ) -> None:
        self.mode: ReplayMode = settings.algorithm.replay
        self.settings = settings
        self.agent_calls = AgentCalls()
        self._evaluator = evaluator
        self._model = agent_model
        self._prompt = settings.algorithm.agent_prompt

    def target(self) -> ReplayTarget | None:
        """The agent call to replay with: what the learner was told, else what the agent did."""
        seen = self.agent_calls.latest()
        model = self._model if self._model is not None else (seen.model if seen else None)
        if model is None:
            return None
        system = SystemMessage(content=self._prompt) if self._prompt is not None else None
        if seen is None:
            return ReplayTarget(model=model, system=system)
        return dataclasses.replace(
            seen, model=model, system=system if system is not None else seen.system
        )

    def _off_reason(self, target: ReplayTarget | None) -> str | None:
        if self.mode is False:
            return "off (replay=False)"
        if target is None:
            return (
                "off: the agent's model is unknown (no agent model call through the "
                "middleware in this process, and no agent_model)"
            )
        if self.mode == "auto" and self._evaluator() is None:
            return "off: no evaluator (replay='auto' needs one; replay=True scores by ground truth)"
        return None

    async def __call__(
        self,
        before: Playbook,
        result: StepResult,
        traces: Sequence[Trace],
        *,
        version: int,
        callbacks: Callbacks = None,
        budget: LearnerBudget | None = None,
    ) -> StepResult:
        """``result`` with its unearned rules dropped and its evidence recorded.

        Never raises: a replay that cannot run leaves the result as it was (its
        rules unverified) and says why in ``result.report.replay``.
        """
        target = self.target()
        reason = self._off_reason(target)
        if reason is not None:
            result.report.replay = ReplayReport(enabled=False, reason=reason)
            return result
        assert target is not None
        try:
            playbook, report = await verify(
                before=before,
                candidate=result.playbook,
                traces=traces,
                target=target,
                score=make_scorer(self._evaluator()),
                render=with_playbook,
                settings=self.settings,
                version=version,
                callbacks=callbacks,
                budget=budget,
            )
        except Exception as exc:  # a replay bug must never cost the step its result
            logger.exception("replay failed; the candidate goes on unverified")
            result.report.replay = ReplayReport(enabled=False, reason=f"failed: {exc!r}")
            return result
        record(result.report, report)
        if report.dropped:
            logger.info(
                "replay dropped %d rule(s): %s",
                len(report.dropped),
                "; ".join(f"{r.bullet_id} ({r.evidence.reason})" for r in report.dropped),
            )
        ops = adopted_ops(result.ops, result.playbook, report.rules)
        return dataclasses.replace(result, playbook=playbook, ops=ops)
