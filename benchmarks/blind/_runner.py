"""Score one family's four arms the way a user of the package would, on its public API.

Arms, each scored on the held-out inputs:

* ``no_rules``: the app's own system prompt;
* ``hand_rules``: the prompt plus the rules an engineer wrote;
* ``few_shot``: the prompt plus the 4 training runs closest to the input, picked by
  LangChain's ``SemanticSimilarityExampleSelector`` over an ``InMemoryVectorStore``
  with the package's ``LocalEmbedder``;
* ``learned``: the training inputs run through an agent with ``combee.middleware()``,
  feedback given with ``combee.feedback`` as the app would, then the background
  learner with Combee's defaults until the queue is empty (one pass), then the
  held-out inputs through the same agent.

Every arm's agent carries a Combee middleware, so that a tool call the small model
writes as text runs in every arm (the first three arms use a serve-only ``Combee``
whose playbook stays empty): the arms differ by their system prompt alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.embeddings import Embeddings
from langchain_core.example_selectors import SemanticSimilarityExampleSelector
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_tool
from langchain_core.vectorstores import InMemoryVectorStore

from benchmarks.blind._family import Call, Example, Family, Outcome
from langgraph_combee import (
    AlgorithmSettings,
    BulletGuard,
    Combee,
    LearnerSettings,
    ServingSettings,
)
from langgraph_combee._algorithm import stages

ARMS = ("no_rules", "hand_rules", "few_shot", "learned")
FEW_SHOT_K = 4
RECURSION_LIMIT = 12
QUICK_TRAIN = 4
QUICK_HELDOUT = 3


class EmbedderEmbeddings(Embeddings):
    """A LangChain ``Embeddings`` over anything with ``embed(texts) -> vectors``."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(vector) for vector in self._embedder.embed(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        return list(self._embedder.embed([text])[0])


class HashEmbeddings(Embeddings):
    """Deterministic bag-of-words vectors for the offline quick mode (no weights)."""

    dimensions = 64

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in text.lower().split():
            digest = hashlib.sha256(word.encode()).digest()
            vector[digest[0] % self.dimensions] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class CallCounter(BaseCallbackHandler):
    """Counts a chat model's calls and tokens (a plain LangChain callback on the client)."""

    def __init__(self) -> None:
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        self.calls += 1
        for generations in response.generations:
            for generation in generations:
                if isinstance(generation, ChatGeneration) and isinstance(
                    generation.message, AIMessage
                ):
                    usage: dict[str, Any] = dict(generation.message.usage_metadata or {})
                    self.input_tokens += int(usage.get("input_tokens", 0))
                    self.output_tokens += int(usage.get("output_tokens", 0))

    def snapshot(self) -> dict[str, int]:
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


@dataclass
class Setup:
    """The models an arm uses and how it is paced."""

    agent_model: BaseChatModel
    learner_model: BaseChatModel
    embeddings: Embeddings
    parallel: int
    quick: bool
    describe: dict[str, Any]
    learn_timeout: float
    close: Callable[[], None]
    learner_calls: CallCounter
    examples: int = 0
    embedder: Any = None
    without: tuple[str, ...] = ()
    trusted_tools: tuple[str, ...] = ()
    focus_by_meaning: bool = False

    def combee(self, prompt_id: str, *, learner: bool) -> Combee:
        """A Combee with the package defaults (faster pacing on the offline doubles)."""
        combee = self._combee(prompt_id, learner=learner)
        if self.without:
            ablate(combee, self.without)
        return combee

    def _combee(self, prompt_id: str, *, learner: bool) -> Combee:
        model = self.learner_model if learner else None
        # Worked examples are the one setting a run may change (``--examples``); they are
        # served as the turns closest to the request by meaning, with the embedder the
        # few-shot arm picks its runs with (the serving side's ``focus_embedder``).
        algorithm = AlgorithmSettings(examples=self.examples) if self.examples else None
        serving: dict[str, Any] = {}
        if (self.examples or self.focus_by_meaning) and self.embedder is not None:
            serving["focus_embedder"] = self.embedder
        # The app's own tools trusted, as docs/security.md tells a deployer (``--trust-tools``).
        guard: dict[str, Any] = (
            {"guard": BulletGuard(trusted_tools=list(self.trusted_tools))}
            if self.trusted_tools
            else {}
        )
        if not self.quick:
            settings = ServingSettings(**serving) if serving else None
            return Combee(
                prompt_id=prompt_id, model=model, algorithm=algorithm, serving=settings, **guard
            )
        return Combee(
            prompt_id=prompt_id,
            model=model,
            algorithm=algorithm,
            serving=ServingSettings(refresh_seconds=0.1, **serving),
            learner=LearnerSettings(poll_seconds=0.05, max_wait_seconds=0.1),
            **guard,
        )

    @property
    def refresh_seconds(self) -> float:
        return 0.1 if self.quick else ServingSettings().refresh_seconds


