"""``combee dead-letters``: list, retry or drop the traces the learner parked."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import typer
from rich.table import Table

from langgraph_combee._storage.dead_letters import DeadLetter
from langgraph_combee.cli._common import (
    DEFAULT_STORE,
    EXIT_USAGE,
    CliError,
    PromptIdOpt,
    StoreOpt,
    TenantOpt,
    stdout,
)
from langgraph_combee.cli._versions import open_combee

# Characters of a parked trace's input shown in the listing.
_INPUT_CHARS = 60


def _table(letters: list[DeadLetter]) -> Table:
    table = Table(title=f"{len(letters)} dead letter(s)")
    for column in ("trace", "attempts", "parked at (UTC)", "reason", "input"):
        table.add_column(column)
    for letter in letters:
        when = dt.datetime.fromtimestamp(letter.parked_at, dt.timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S"
        )
        text = " ".join(letter.trace.input.split())
        short = text if len(text) <= _INPUT_CHARS else text[: _INPUT_CHARS - 1] + "…"
        table.add_row(letter.trace_id, str(letter.attempts), when, letter.reason, short)
    return table


def dead_letters(
    prompt_id: PromptIdOpt,
    trace_ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="TRACE_ID",
            help="The parked traces to --retry or --drop.",
            show_default=False,
        ),
    ] = None,
    retry: Annotated[
        bool, typer.Option("--retry", help="Queue the given (or --all) parked traces again.")
    ] = False,
    drop: Annotated[
        bool, typer.Option("--drop", help="Give the given (or --all) parked traces up for good.")
    ] = False,
    every: Annotated[
        bool, typer.Option("--all", help="With --retry or --drop: every parked trace.")
    ] = False,
    tenant: TenantOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """List the traces the learner parked after they kept failing its steps; retry or drop them.

    A parked trace (a dead letter) failed learning steps on its own, e.g. refused
    by the provider's content filter. --retry puts it back in the queue with its
    attempts reset; --drop marks it done, never learned.
    """
    ids = list(trace_ids or [])
    if retry and drop:
        raise CliError("give --retry or --drop, not both", EXIT_USAGE)
    action = "retry" if retry else "drop" if drop else None
    if action is None and (ids or every):
        raise CliError("trace ids and --all go with --retry or --drop", EXIT_USAGE)
    if action is not None and bool(ids) == every:
        raise CliError(f"--{action} needs trace ids or --all (not both)", EXIT_USAGE)
    with open_combee(prompt_id, store) as combee:
        queue = combee.queue(tenant)
        if action is None:
            letters = queue.dead_letters()
            if not letters:
                stdout().print(f"prompt {prompt_id!r} has no dead letters")
                return
            stdout().print(_table(letters))
            return
        chosen = None if every else ids
        done = queue.retry_dead(chosen) if action == "retry" else queue.drop_dead(chosen)
    missing = sorted(set(ids) - set(done))
    verb = "queued again" if action == "retry" else "dropped"
    stdout().print(f"{len(done)} dead letter(s) {verb}: {', '.join(done) or '-'}")
    if missing:
        raise CliError(f"not parked (so not {verb}): {', '.join(missing)}")
