"""A real PostgreSQL server for the tests: the DSN, a schema per test session, clean tables.

Start a server with ``bash scripts/postgres-up.sh`` and source the file it
writes (``COMBEE_TEST_POSTGRES_DSN=postgresql://...``). Without that variable
the PostgreSQL tests are skipped, except under CI (``CI=true``), where a missing
server is a failure: CI must run them.

Each pytest session works in a schema of its own (created here, dropped at the
end), so concurrent runs against one database never see each other's records;
``clean_dsn`` empties the store's tables before each test.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

DSN_ENV = "COMBEE_TEST_POSTGRES_DSN"
START_HINT = (
    f"{DSN_ENV} is not set: start a server with 'bash scripts/postgres-up.sh' and "
    "source the postgres.env file it writes"
)
EXTRA_HINT = "the postgres extra is not installed: pip install -e '.[postgres]'"


def _unavailable(reason: str) -> None:
    """Skip a PostgreSQL test; under CI, fail it instead: CI must run them."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def server_dsn() -> str:
    """The DSN of the test server, or skip (fail under CI) when there is none."""
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        _unavailable(START_HINT)
    try:
        import langgraph.store.postgres  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable(EXTRA_HINT)
    return dsn


@contextmanager
def session_schema(dsn: str) -> Iterator[str]:
    """Create a fresh schema, migrate the store into it, yield a DSN that uses it, drop it."""
    import psycopg
    from langgraph.store.postgres import PostgresStore
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    schema = f"combee_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    scoped = make_conninfo(dsn, options=f"-c search_path={schema}")
    try:
        with PostgresStore.from_conn_string(scoped) as store:
            store.setup()
        yield scoped
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def truncate(dsn: str) -> None:
    """Delete every record of the store and every writer lease (the migrations table stays)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE store")
        # Created by the first lease taken (langgraph_combee._storage.pglease).
        conn.execute(
            "DO $$ BEGIN IF to_regclass('combee_leases') IS NOT NULL THEN "
            "TRUNCATE combee_leases; END IF; END $$"
        )


@contextmanager
def open_store(dsn: str) -> Iterator[PostgresStore]:
    """A ``PostgresStore`` on its own connection (tables already migrated)."""
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(dsn) as store:
        yield store


@asynccontextmanager
async def aopen_store(dsn: str) -> AsyncIterator[AsyncPostgresStore]:
    """An ``AsyncPostgresStore`` on its own connection, bound to the running loop."""
    from langgraph.store.postgres import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(dsn) as store:
        yield store
