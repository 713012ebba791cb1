"""``open_store(url)``: the LangGraph store a ``--store`` value names.

* ``memory``: a new ``InMemoryStore`` (forgotten when the command ends);
* ``postgresql://...`` / ``postgres://...`` or libpq ``key=value`` pairs
  (``host=... dbname=...``): a ``PostgresStore`` when
  ``langgraph-checkpoint-postgres`` is installed (the ``[postgres]`` extra);
* ``sqlite:///path`` or any other value: a SQLite file, through ``SqliteStore``.

A store that cannot be opened raises ``StoreError`` (exit code 2) with one line
naming the store and the reason; passwords in DSNs are masked.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_combee._errors import MissingExtraError
from langgraph_combee.cli._common import EXIT_USAGE, CliError

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_SQLITE_SCHEME = "sqlite:///"


class StoreError(CliError):
    """The store named by ``--store`` cannot be opened."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


# libpq's "key=value" connection strings start with one of its keywords.
_CONNINFO = re.compile(
    r"^\s*(host|hostaddr|port|dbname|user|password|passfile|options|sslmode|service"
    r"|connect_timeout|application_name)\s*="
)
_URL_PASSWORD = re.compile(r"(://[^:/@]*:)([^@]*)@")
_KV_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")
# Shorter passwords are not searched for in free text: they would mask unrelated words.
_MIN_SECRET = 3


def is_postgres(url: str) -> bool:
    """Return True when ``url`` is a PostgreSQL DSN (a URL or libpq ``key=value`` pairs)."""
    return url.startswith(_POSTGRES_SCHEMES) or _CONNINFO.match(url) is not None


def mask(url: str, text: str | None = None) -> str:
    """Return ``text`` (default ``url`` itself) with the password in ``url`` replaced by ``***``."""
    found = _URL_PASSWORD.search(url) or _KV_PASSWORD.search(url)
    secret = found.group(2) if found else ""
    masked = _KV_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", url if text is None else text))
    return masked.replace(secret, "***") if len(secret) >= _MIN_SECRET else masked


def sqlite_path(url: str) -> Path:
    """Return the file a SQLite ``--store`` value names (``sqlite:///`` stripped, ``~`` expanded).

    Raises:
        StoreError: When the value is empty.
    """
    raw = url[len(_SQLITE_SCHEME) :] if url.startswith(_SQLITE_SCHEME) else url
    if not raw.strip():
        raise StoreError(f"--store {url!r} names no file; give a path, 'memory' or a DSN")
    return Path(raw).expanduser()


@contextlib.contextmanager
def open_store(url: str, *, create: bool = True) -> Iterator[BaseStore]:
    """Open the store named by ``url`` for the duration of a command.

    Args:
        url: ``memory``, a SQLite path (or ``sqlite:///path``) or a PostgreSQL DSN.
        create: Whether a missing SQLite file may be created. Commands that only
            read or decide versions pass False, so a mistyped path is reported
            instead of silently opening a new, empty store.

    Yields:
        The store, set up and ready; it is closed when the block ends.

    Raises:
        StoreError: When the store cannot be opened.
        MissingExtraError: When the backend's package is not installed.
    """
    if url == "memory":
        yield InMemoryStore()
    elif is_postgres(url):
        with _open_postgres(url) as store:
            yield store
    else:
        with _open_sqlite(sqlite_path(url), url, create=create) as store:
            yield store


@contextlib.contextmanager
def _open_sqlite(path: Path, url: str, *, create: bool) -> Iterator[BaseStore]:
    try:
        from langgraph.store.sqlite import SqliteStore
    except ImportError as exc:
        raise MissingExtraError("sqlite", "a SQLite store (--store PATH)") from exc
    if path.is_dir():
        raise StoreError(f"cannot open store {url!r}: {str(path)!r} is a directory")
    if not path.parent.is_dir():
        raise StoreError(
            f"cannot open store {url!r}: directory {str(path.parent)!r} does not exist"
        )
    if not create and not path.exists():
        raise StoreError(
            f"store {url!r} does not exist; 'combee learn' creates it "
            "(or pass --store to name another)"
        )
    with contextlib.ExitStack() as stack:
        try:
            store = stack.enter_context(SqliteStore.from_conn_string(str(path)))
            store.setup()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {url!r}: {exc}") from None
        yield store


@contextlib.contextmanager
def _open_postgres(url: str) -> Iterator[BaseStore]:
    try:
        module = importlib.import_module("langgraph.store.postgres")
    except ImportError as exc:
        raise MissingExtraError(
            "postgres", "a PostgreSQL store (--store postgresql://...)"
        ) from exc
    with contextlib.ExitStack() as stack:
        # The driver's errors (psycopg) are not importable without the extra, and
        # a bad DSN, a refused connection or a failed login all mean one thing here.
        try:
            store: BaseStore = stack.enter_context(module.PostgresStore.from_conn_string(url))
            store.setup()  # type: ignore[attr-defined]
        except Exception as exc:
            reason = mask(url, str(exc))  # drivers may quote the DSN in their errors
            raise StoreError(f"cannot open PostgreSQL store {mask(url)!r}: {reason}") from None
        yield store
