"""The task contract: seeded examples with ground truth, a scorer, and an agent to run them.

A task is a family of inputs whose right answers follow company-specific rules
that no model can guess. ``rules`` is the hand-written text of those rules: put
in the system prompt, it is the ceiling a learned playbook aims at.
"""

from __future__ import annotations

import abc
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage

from langgraph_combee._core.types import Feedback
from langgraph_combee._errors import ConfigurationError

if TYPE_CHECKING:
    from langchain.agents.middleware import AgentMiddleware
    from langgraph.graph.state import CompiledStateGraph

    from langgraph_combee.testing import FunctionChatModel

__all__ = ["Example", "Rule", "Split", "Task", "clean_answer"]

Split = Literal["train", "test"]

_SPLITS = ("train", "test")
_FENCE = re.compile(r"```[\w+-]*")
_STRIP = "`*\"'“”‘’ \t\r\n"


@dataclass(frozen=True)
class Example:
    """One input with its right answer.

    Attributes:
        input: What the user sends the agent.
        answer: The right answer, in the task's canonical form.
        meta: Where the example came from: ``rule`` (the rule id it tests),
            ``template``, ``split``, and task-specific details.
    """

    input: str
    answer: str
    meta: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Rule:
    """One company rule of a task.

    Attributes:
        id: Short name of the rule (``"refunds"``).
        text: The hand-written rule, one line, as it appears in ``Task.rules``.
        keywords: Lower-case regular expressions naming the rule's topic; a line
            of a system prompt states this rule when it matches one of them and
            contains ``marker``.
        marker: What a line must also contain to state the rule (the team code,
            or the convention's key term).
    """

    id: str
    text: str
    keywords: tuple[str, ...]
    marker: str

    def matches(self, text: str) -> bool:
        """Whether ``text`` mentions this rule's topic (case-insensitive)."""
        lowered = text.lower()
        return any(re.search(keyword, lowered) for keyword in self.keywords)

    def stated_in(self, line: str) -> bool:
        """Whether one line of a system prompt states this rule."""
        return self.matches(line) and self.marker.lower() in line.lower()


def clean_answer(answer: str) -> str:
    """The first non-empty line of a reply, without fences, quotes, markup or a final period.

    Small models wrap short answers in code fences, bold or quotes; this keeps
    what is inside, upper-cased, with runs of whitespace collapsed.
    """
    lines = [line.strip(_STRIP) for line in _FENCE.sub("\n", answer).splitlines()]
    first = next((line for line in lines if line), "")
    first = first.rstrip(".!;").strip(_STRIP)
    return " ".join(first.upper().split())