def ablate(combee: Combee, names: Sequence[str]) -> None:
    """Leave the stages ``names`` out of ``combee``'s learning steps (an ablation).

    Combee has no public setting for the step's order: the ablations the
    benchmarks measure (does a stage pay on a task it was not tuned on?) set
    it on the engine's context, as ``learn()``'s strategies take it.
    """
    engine = combee._engine(None)
    engine.context = dataclasses.replace(
        engine.context, stages=stages.without(engine.context.stages, *names)
    )


def real_setup(*, threads: int | None, learn_timeout: float) -> Setup:
    """The bundled 1.5B model on loopback, plain ``ChatOpenAI`` clients, ``LocalEmbedder``."""
    from langchain_openai import ChatOpenAI

    from langgraph_combee.local import LocalEmbedder, LocalModel

    local = LocalModel("1.5b", threads=threads)
    counter = CallCounter()
    embedder = LocalEmbedder()

    def chat(callbacks: list[BaseCallbackHandler] | None = None) -> ChatOpenAI:
        return ChatOpenAI(
            base_url=local.base_url,
            api_key="local",
            model=local.model_name,
            max_tokens=256,
            temperature=0,
            timeout=600,
            callbacks=callbacks,
        )

    return Setup(
        agent_model=chat(),
        learner_model=chat([counter]),
        embeddings=EmbedderEmbeddings(embedder),
        parallel=4,
        quick=False,
        describe={
            "model": f"{local.model_name} (bundled 1.5B, llama.cpp on loopback, 4 slots)",
            "client": "langchain_openai.ChatOpenAI(max_tokens=256, temperature=0)",
            "threads": threads,
            "embedder": "langgraph_combee.local.LocalEmbedder",
        },
        learn_timeout=learn_timeout,
        close=local.close,
        learner_calls=counter,
        embedder=embedder,
    )


def _fake_agent(family: Family) -> BaseChatModel:
    from langgraph_combee.testing import FunctionChatModel

    def reply(messages: list[BaseMessage]) -> str | AIMessage:
        if family.tools and isinstance(messages[-1], HumanMessage):
            tool = family.tools[0]
            names = tool.__code__.co_varnames[: tool.__code__.co_argcount]
            call = {"name": tool.__name__, "args": {n: "x" for n in names}, "id": "call-1"}
            return AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}])
        return "done"

    return FunctionChatModel(reply)


def quick_setup(family: Family) -> Setup:
    """Offline doubles from ``langgraph_combee.testing``: checks the pipeline, not quality."""
    from langgraph_combee.testing import fake_learner

    counter = CallCounter()
    learner = fake_learner()
    learner.callbacks = [counter]
    return Setup(
        agent_model=_fake_agent(family),
        learner_model=learner,
        embeddings=HashEmbeddings(),
        parallel=2,
        quick=True,
        describe={"model": "langgraph_combee.testing doubles (quick mode)"},
        learn_timeout=20.0,
        close=lambda: None,
        learner_calls=counter,
    )


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def run_one(agent: Any, text: str, *, run_id: uuid.UUID | None = None) -> Outcome:
    """One agent run; an error is part of the outcome (the run scores 0), never raised."""
    config: dict[str, Any] = {"recursion_limit": RECURSION_LIMIT}
    if run_id is not None:
        config["run_id"] = run_id
    try:
        result = agent.invoke({"messages": [{"role": "user", "content": text}]}, config=config)
    except Exception as exc:  # a failed run is scored, not fatal
        return Outcome(text="", error=f"{type(exc).__name__}: {exc}"[:2000])
    messages = result["messages"]
    calls = tuple(
        Call(name=call["name"], args={k: _as_text(v) for k, v in call["args"].items()})
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    )
    last = messages[-1]
    return Outcome(text=last.text if isinstance(last, AIMessage) else "", calls=calls)


