"""``combee steps``: the recent learning steps, newest first, each with its reasons."""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

import typer

from langgraph_combee._storage.steps import KEEP_STEPS, StepRecord
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


def line(record: StepRecord) -> str:
    """One step: when it ended (UTC), then its summary (traces, rules, reasons, version)."""
    return f"{record.at.strftime('%Y-%m-%d %H:%M:%S')}  {record.summary}"


def finite(value: Any) -> Any:
    """``value`` (parsed JSON) with every NaN or infinity as None: JSON has neither.

    A step record read from the store may hold one (a record another process or
    a hand wrote); ``json.dumps`` would print ``NaN``, which no JSON parser reads.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite(item) for item in value]
    return value


def steps(
    prompt_id: PromptIdOpt,
    limit: Annotated[
        int,
        typer.Option("--limit", "-n", help=f"Most steps listed (the store keeps {KEEP_STEPS})."),
    ] = 20,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON array of the step records instead.")
    ] = False,
    tenant: TenantOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """List the recent learning steps, newest first: what each learned and why not more.

    One line per step: when it ended, its traces, the rules proposed, written,
    held, refused and left out, the reasons counted ("left out by curator",
    "held: provenance", ...), and the version it wrote or why none was. Every
    process that learns on the store (learn(), the background learner, combee
    learn) keeps its last 100 steps here.
    """
    if limit < 1:
        raise CliError(f"--limit={limit!r} is not allowed: an int >= 1", EXIT_USAGE)
    with open_combee(prompt_id, store) as combee:
        records = combee.steps(limit, tenant=tenant)
    if as_json:
        dumped = [finite(r.model_dump(mode="json")) for r in records]
        typer.echo(json.dumps(dumped, indent=2, allow_nan=False))
        return
    if not records:
        stdout().print(f"prompt {prompt_id!r} has no learning steps recorded yet")
        return
    for record in records:
        stdout().print(line(record))
