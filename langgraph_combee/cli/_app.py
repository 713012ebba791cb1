"""The ``combee`` application: every command registered on one ``typer.Typer``."""

from __future__ import annotations

from collections.abc import Sequence

import typer

from langgraph_combee.cli import _delegate, _learn, _versions
from langgraph_combee.cli._common import guard

app = typer.Typer(
    name="combee",
    help=(
        "Learn, inspect and manage self-improving system prompts (langgraph-combee).\n\n"
        "Versions live in a store: a SQLite file (default ./combee.db), 'memory' or a "
        "PostgreSQL DSN; pick it with --store or COMBEE_STORE, and the prompt with "
        "--prompt-id or COMBEE_PROMPT_ID."
    ),
    no_args_is_help=True,
    # Help texts are rich markup: write extras as "\\[local]" so they stay visible.
    rich_markup_mode="rich",
    add_completion=False,
    # Locals may hold DSNs with passwords: never print them in a traceback.
    pretty_exceptions_show_locals=False,
)

app.command("demo", context_settings=_delegate.PASS_THROUGH)(guard(_delegate.demo))
app.command("learn")(guard(_learn.learn))
app.command("versions")(guard(_versions.versions))
app.command("show")(guard(_versions.show))
app.command("diff")(guard(_versions.diff))
app.command("approve")(guard(_versions.approve))
app.command("reject")(guard(_versions.reject))
app.command("rollback")(guard(_versions.rollback))
app.command("export")(guard(_versions.export))
app.command("bench", context_settings=_delegate.PASS_THROUGH)(guard(_delegate.bench))


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``combee`` with ``argv`` (default: ``sys.argv[1:]``) and return its exit code."""
    try:
        app(args=None if argv is None else list(argv), prog_name="combee")
    except SystemExit as exit_:
        code = exit_.code
        if code is None or isinstance(code, int):
            return code or 0
        typer.echo(str(code), err=True)
        return 1
    return 0