class Task(abc.ABC):
    """A seeded, offline task generator with ground truth and a scorer.

    Subclasses define ``name``, ``description``, ``system_prompt``, the rules
    and ``_example``; everything else (balanced seeded sampling, prompts, the
    agent, the offline doubles) is shared.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    system_prompt: ClassVar[str]
    rules_heading: ClassVar[str] = "Company rules:"
    agent_max_tokens: ClassVar[int | None] = None
    """Reply budget the agent's model needs at least (None: keep the model's own)."""

    # ---- what a subclass provides ---------------------------------------

    @property
    @abc.abstractmethod
    def rule_set(self) -> tuple[Rule, ...]:
        """The task's rules, in a fixed order."""

    @abc.abstractmethod
    def _example(self, rule: Rule, rng: random.Random, split: Split) -> Example:
        """One example testing ``rule``, drawn with ``rng`` from ``split``'s material."""

    @abc.abstractmethod
    def normalise(self, answer: str) -> str:
        """The comparable form of an answer (the scorer compares these)."""

    @abc.abstractmethod
    def follow_rules(self, system_prompt: str, user_input: str) -> str:
        """What a model that obeys exactly the rules written in ``system_prompt`` answers.

        Used by the rule-following test double; never by scoring.
        """

    @abc.abstractmethod
    def insight(self, task_input: str, ground_truth: str | None, output: str) -> str:
        """The rule a good reflector would write after this run ("" if it was right)."""

    # ---- shared --------------------------------------------------------------

    @property
    def rules(self) -> str:
        """The hand-written rules as system-prompt text (the ceiling)."""
        return "\n".join([self.rules_heading, *(f"- {rule.text}" for rule in self.rule_set)])

    def rule(self, rule_id: str) -> Rule:
        """One rule by id.

        Raises:
            KeyError: No rule has that id.
        """
        for rule in self.rule_set:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)

    def examples(self, n: int, seed: int = 0, split: Split = "train") -> list[Example]:
        """``n`` examples, the same for the same ``(n, seed, split)``.

        Rules are covered evenly: each pass over the rules visits them all, in
        an order shuffled per pass. Train and test examples come from disjoint
        templates and details, so test inputs never repeat a train input.

        Args:
            n: How many examples (>= 0).
            seed: The seed; any int.
            split: ``"train"`` (what the agent serves and learns from) or
                ``"test"`` (held out, for evaluation).

        Raises:
            ConfigurationError: A bad ``n``, ``seed`` or ``split``.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigurationError("n", n, "an int >= 0")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigurationError("seed", seed, "an int")
        if split not in _SPLITS:
            raise ConfigurationError("split", split, "'train' or 'test'")
        rng = random.Random(f"{self.name}/{split}/{seed}")
        rules = list(self.rule_set)
        out: list[Example] = []
        order: list[Rule] = []
        while len(out) < n:
            if not order:
                order = rng.sample(rules, len(rules))
            out.append(self._example(order.pop(), rng, split))
        return out

    def score(self, answer: str, example: Example) -> bool:
        """Whether ``answer`` is right for ``example``, after ``normalise``."""
        return self.normalise(answer) == self.normalise(example.answer)

    def answer_of(self, result: Any) -> str:
        """The answer an agent run gave: the text of its last message."""
        messages = result.get("messages") if isinstance(result, dict) else None
        return str(messages[-1].text) if messages else ""

    def feedback(self, example: Example, answer: str) -> Feedback:
        """The feedback a run that answered ``answer`` to ``example`` gets: verdict and truth."""
        return Feedback(correct=self.score(answer, example), ground_truth=example.answer)

    def prompt(self, *, with_rules: bool = False) -> str:
        """The agent's system prompt, with the hand-written rules appended if asked."""
        if not with_rules:
            return self.system_prompt
        return f"{self.system_prompt}\n\n{self.rules}"

    def build_agent(
        self,
        model: BaseChatModel,
        *,
        middleware: Sequence[AgentMiddleware[Any, Any, Any]] = (),
        with_rules: bool = False,
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        """A ``create_agent`` agent for this task (no tools).

        Args:
            model: The agent's chat model.
            middleware: Middleware for ``create_agent``; put ``combee.middleware()`` first.
            with_rules: Append the hand-written rules to the system prompt.
        """
        from langchain.agents import create_agent

        return create_agent(
            self._agent_model(model),
            tools=[],
            system_prompt=self.prompt(with_rules=with_rules),
            middleware=list(middleware),
        )

    def _agent_model(self, model: BaseChatModel) -> BaseChatModel:
        """``model`` with at least ``agent_max_tokens`` of reply budget, when it has a cap."""
        budget = self.agent_max_tokens
        current = getattr(model, "max_tokens", None)
        if budget is None or not isinstance(current, int) or current >= budget:
            return model
        return model.model_copy(update={"max_tokens": budget})

    # ---- offline doubles -----------------------------------------------------

    def double_model(self) -> FunctionChatModel:
        """A test chat model that answers by ``follow_rules`` (its system prompt's rules)."""
        from langgraph_combee.testing import FunctionChatModel

        def reply(messages: Sequence[BaseMessage]) -> str:
            system = "\n".join(str(m.text) for m in messages if isinstance(m, SystemMessage))
            return self.follow_rules(system, str(messages[-1].text))

        return FunctionChatModel(reply)

    def double_learner(self) -> FunctionChatModel:
        """``fake_learner`` whose reflector writes this task's ``insight``."""
        from langgraph_combee.testing import fake_learner

        return fake_learner(insight=self.insight)

    def stated_rules(self, system_prompt: str) -> list[Rule]:
        """The rules some line of ``system_prompt`` states (see ``Rule.stated_in``)."""
        lines = system_prompt.splitlines()
        return [rule for rule in self.rule_set if any(rule.stated_in(line) for line in lines)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, rules={len(self.rule_set)})"
