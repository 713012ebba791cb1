"""Opening the LangGraph store a connection string names.

* ``"memory"``: a new ``InMemoryStore`` (gone when the process ends);
* ``postgresql://...`` / ``postgres://...`` (also SQLAlchemy's
  ``postgresql+psycopg://...``, the driver suffix dropped: the store connects
  through psycopg 3) or libpq ``key=value`` pairs (``host=... dbname=...``): a
  ``PostgresStore`` (the ``[postgres]`` extra);
* ``sqlite:///path`` (SQLAlchemy's rule: ``sqlite:///rel/x.db`` is relative,
  ``sqlite:////abs/x.db`` absolute) or a plain path: a SQLite file through
  ``SqliteStore`` (the ``[sqlite]`` extra).

Anything else shaped like a URL (``scheme://...``: ``mysql://``,
``postgresql+asyncpg://``, ``sqlite://`` without a path, ``file:``) is refused,
never taken for a file name; so are paths holding control characters.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_combee._errors import ConfigurationError, MissingExtraError, StoreError

MEMORY = "memory"
_POSTGRES = ("postgresql", "postgres")
# The one driver each family is opened with (SQLAlchemy's name for it may follow
# a "+") and how to say so.
_DRIVERS = {"postgresql": "psycopg", "postgres": "psycopg", "sqlite": "pysqlite"}
_DRIVER_NAMES = {"psycopg": "psycopg 3", "pysqlite": "Python's sqlite3 (pysqlite)"}
SUPPORTED = (
    "'memory', a SQLite file path, sqlite:///relative/path or sqlite:////absolute/path, "
    "a postgresql:// or postgres:// URL (postgresql+psycopg:// too) or libpq "
    "'host=... dbname=...' pairs"
)

# An RFC 3986 scheme followed by "//": a URL, never a file name. Two characters
# at least, so that a Windows drive ("C://x") stays a path.
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# libpq's "key=value" connection strings start with one of its keywords.
_CONNINFO = re.compile(
    r"^\s*(host|hostaddr|port|dbname|user|password|passfile|options|sslmode|service"
    r"|connect_timeout|application_name)\s*="
)
# The password runs to the last "@" of the string: one written unencoded may hold "@", "/",
# "?" or "#", and masking too much only hides the host.
_URL_PASSWORD = re.compile(r"(://[^:/@]*:)(.*)@")
# An unquoted value runs to the next "key=" (libpq refuses spaces there, and quotes the rest).
_KV_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S.*?(?=\s+\w+\s*=|\s*$))")
# Shorter passwords are not searched for in free text: they would mask unrelated words.
_MIN_SECRET = 3


def is_postgres(conn: str) -> bool:
    """Return True when ``conn`` is a PostgreSQL DSN (a URL or libpq ``key=value`` pairs).

    Any ``postgresql+driver://`` URL counts, including drivers ``open_store`` refuses.
    """
    url = _URL.match(conn)
    if url is not None:
        return url.group(1).lower().partition("+")[0] in _POSTGRES
    return _CONNINFO.match(conn) is not None


def mask(conn: str, text: str | None = None) -> str:
    """Return ``text`` (default: ``conn``) with the password in ``conn`` replaced by ``***``."""
    found = _URL_PASSWORD.search(conn) or _KV_PASSWORD.search(conn)
    secret = found.group(2) if found else ""
    masked = _KV_PASSWORD.sub(
        r"\1***", _URL_PASSWORD.sub(r"\1***@", conn if text is None else text)
    )
    # A driver that splits the password at its own "@" or "/" quotes a piece of it.
    pieces = [secret, *re.split(r"[@/?#]", secret)]
    for piece in sorted(pieces, key=len, reverse=True):
        if len(piece) >= _MIN_SECRET:
            masked = masked.replace(piece, "***")
    return masked


@dataclass(frozen=True)
class Target:
    """What a connection string names, once parsed.

    Attributes:
        kind: Which backend opens it.
        dsn: For PostgreSQL, the DSN handed to the driver (driver suffix dropped).
        path: For SQLite, the file (``~`` expanded).
        note: For SQLite, what to add to a "does not exist" error (SQLAlchemy's
            relative-path rule), else empty.
    """

    kind: Literal["memory", "postgres", "sqlite"]
    dsn: str = ""
    path: Path | None = None
    note: str = ""


def parse(conn: str) -> Target:
    """Return what ``conn`` names, without opening anything.

    Raises:
        StoreError: When ``conn`` is a URL whose scheme or driver is not supported,
            a SQLite URI (``file:...``), a ``sqlite://`` URL without a path, names no
            file, or holds a control character. The error names the value, its
            password masked.
    """
    if conn == MEMORY:
        return Target("memory")
    if _CONNINFO.match(conn):
        # libpq allows any whitespace, line breaks included, between its pairs.
        return Target("postgres", dsn=conn)
    control = _CONTROL.search(conn)
    if control is not None:
        raise StoreError(
            mask(conn),
            f"it holds a control character ({control.group()!r} at index {control.start()}), "
            "which no path or URL may hold",
        )
    url = _URL.match(conn)
    if url is None:
        if conn[:5].lower() == "file:":
            raise _sqlite_uri(conn)
        return Target("sqlite", path=_file(conn, conn))
    scheme = url.group(1).lower()
    family, _, driver = scheme.partition("+")
    rest = conn[url.end() :]
    if family == "file":
        raise _sqlite_uri(conn)
    if family not in _DRIVERS:
        raise StoreError(mask(conn), f"unsupported scheme {scheme!r}; give {SUPPORTED}")
    if driver and driver != _DRIVERS[family]:
        known = _DRIVERS[family]
        tail = "/path" if family == "sqlite" else "..."
        raise StoreError(
            mask(conn),
            f"unsupported driver {driver!r}: the store connects through "
            f"{_DRIVER_NAMES[known]}; write {family}://{tail} (or {family}+{known}://{tail})",
        )
    if family in _POSTGRES:
        return Target("postgres", dsn=f"{family}://{rest}")
    if not rest.startswith("/"):
        raise StoreError(
            mask(conn),
            "a sqlite URL names its file after a third slash (sqlite:///relative/path, "
            "sqlite:////absolute/path); SQLAlchemy's in-memory 'sqlite://' is not "
            "supported: give 'memory' for a store that is not kept",
        )
    raw = rest[1:]
    path = _file(conn, raw)
    note = ""
    if not path.is_absolute():
        note = f"{conn} is a relative path {raw!r}; write sqlite:////{raw} for an absolute one"
    return Target("sqlite", path=path, note=note)


def _file(conn: str, raw: str) -> Path:
    if not raw.strip():
        raise StoreError(conn, f"it names no file; give {SUPPORTED}")
    return Path(raw).expanduser()


def _sqlite_uri(conn: str) -> StoreError:
    return StoreError(
        mask(conn),
        "SQLite URI filenames (file:...) are not supported; give the file's path, "
        "sqlite:///relative/path or sqlite:////absolute/path",
    )


def sqlite_path(conn: str) -> Path:
    """Return the file a SQLite connection string names (``sqlite:///`` stripped, ``~`` expanded).

    Raises:
        StoreError: When the value names no file, or names a store that is not SQLite.
    """
    target = parse(conn)
    if target.path is None:
        raise StoreError(mask(conn), "it does not name a SQLite file")
    return target.path


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
        raise ConfigurationError("conn", conn, SUPPORTED)
    target = parse(conn)
    if target.path is not None:
        with _open_sqlite(
            target.path, conn, create=create, missing_hint=missing_hint, note=target.note
        ) as store:
            yield store
    elif target.kind == "postgres":
        with _open_postgres(conn, target.dsn) as store:
            yield store
    else:
        yield InMemoryStore()


@contextlib.contextmanager
def _open_sqlite(
    path: Path, conn: str, *, create: bool, missing_hint: str, note: str
) -> Iterator[BaseStore]:
    try:
        from langgraph.store.sqlite import SqliteStore
    except ImportError as exc:
        raise MissingExtraError("sqlite", f"a SQLite store ({conn!r})") from exc
    if path.is_dir():
        raise StoreError(conn, f"{str(path)!r} is a directory")
    if not path.parent.is_dir():
        reason = f"directory {str(path.parent)!r} does not exist"
        raise StoreError(conn, f"{reason} ({note})" if note else reason)
    if not create and not path.exists():
        raise StoreError(
            conn,
            "the file does not exist",
            message=(
                f"store {conn!r} does not exist ({note}); {missing_hint}"
                if note
                else f"store {conn!r} does not exist; {missing_hint}"
            ),
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
def _open_postgres(conn: str, dsn: str) -> Iterator[BaseStore]:
    try:
        module = importlib.import_module("langgraph.store.postgres")
    except ImportError as exc:
        raise MissingExtraError("postgres", "a PostgreSQL store (postgresql://...)") from exc
    with contextlib.ExitStack() as stack:
        # The driver's errors (psycopg) are not importable without the extra, and
        # a bad DSN, a refused connection or a failed login all mean one thing here.
        try:
            store: BaseStore = stack.enter_context(module.PostgresStore.from_conn_string(dsn))
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
