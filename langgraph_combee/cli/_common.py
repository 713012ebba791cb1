"""What every command shares: the CLI's error type, the error guard, consoles, options.

Exit codes (also in ``docs/cli.md``):

* 0: success;
* 1: the operation failed (the registry refused it, a learning step failed, no
  such version, no valid trace in the input);
* 2: the command could not start (bad arguments, missing input file, a store
  that cannot be opened, a missing extra).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console

from langgraph_combee._errors import (
    CombeeError,
    ConfigurationError,
    MissingExtraError,
    StoreError,
)
from langgraph_combee._storage.open import mask

F = TypeVar("F", bound=Callable[..., Any])

try:  # the [postgres] extra: a store that fails after it was opened
    from psycopg import Error as _PsycopgError

    _POSTGRES_ERRORS: tuple[type[BaseException], ...] = (_PsycopgError,)
except ImportError:  # pragma: no cover - without the extra no PostgreSQL store opens
    _POSTGRES_ERRORS = ()

EXIT_FAILED = 1
EXIT_USAGE = 2

DEFAULT_STORE = "combee.db"


class CliError(Exception):
    """A failure reported to the user as one ``error: ...`` line, with an exit code.

    Args:
        message: What went wrong and, where possible, what to do about it.
        exit_code: ``EXIT_FAILED`` (1) or ``EXIT_USAGE`` (2).
    """

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def stdout() -> Console:
    """A console on standard output (created per call, so test runners can swap streams)."""
    # markup off: bullet ids such as "[oth-1]" and extras such as "[cli]" are text.
    return Console(markup=False, highlight=False, emoji=False, soft_wrap=True)


def stderr() -> Console:
    """A console on standard error, for progress, warnings and errors."""
    return Console(stderr=True, markup=False, highlight=False, emoji=False, soft_wrap=True)


def warn(message: str) -> None:
    """Print one ``warning: ...`` line on standard error."""
    typer.echo(f"warning: {message}", err=True)


def _validation_message(exc: ValidationError) -> str:
    errors = exc.errors()
    parts = [
        f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in errors[:3]
    ]
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return f"invalid {exc.title}: {'; '.join(parts)}{more}"


def _os_message(exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    return f"{reason}: {exc.filename}" if exc.filename else reason


def describe(exc: BaseException) -> tuple[str, int]:
    """Return the one-line message and the exit code for an expected failure."""
    if isinstance(exc, CliError):
        return exc.message, exc.exit_code
    if isinstance(exc, (ConfigurationError, MissingExtraError, StoreError)):
        return str(exc), EXIT_USAGE
    if isinstance(exc, CombeeError):
        return str(exc), EXIT_FAILED
    if isinstance(exc, FileNotFoundError):
        return f"file not found: {exc.filename or exc}", EXIT_USAGE
    if isinstance(exc, OSError):
        return _os_message(exc), EXIT_USAGE
    if isinstance(exc, ValidationError):
        return _validation_message(exc), EXIT_FAILED
    if isinstance(exc, sqlite3.Error):
        return f"SQLite store error: {exc}", EXIT_USAGE
    if isinstance(exc, _POSTGRES_ERRORS):
        # The server went away, or refused a query, after the store was opened.
        return f"PostgreSQL store error: {mask(str(exc))}", EXIT_FAILED
    raise TypeError(f"not an expected failure: {exc!r}")  # pragma: no cover


EXPECTED: tuple[type[BaseException], ...] = (
    CliError,
    CombeeError,
    OSError,
    ValidationError,
    sqlite3.Error,
    *_POSTGRES_ERRORS,
)
"""The failures a command reports as one line; anything else is a bug and keeps its traceback."""


def guard(fn: F) -> F:
    """Wrap a command so that expected failures print ``error: ...`` and exit non-zero."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EXPECTED as exc:
            message, code = describe(exc)
            # One line: some causes (init_chat_model's errors) span several.
            typer.echo(f"error: {' '.join(message.split())}", err=True)
            raise typer.Exit(code) from None

    return wrapper  # type: ignore[return-value]


# ---- options shared by several commands ---------------------------------
PromptIdOpt = Annotated[
    str,
    typer.Option(
        "--prompt-id",
        "-p",
        envvar="COMBEE_PROMPT_ID",
        help="The learned prompt's id (or set COMBEE_PROMPT_ID).",
        show_default=False,
    ),
]
TenantOpt = Annotated[
    str | None,
    typer.Option(
        "--tenant",
        envvar="COMBEE_TENANT",
        help="The tenant whose playbook to use (default: the shared one; or COMBEE_TENANT).",
    ),
]
StoreOpt = Annotated[
    str,
    typer.Option(
        "--store",
        "-s",
        envvar="COMBEE_STORE",
        help=(
            "Where versions live: a SQLite file path (or sqlite:///relative/path, "
            "sqlite:////absolute/path), 'memory' (forgotten on exit) or a "
            "postgresql:// DSN (or set COMBEE_STORE)."
        ),
    ),
]
ReasonOpt = Annotated[
    str,
    typer.Option("--reason", "-r", help="Why; recorded in the version's decision."),
]
