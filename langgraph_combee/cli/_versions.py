"""Commands that read and decide versions: versions, show, diff, approve, reject,
rollback, export."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from langgraph.store.base import BaseStore

from langgraph_combee._combee import Combee
from langgraph_combee._settings import ServingSettings
from langgraph_combee._storage.keys import ROOT, validate_label
from langgraph_combee.cli._common import (
    DEFAULT_STORE,
    EXIT_USAGE,
    CliError,
    PromptIdOpt,
    ReasonOpt,
    StoreOpt,
    TenantOpt,
    stderr,
    stdout,
)
from langgraph_combee.cli._render import (
    EMPTY_PLAYBOOK,
    markdown,
    metadata_table,
    quarantine_lines,
    versions_table,
)
from langgraph_combee.cli._store import mask, open_store

VersionArg = Annotated[
    int,
    typer.Argument(
        metavar="VERSION",
        help="A version number (0 is the initial, empty one).",
        show_default=False,
    ),
]
OptionalVersionArg = Annotated[
    int | None,
    typer.Argument(
        metavar="VERSION",
        help="A version number; default: the version in force.",
        show_default=False,
    ),
]


class ExportFormat(str, Enum):
    """What ``combee export`` writes."""

    md = "md"
    json = "json"


WORDS_ONLY = ServingSettings(focus_embedder=None)


@contextlib.contextmanager
def open_combee(prompt_id: str, store: str) -> Iterator[Combee]:
    """A ``Combee`` on an existing store that holds ``prompt_id`` (else a ``CliError``).

    Raises:
        ConfigurationError: When ``prompt_id`` cannot be a prompt id (``''``), as
            for ``--tenant``: a bad argument, not a prompt the store lacks.
    """
    validate_label("prompt_id", prompt_id)
    # Reading and deciding never create a store: a mistyped path should be an error.
    with open_store(store, create=False) as opened:
        known = _prompt_ids(opened)
        if prompt_id not in known:
            # A mistyped id would otherwise read as an empty prompt.
            held = ", ".join(repr(p) for p in known) if known else "no prompts yet"
            raise CliError(f"store {mask(store)!r} has no prompt {prompt_id!r}; it holds: {held}")
        # Reading and deciding serve no request: the focus embedder is never loaded.
        yield Combee(prompt_id=prompt_id, store=opened, serving=WORDS_ONLY)


def _prompt_ids(store: BaseStore) -> list[str]:
    """The prompt ids with any record in the store (versions, queue or lease)."""
    found = store.list_namespaces(prefix=(ROOT,), max_depth=2, limit=10_000)
    return sorted({ns[1] for ns in found if len(ns) >= 2})


def _version(version: int | None) -> None:
    if version is not None and version < 0:
        raise CliError(
            f"no version {version}: versions are numbered from 0 (the initial, empty "
            "playbook); 'combee versions' lists them",
            EXIT_USAGE,
        )


def versions(
    prompt_id: PromptIdOpt,
    tenant: TenantOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """List every version of a prompt: status, parent, size, edits and decision.

    The version in force is marked with '*'.
    """
    with open_combee(prompt_id, store) as combee:
        registry = combee.registry(tenant)
        head = registry.head()
        records = registry.history()
    if not records:
        stdout().print(
            f"prompt {prompt_id!r} has no versions yet; version 0 (empty playbook) is in force"
        )
        return
    stdout().print(versions_table(records, head.version))


def show(
    prompt_id: PromptIdOpt,
    version: OptionalVersionArg = None,
    tenant: TenantOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Show a version's metadata, its rendered playbook and the ops its guard stopped."""
    _version(version)
    with open_combee(prompt_id, store) as combee:
        head = combee.current(tenant=tenant)
        record = head if version is None else combee.get(version, tenant=tenant)
    console = stdout()
    console.print(metadata_table(record, head.version))
    console.print()
    console.print(record.render(ids=True) or EMPTY_PLAYBOOK)
    if record.quarantined:
        console.print()
        console.print(f"Quarantined ops ({len(record.quarantined)}), never applied:")
        for line in quarantine_lines(record):
            console.print(line, markup=False, highlight=False)
    if record.held:
        console.print()
        where = "in this candidate" if record.needs_approval else "in a separate candidate"
        console.print(
            f"Held for approval ({len(record.held)}), {where}; accept with `combee approve`:"
        )
        for line in quarantine_lines(record, held=True):
            console.print(line, markup=False, highlight=False)


