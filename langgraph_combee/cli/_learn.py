"""``combee learn``: learn a playbook from a JSONL file of traces or a LangSmith project."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from enum import Enum
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from langgraph_combee._algorithm.engine import BatchSize
from langgraph_combee._combee import Combee
from langgraph_combee._core.types import LearnReport, StepReport, Trace
from langgraph_combee._errors import LearningError
from langgraph_combee._learner.acceptance import AcceptAll, AcceptancePolicy, ManualApproval
from langgraph_combee._settings import AlgorithmSettings, LearnerSettings
from langgraph_combee._storage.keys import PromptSpace
from langgraph_combee.cli._common import (
    DEFAULT_STORE,
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
    PromptIdOpt,
    StoreOpt,
    TenantOpt,
    stderr,
    stdout,
    warn,
)
from langgraph_combee.cli._models import MODEL_HELP, resolve_model
from langgraph_combee.cli._render import counts, steps_table
from langgraph_combee.cli._store import open_store
from langgraph_combee.cli._traces import from_langsmith, read_jsonl

# Skipped lines reported one by one; past this many only their count is given.
MAX_LINE_WARNINGS = 20


class StrategyName(str, Enum):
    """Learning strategies ``combee learn`` offers."""

    combee = "combee"
    sequential = "sequential"
    naive = "naive"


class AcceptanceName(str, Enum):
    """Acceptance policies ``combee learn`` offers."""

    auto = "auto"
    manual = "manual"


def parse_batch_size(value: str) -> BatchSize:
    """Parse ``--batch-size``: ``auto`` or a positive integer.

    Raises:
        typer.BadParameter: For anything else (a usage error, exit code 2).
    """
    if value.strip() == "auto":
        return "auto"
    try:
        size = int(value)
    except ValueError:
        size = 0
    if size < 1:
        raise typer.BadParameter(
            f"{value!r} is not 'auto' or a positive integer", param_hint="'--batch-size'"
        )
    return size


def _policy(name: AcceptanceName) -> AcceptancePolicy:
    return ManualApproval() if name is AcceptanceName.manual else AcceptAll()


def _load(traces: str | None, project: str | None, limit: int | None) -> tuple[list[Trace], str]:
    if (traces is None) == (project is None):
        raise CliError("give either a TRACES file or --from-langsmith PROJECT", EXIT_USAGE)
    if project is not None:
        items = from_langsmith(project, limit=limit)
        if not items:
            raise CliError(f"LangSmith project {project!r} has no runs to learn from")
        return items, f"LangSmith project {project!r}"
    if limit is not None:
        raise CliError("--limit goes with --from-langsmith", EXIT_USAGE)
    assert traces is not None
    loaded = read_jsonl(traces)
    for error in loaded.errors[:MAX_LINE_WARNINGS]:
        warn(f"{traces}:{error.line}: skipped: {error.reason}")
    if len(loaded.errors) > MAX_LINE_WARNINGS:
        warn(f"{traces}: {len(loaded.errors) - MAX_LINE_WARNINGS} more line(s) skipped")
    if not loaded.traces:
        skipped = f" ({len(loaded.errors)} line(s) skipped)" if loaded.errors else ""
        raise CliError(f"no valid trace in {traces}{skipped}", EXIT_FAILED)
    return loaded.traces, traces


async def _learn(
    combee: Combee,
    items: Sequence[Trace],
    *,
    epochs: int,
    tenant: str | None,
    progress: Progress,
) -> LearnReport:
    task = progress.add_task("learning", total=len(items) * epochs)
    steps: list[StepReport] = []

    def on_step(report: StepReport) -> None:
        steps.append(report)
        progress.advance(task, report.batch_size)
        upcoming = combee.next_batch_size(tenant)
        progress.update(task, description=f"step {len(steps) + 1}: {upcoming} traces")

    progress.update(task, description=f"step 1: {combee.next_batch_size(tenant)} traces")
    try:
        report = await combee.alearn(items, epochs=epochs, tenant=tenant, on_step=on_step)
    except LearningError as exc:
        raise _StepFailed(steps, exc) from exc
    progress.update(task, description=f"{len(steps)} step(s) done")
    return report


class _StepFailed(Exception):
    def __init__(self, steps: list[StepReport], cause: LearningError) -> None:
        super().__init__(str(cause))
        self.steps = steps
        self.cause = cause


def _progress(disable: bool) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("traces"),
        TimeElapsedColumn(),
        console=stderr(),
        disable=disable,
    )


def learn(
    prompt_id: PromptIdOpt,
    model: Annotated[
        str,
        typer.Option("--model", "-m", envvar="COMBEE_MODEL", help=MODEL_HELP, show_default=False),
    ],
    traces: Annotated[
        str | None,
        typer.Argument(
            help="A JSONL file of traces, one Trace object a line ('-' reads standard input).",
            metavar="TRACES",
            show_default=False,
        ),
    ] = None,
    from_langsmith_project: Annotated[
        str | None,
        typer.Option(
            "--from-langsmith",
            metavar="PROJECT",
            help="Learn from a LangSmith project's runs instead of a file (\\[langsmith] extra).",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", min=1, help="With --from-langsmith: read at most this many (newest) runs."
        ),
    ] = None,
    strategy: Annotated[
        StrategyName, typer.Option("--strategy", help="How each step curates its reflections.")
    ] = StrategyName.combee,
    batch_size: Annotated[
        str,
        typer.Option(
            "--batch-size",
            "-b",
            help="Traces per step, or 'auto' to let the controller pick.",
        ),
    ] = "auto",
    acceptance: Annotated[
        AcceptanceName,
        typer.Option(
            "--acceptance",
            help="auto: every candidate goes live; manual: candidates wait for 'combee approve'.",
        ),
    ] = AcceptanceName.auto,
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Passes over the traces.")] = 1,
    seed: Annotated[int, typer.Option("--seed", help="Seed of Combee's shuffle.")] = 0,
    max_concurrency: Annotated[
        int, typer.Option("--max-concurrency", min=1, help="Most learner calls in flight.")
    ] = 16,
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="Do not draw the progress bar.")
    ] = False,
    tenant: TenantOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Learn a playbook from traces; each step writes a candidate version to the store."""
    size = parse_batch_size(batch_size)
    # Before the store opens: a bad id or tenant must not leave a new, empty file.
    PromptSpace(prompt_id, tenant)
    items, source = _load(traces, from_langsmith_project, limit)
    learner = resolve_model(model)
    with open_store(store, create=True) as opened:
        combee = Combee(
            prompt_id=prompt_id,
            model=learner,
            store=opened,
            strategy=strategy.value,
            batch_size=size,
            acceptance=_policy(acceptance),
            learner=LearnerSettings(max_concurrency=max_concurrency),
            algorithm=AlgorithmSettings(seed=seed),
        )
        with _progress(no_progress) as progress:
            try:
                report = asyncio.run(
                    _learn(combee, items, epochs=epochs, tenant=tenant, progress=progress)
                )
            except _StepFailed as failed:
                progress.stop()
                if failed.steps:
                    stdout().print(steps_table(failed.steps))
                raise CliError(
                    f"learning step {len(failed.steps) + 1} failed, nothing was written for "
                    f"it ({len(failed.steps)} earlier step(s) kept): {failed.cause}",
                    EXIT_FAILED,
                ) from None
        pending = [c.version for c in combee.registry(tenant).candidates()]
    _summarise(report, source, len(items), pending, store)


def _summarise(
    report: LearnReport, source: str, n_traces: int, pending: list[int], store: str
) -> None:
    console = stdout()
    console.print(steps_table(report.steps))
    totals = report.totals()
    console.print(
        f"learned from {n_traces} trace(s) of {source} in {totals['steps']} step(s): "
        f"{sum(totals['calls'].values())} calls ({counts(totals['calls'])}), "
        f"{totals['input_tokens']} + {totals['output_tokens']} tokens, "
        f"{totals['seconds']:.2f} s"
    )
    version = report.version
    console.print(
        f"version {version.version} is in force "
        f"({len(version.playbook.bullets)} bullets, {version.playbook.token_count()} tokens)"
    )
    if pending:
        listed = ", ".join(str(v) for v in pending)
        console.print(
            f"pending candidates: {listed}; review with 'combee show V' or 'combee diff A B', "
            "then 'combee approve V' or 'combee reject V'"
        )
    if store == "memory":
        warn("--store memory keeps nothing after this command; pass a file to keep versions")