def _record(family: Family, example: Example, outcome: Outcome) -> dict[str, Any]:
    return {
        "input": example.input,
        "kind": example.kind,
        "score": family.score(example, outcome),
        "output": outcome.text[:400],
        "calls": [call.render()[:300] for call in outcome.calls],
        "error": outcome.error,
    }


_TOOLS: dict[str, list[BaseTool]] = {}
_TOOLS_LOCK = threading.Lock()


def _tools(family: Family) -> list[BaseTool]:
    """The family's tools, built once: building a tool's schema from a function goes through
    a ``warnings.catch_warnings`` block, which is not thread-safe, and the arms build their
    agents in worker threads.

    A tool that refuses a call raises LangChain's ``ToolException``; as an app does with
    ``handle_tool_error=True``, its message goes back to the model as an error result
    (``status="error"``, the trace's tool error) instead of ending the run."""
    with _TOOLS_LOCK:
        if family.name not in _TOOLS:
            built = [as_tool(f) for f in family.tools]
            for tool in built:
                tool.handle_tool_error = True
            _TOOLS[family.name] = built
        return _TOOLS[family.name]


def _agent(setup: Setup, family: Family, prompt: str, middleware: Any) -> Any:
    return create_agent(
        setup.agent_model, _tools(family), system_prompt=prompt, middleware=[middleware]
    )


def score_set(
    family: Family,
    examples: Sequence[Example],
    agent_for: Callable[[Example], Any],
    *,
    parallel: int,
) -> list[dict[str, Any]]:
    """Run every example (``parallel`` at a time) and record its score."""

    def one(example: Example) -> dict[str, Any]:
        return _record(family, example, run_one(agent_for(example), example.input))

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return list(pool.map(one, examples))


def _summary(items: list[dict[str, Any]], started: float) -> dict[str, Any]:
    return {
        "score": sum(item["score"] for item in items) / len(items) if items else 0.0,
        "seconds": round(time.monotonic() - started, 1),
        "errors": sum(1 for item in items if item["error"]),
        "items": items,
    }


@contextlib.contextmanager
def _serve_only(setup: Setup, prompt_id: str) -> Iterator[Any]:
    combee = setup.combee(prompt_id, learner=False)
    try:
        yield combee.middleware(capture=False)
    finally:
        combee.close()


def few_shot_prompt(family: Family, chosen: Sequence[dict[str, str]]) -> str:
    """The app's prompt followed by the chosen training runs with their right answers."""
    label = "Right tool calls" if family.tools else "Right answer"
    shots = "\n\n".join(f"Request: {ex['input']}\n{label}: {ex['output']}" for ex in chosen)
    return f"{family.system_prompt}\n\nExamples of requests handled correctly:\n\n{shots}"


def arm_prompted(
    setup: Setup, family: Family, heldout: Sequence[Example], prompt: str, arm: str
) -> dict[str, Any]:
    """Score the held-out set under one fixed system prompt."""
    started = time.monotonic()
    with _serve_only(setup, f"blind-{family.name}-{arm}") as middleware:
        agent = _agent(setup, family, prompt, middleware)
        items = score_set(family, heldout, lambda _: agent, parallel=setup.parallel)
    return _summary(items, started)