def diff(
    prompt_id: PromptIdOpt,
    a: Annotated[int, typer.Argument(metavar="A", help="The earlier version.")],
    b: Annotated[int, typer.Argument(metavar="B", help="The later version.")],
    tenant: TenantOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Show what changed from version A's playbook to version B's, bullet by bullet.

    Lines start with '+' (added), '-' (removed), '~' (rewritten) or '#' (counters
    or provenance changed).
    """
    _version(a)
    _version(b)
    with open_combee(prompt_id, store) as combee:
        changes = combee.registry(tenant).diff(a, b)
    console = stdout()
    console.print(f"v{a} -> v{b}: {changes.summary()}")
    console.print(changes.render())


def approve(
    prompt_id: PromptIdOpt,
    version: VersionArg,
    reason: ReasonOpt = "approved",
    tenant: TenantOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Accept a pending candidate: it becomes the version in force."""
    _version(version)
    with open_combee(prompt_id, store) as combee:
        accepted = combee.approve(version, reason=reason, tenant=tenant)
    stdout().print(f"version {accepted.version} accepted; it is now in force")


def reject(
    prompt_id: PromptIdOpt,
    version: VersionArg,
    reason: ReasonOpt = "rejected",
    tenant: TenantOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Reject a pending candidate; the version in force does not change."""
    _version(version)
    with open_combee(prompt_id, store) as combee:
        rejected = combee.reject(version, reason=reason, tenant=tenant)
        head = combee.current(tenant=tenant)
    stdout().print(f"version {rejected.version} rejected; version {head.version} stays in force")


def rollback(
    prompt_id: PromptIdOpt,
    version: VersionArg,
    reason: ReasonOpt = "",
    tenant: TenantOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Put an accepted version's playbook back in force, as a new version.

    Nothing is deleted: the history keeps every version.
    """
    _version(version)
    with open_combee(prompt_id, store) as combee:
        restored = combee.rollback(version, reason=reason, tenant=tenant)
    stdout().print(f"rolled back to version {version}: version {restored.version} is now in force")


def export(
    prompt_id: PromptIdOpt,
    version: OptionalVersionArg = None,
    fmt: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            "-f",
            help="md: the rendered playbook under a metadata header; json: the full record.",
        ),
    ] = ExportFormat.md,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to this file instead of standard output."),
    ] = None,
    tenant: TenantOpt = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Export a version as Markdown or JSON (default: the version in force)."""
    _version(version)
    with open_combee(prompt_id, store) as combee:
        head = combee.current(tenant=tenant)
        record = head if version is None else combee.get(version, tenant=tenant)
    if fmt is ExportFormat.json:
        text = record.model_dump_json(indent=2) + "\n"
    else:
        text = markdown(record, head.version)
    if output is None:
        typer.echo(text, nl=False)
        return
    _write(output, text)
    stderr().print(f"wrote version {record.version} ({fmt.value}) to {output}")


def _write(output: Path, text: str) -> None:
    """Write ``text`` to ``output``, or raise a ``CliError`` saying why it cannot be."""
    if output.is_dir():
        raise CliError(f"cannot write {output}: it is a directory", EXIT_USAGE)
    if not output.parent.is_dir():
        raise CliError(
            f"cannot write {output}: directory '{output.parent}' does not exist", EXIT_USAGE
        )
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        reason = reason[:1].lower() + reason[1:]
        if exc.errno == errno.ENOENT:
            # A folder that takes no new files (/proc) answers "no such file"
            # although it exists (checked above): say so beside the system's words.
            reason += f" (directory '{output.parent}' exists but takes no new files)"
        raise CliError(f"cannot write {output}: {reason}", EXIT_USAGE) from None
