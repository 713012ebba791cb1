"""Opening the LangGraph store a connection string names.

* ``"memory"``: a new ``InMemoryStore`` (gone when the process ends);
* ``postgresql://...`` / ``postgres://...`` or libpq ``key=value`` pairs
  (``host=... dbname=...``): a ``PostgresStore`` (the ``[postgres]`` extra);
* ``sqlite:///path`` or any other value: a SQLite file through ``SqliteStore``
  (the ``[sqlite]`` extra).

Durable stores are set up (``setup()`` runs their migrations) before they are
handed out. A store that cannot be opened raises ``StoreError`` naming the
value, with any password masked; a missing extra raises ``MissingExtraError``
with the exact ``pip install`` line.
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

from langgraph_combee._errors import ConfigurationError, MissingExtraError, StoreError

MEMORY = "memory"
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_SQLITE_SCHEME = "sqlite:///"

# libpq's "key=value" connection strings start with one of its keywords.
_CONNINFO = re.compile(
    r"^\s*(host|hostaddr|port|dbname|user|password|passfile|options|sslmode|service"
    r"|connect_timeout|application_name)\s*="
)
_URL_PASSWORD = re.compile(r"(://[^:/@]*:)([^@]*)@")
_KV_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")
# Shorter passwords are not searched for in free text: they would mask unrelated words.
_MIN_SECRET = 3


def is_postgres(conn: str) -> bool:
    """Return True when ``conn`` is a PostgreSQL DSN (a URL or libpq ``key=value`` pairs)."""
    return conn.startswith(_POSTGRES_SCHEMES) or _CONNINFO.match(conn) is not None


def mask(conn: str, text: str | None = None) -> str:
    """Return ``text`` (default: ``conn``) with the password in ``conn`` replaced by ``***``."""
    found = _URL_PASSWORD.search(conn) or _KV_PASSWORD.search(conn)
    secret = found.group(2) if found else ""
    masked = _KV_PASSWORD.sub(
        r"\1***", _URL_PASSWORD.sub(r"\1***@", conn if text is None else text)
    )
    return masked.replace(secret, "***") if len(secret) >= _MIN_SECRET else masked


def sqlite_path(conn: str) -> Path:
    """Return the file a SQLite connection string names (``sqlite:///`` stripped, ``~`` expanded).

    Raises:
        StoreError: When the value names no file.
    """
    raw = conn[len(_SQLITE_SCHEME) :] if conn.startswith(_SQLITE_SCHEME) else conn
    if not raw.strip():
        raise StoreError(conn, "it names no file; give a path, 'memory' or a postgresql:// DSN")
    return Path(raw).expanduser()


@contextlib.contextmanager
def open_store(
    conn: str, *, create: bool = True, missing_hint: str = "pass create=True to make it"
) -> Iterator[BaseStore]:
    """Open the store ``conn`` names, set up and ready; close it when the block ends.

    Args:
        conn: ``"memory"``, a SQLite path (or ``sqlite:///path``) or a PostgreSQL DSN.
        create: Whether a missing SQLite file may be created. Readers pass False so
            that a mistyped path is reported instead of opening a new, empty store.
        missing_hint: What the error for a missing SQLite file tells the user to do.

    Yields:
        The store.

    Raises:
        ConfigurationError: When ``conn`` is not a string.
        StoreError: When the store cannot be opened (unreachable server, bad DSN,
            missing directory, a file that is not SQLite).
        MissingExtraError: When the backend's package is not installed.
    """
    if not isinstance(conn, str) or not conn.strip():
        raise ConfigurationError(
            "conn", conn, "'memory', a SQLite path (or sqlite:///path) or a postgresql:// DSN"
        )
    if conn == MEMORY:
        yield InMemoryStore()
    elif is_postgres(conn):
        with _open_postgres(conn) as store:
            yield store
    else:
        path = sqlite_path(conn)
        with _open_sqlite(path, conn, create=create, missing_hint=missing_hint) as store:
            yield store


@contextlib.contextmanager
def _open_sqlite(path: Path, conn: str, *, create: bool, missing_hint: str) -> Iterator[BaseStore]:
    try:
        from langgraph.store.sqlite import SqliteStore
    except ImportError as exc:
        raise MissingExtraError("sqlite", f"a SQLite store ({conn!r})") from exc
    if path.is_dir():
        raise StoreError(conn, f"{str(path)!r} is a directory")
    if not path.parent.is_dir():
        raise StoreError(conn, f"directory {str(path.parent)!r} does not exist")
    if not create and not path.exists():
        raise StoreError(
            conn,
            "the file does not exist",
            message=(f"store {conn!r} does not exist; {missing_hint}"),
        )
    if not create and not _is_store_file(path, conn):
        # setup() would create LangGraph's tables in someone else's database.
        raise StoreError(
            conn,
            "it is not a Combee store",
            message=(
                f"store {conn!r} is a SQLite file without LangGraph store tables, "
                "not a Combee store; it was left unchanged (pass --store to name a "
                "Combee store, or a new file to 'combee learn')"
            ),
        )
    with contextlib.ExitStack() as stack:
        try:
            store = stack.enter_context(SqliteStore.from_conn_string(str(path)))
            store.setup()
        except sqlite3.Error as exc:
            raise StoreError(conn, str(exc), kind="SQLite") from None
        yield store


def _is_store_file(path: Path, conn: str) -> bool:
    """Whether an existing SQLite file holds LangGraph store tables (read only, no writes)."""
    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        ) as db:
            found = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'store'"
            ).fetchone()
    except sqlite3.Error as exc:
        raise StoreError(conn, str(exc), kind="SQLite") from None
    return found is not None


@contextlib.contextmanager
def _open_postgres(conn: str) -> Iterator[BaseStore]:
    try:
        module = importlib.import_module("langgraph.store.postgres")
    except ImportError as exc:
        raise MissingExtraError("postgres", "a PostgreSQL store (postgresql://...)") from exc
    with contextlib.ExitStack() as stack:
        # The driver's errors (psycopg) are not importable without the extra, and
        # a bad DSN, a refused connection or a failed login all mean one thing here.
        try:
            store: BaseStore = stack.enter_context(module.PostgresStore.from_conn_string(conn))
            store.setup()  # type: ignore[attr-defined]
        except Exception as exc:
            # Drivers may quote the DSN in their errors: mask it there too.
            raise StoreError(mask(conn), mask(conn, str(exc)), kind="PostgreSQL") from None
        yield store


def open_owned(conn: str, *, create: bool = True) -> tuple[BaseStore, contextlib.ExitStack]:
    """Open ``conn`` outside a ``with`` block: the store and the stack that closes it.

    Raises:
        StoreError, MissingExtraError, ConfigurationError: As ``open_store``.
    """
    stack = contextlib.ExitStack()
    store = stack.enter_context(open_store(conn, create=create))
    return store, stack
