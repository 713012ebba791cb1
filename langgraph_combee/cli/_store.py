"""``open_store(url)``: the LangGraph store a ``--store`` value names.

The parsing and opening live in the library (``langgraph_combee._storage.open``,
also behind ``Combee.from_conn_string``); this module adds the CLI's wording:

* ``memory``: a new ``InMemoryStore`` (forgotten when the command ends);
* ``postgresql://...`` / ``postgres://...`` (or ``postgresql+psycopg://...``) or
  libpq ``key=value`` pairs: a ``PostgresStore`` (the ``[postgres]`` extra);
* ``sqlite:///relative/path``, ``sqlite:////absolute/path`` or a plain path: a
  SQLite file, through ``SqliteStore``;
* any other ``scheme://`` URL: refused, naming the scheme.

A store that cannot be opened raises ``StoreError`` (exit code 2) with one line
naming the store and the reason; passwords in DSNs are masked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from langgraph.store.base import BaseStore

from langgraph_combee._errors import StoreError
from langgraph_combee._storage.open import is_postgres, mask, sqlite_path
from langgraph_combee._storage.open import open_store as _open

__all__ = ["StoreError", "is_postgres", "mask", "open_store", "sqlite_path"]

_MISSING_HINT = "'combee learn' creates it (or pass --store to name another)"


@contextlib.contextmanager
def open_store(url: str, *, create: bool = True) -> Iterator[BaseStore]:
    """Open the store named by ``url`` for the duration of a command.

    Args:
        url: ``memory``, a SQLite path (or ``sqlite:///path``) or a PostgreSQL DSN.
            SQLAlchemy's rule holds: ``sqlite:///x.db`` is relative, ``sqlite:////x.db``
            absolute.
        create: Whether a missing SQLite file may be created. Commands that only
            read or decide versions pass False, so a mistyped path is reported
            instead of silently opening a new, empty store.

    Yields:
        The store, set up and ready; it is closed when the block ends.

    Raises:
        StoreError: When the store cannot be opened.
        MissingExtraError: When the backend's package is not installed.
    """
    with _open(url, create=create, missing_hint=_MISSING_HINT) as store:
        yield store
