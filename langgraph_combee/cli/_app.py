"""The ``combee`` application: every command registered on one ``typer.Typer``."""

from __future__ import annotations

from collections.abc import Sequence

import typer

from langgraph_combee.cli import _dead, _delegate, _learn, _steps, _versions
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
# Commands taking a VERSION read "-1" as that argument (refused with a clear
# message), not as an unknown option.
_NUMBERS = {"ignore_unknown_options": True}

app.command("versions")(guard(_versions.versions))
app.command("show", context_settings=_NUMBERS)(guard(_versions.show))
app.command("diff", context_settings=_NUMBERS)(guard(_versions.diff))
app.command("approve", context_settings=_NUMBERS)(guard(_versions.approve))
app.command("reject", context_settings=_NUMBERS)(guard(_versions.reject))
app.command("rollback", context_settings=_NUMBERS)(guard(_versions.rollback))
app.command("export", context_settings=_NUMBERS)(guard(_versions.export))
app.command("dead-letters")(guard(_dead.dead_letters))
app.command("steps")(guard(_steps.steps))
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