def arm_few_shot(
    setup: Setup, family: Family, train: Sequence[Example], heldout: Sequence[Example]
) -> dict[str, Any]:
    """Score the held-out set with the k closest training runs in the prompt."""
    started = time.monotonic()
    selector = SemanticSimilarityExampleSelector.from_examples(
        [{"input": ex.input, "output": ex.answer} for ex in train],
        setup.embeddings,
        InMemoryVectorStore,
        k=FEW_SHOT_K,
        input_keys=["input"],
    )
    with _serve_only(setup, f"blind-{family.name}-few-shot") as middleware:

        def agent_for(example: Example) -> Any:
            chosen = selector.select_examples({"input": example.input})
            return _agent(setup, family, few_shot_prompt(family, chosen), middleware)

        items = score_set(family, heldout, agent_for, parallel=setup.parallel)
    return _summary(items, started)


def _wait_for_empty_queue(combee: Combee, timeout: float, poll: float) -> bool:
    queue = combee.queue()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        backlog = queue.backlog()
        if backlog.get("pending", 0) == 0 and backlog.get("claimed", 0) == 0:
            return True
        time.sleep(poll)
    return False


def arm_learned(
    setup: Setup, family: Family, train: Sequence[Example], heldout: Sequence[Example]
) -> dict[str, Any]:
    """Train through the instrumented agent with feedback, learn one pass, score held-out."""
    started = time.monotonic()
    combee = setup.combee(f"blind-{family.name}", learner=True)
    try:
        agent = _agent(setup, family, family.system_prompt, combee.middleware())

        def train_one(example: Example) -> dict[str, Any]:
            run_id = uuid.uuid4()
            outcome = run_one(agent, example.input, run_id=run_id)
            record = _record(family, example, outcome)
            record["feedback"] = family.feedback(example, outcome)
            # An empty dict is a run nobody gave feedback on, as in production: nothing is
            # sent and the learner takes the run as it is.
            record["feedback_taken"] = (
                combee.feedback(run_id, **record["feedback"]) if record["feedback"] else None
            )
            return record

        with ThreadPoolExecutor(max_workers=setup.parallel) as pool:
            training = list(pool.map(train_one, train))
        train_seconds = time.monotonic() - started
        combee.flush()
        calls_before = setup.learner_calls.snapshot()
        learn_started = time.monotonic()
        combee.start()
        emptied = _wait_for_empty_queue(combee, setup.learn_timeout, 0.05 if setup.quick else 2.0)
        combee.stop()
        learn_seconds = time.monotonic() - learn_started
        version = combee.current()
        # The agent side reads HEAD on its refresh interval: let it catch up before scoring.
        time.sleep(setup.refresh_seconds + 0.5)
        heldout_started = time.monotonic()
        turns_before = _served_turns(combee)
        items = score_set(family, heldout, lambda _: agent, parallel=setup.parallel)
        result = _summary(items, started)
        # Worked examples served as turns while scoring held-out (0 without ``--examples``).
        serving = combee.describe()["serving"]
        result["example_turns"] = {
            "served": _served_turns(combee) - turns_before,
            "by_meaning": int(serving.get("examples_by_meaning", 0)),
            "kept": sum(1 for b in version.playbook.bullets if b.section == "worked_examples"),
        }
        result.update(
            {
                "train_seconds": round(train_seconds, 1),
                "learn_seconds": round(learn_seconds, 1),
                "heldout_seconds": round(time.monotonic() - heldout_started, 1),
                "queue_emptied": emptied,
                "training_score": sum(r["score"] for r in training) / max(len(training), 1),
                "training": training,
                "version": version.version,
                "versions": len(combee.history()),
                "rules": version.render(),
                "learner_calls": {
                    key: value - calls_before[key]
                    for key, value in setup.learner_calls.snapshot().items()
                },
                "describe": json.loads(json.dumps(combee.describe(), default=str)),
            }
        )
        return result
    finally:
        combee.close()


def _served_turns(combee: Combee) -> int:
    return int(combee.describe()["serving"].get("example_turns", 0))


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            check=False,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (a cut-off run keeps the last whole file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def fraction_of_gain(arms: dict[str, dict[str, Any]]) -> float | None:
    """(learned - no rules) / (hand rules - no rules); None when there is no gain on offer."""
    try:
        a, b, d = (arms[name]["score"] for name in ("no_rules", "hand_rules", "learned"))
    except KeyError:
        return None
    return round((d - a) / (b - a), 3) if b > a else None


def run_family(
    family: Family,
    *,
    out: Path,
    quick: bool = False,
    arms: Sequence[str] = ARMS,
    threads: int | None = None,
    learn_timeout: float = 1200.0,
    argv: Sequence[str] = (),
    log: Callable[[str], None] = print,
    examples: int = 0,
    without: Sequence[str] = (),
    trust_tools: bool = False,
    focus_by_meaning: bool = False,
) -> dict[str, Any]:
    """Score the arms of one family, writing ``out`` after each arm; return the record.

    ``without`` names learning-step stages to leave out of the learned arm (an
    ablation; ``stages.STEP_STAGES`` lists them). ``trust_tools`` lists the
    family's own tools in the guard's ``trusted_tools`` (they are the app's code);
    ``focus_by_meaning`` gives the serving side the embedder the few-shot arm uses.
    """
    unknown = [arm for arm in arms if arm not in ARMS]
    if unknown:
        raise ValueError(f"unknown arms {unknown!r}; allowed: {', '.join(ARMS)}")
    stages.without(stages.STEP_STAGES, *without)  # a misspelt stage fails here, not mid-run
    train = family.train[:QUICK_TRAIN] if quick else family.train
    heldout = family.heldout[:QUICK_HELDOUT] if quick else family.heldout
    record: dict[str, Any] = {
        "family": family.name,
        "title": family.title,
        "sealed": family.sealed,
        "quick": quick,
        "feedback": family.feedback_kind,
        "train_size": len(train),
        "heldout_size": len(heldout),
        "command": " ".join(["python", "-m", "benchmarks.blind", *argv]),
        "commit": _commit(),
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "examples": examples,
        "without": list(without),
        "trusted_tools": [tool.__name__ for tool in family.tools] if trust_tools else [],
        "focus_by_meaning": focus_by_meaning,
        "arms": {},
        "fraction_of_gain": None,
    }
    write_json(out, record)
    started = time.monotonic()
    try:
        setup = (
            quick_setup(family)
            if quick
            else real_setup(threads=threads, learn_timeout=learn_timeout)
        )
        setup.examples = examples
        setup.without = tuple(without)
        setup.trusted_tools = tuple(record["trusted_tools"])
        setup.focus_by_meaning = focus_by_meaning
    except Exception:  # kept in the record
        record["failure"] = {"stage": "setup", "traceback": traceback.format_exc()}
        write_json(out, record)
        raise
    record["setup"] = setup.describe
    record["setup_seconds"] = round(time.monotonic() - started, 1)
    try:
        for arm in arms:
            log(f"[{family.name}] arm {arm} ...")
            arm_started = time.monotonic()
            try:
                if arm == "no_rules":
                    result = arm_prompted(setup, family, heldout, family.system_prompt, arm)
                elif arm == "hand_rules":
                    prompt = f"{family.system_prompt}\n\n{family.rules}"
                    result = arm_prompted(setup, family, heldout, prompt, arm)
                elif arm == "few_shot":
                    result = arm_few_shot(setup, family, train, heldout)
                else:
                    result = arm_learned(setup, family, train, heldout)
            except Exception:  # a failing arm is recorded, the others still run
                result = {
                    "score": None,
                    "seconds": round(time.monotonic() - arm_started, 1),
                    "failure": traceback.format_exc(),
                }
            record["arms"][arm] = result
            record["fraction_of_gain"] = fraction_of_gain(record["arms"])
            write_json(out, record)
            log(f"[{family.name}] {arm}: score {result['score']} in {result['seconds']} s")
            if "example_turns" in result:
                log(f"[{family.name}] {arm}: worked examples {result['example_turns']}")
    finally:
        setup.close()
    record["seconds"] = round(time.monotonic() - started, 1)
    write_json(out, record)
    return record
