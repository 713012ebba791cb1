"""``Combee.from_conn_string`` and the store opener behind it (and behind the CLI)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_combee import Combee
from langgraph_combee._storage.locked import LockedStore
from langgraph_combee._storage.open import open_store
from langgraph_combee.errors import ConfigurationError, MissingExtraError, StoreError
from langgraph_combee.testing import fake_learner
from tests.helpers import failing_traces


def test_memory() -> None:
    with Combee.from_conn_string("memory", prompt_id="p", model=fake_learner()) as combee:
        assert isinstance(combee.store, LockedStore)
        assert isinstance(combee.store.inner, InMemoryStore)
        assert combee.learn(failing_traces(2)).version.version == 1


@pytest.mark.parametrize("form", ["path", "url"])
def test_sqlite_file_persists_across_openings(tmp_path: Path, form: str) -> None:
    db = tmp_path / "combee.db"
    conn = str(db) if form == "path" else f"sqlite:///{db}"
    with Combee.from_conn_string(conn, prompt_id="p", model=fake_learner()) as combee:
        combee.learn(failing_traces(3))
        learned = combee.current()
        store = combee.store
    # Closed on exit: the connection refuses further use.
    with pytest.raises(sqlite3.ProgrammingError):
        store.get(("x",), "y")
    with Combee.from_conn_string(conn, prompt_id="p") as again:
        assert again.current() == learned


def test_postgres(postgres_dsn: str) -> None:
    with Combee.from_conn_string(postgres_dsn, prompt_id="p", model=fake_learner()) as combee:
        combee.learn(failing_traces(2))
    with Combee.from_conn_string(postgres_dsn, prompt_id="p") as again:
        assert again.current().version == 1


async def test_async_context_manager(tmp_path: Path) -> None:
    conn = str(tmp_path / "a.db")
    async with Combee.from_conn_string(conn, prompt_id="p", model=fake_learner()) as combee:
        report = await combee.alearn(failing_traces(2))
    assert report.version.version == 1


def test_close_is_idempotent_and_flushes_captures(tmp_path: Path) -> None:
    conn = str(tmp_path / "c.db")
    combee = Combee.from_conn_string(conn, prompt_id="p")
    for trace in failing_traces(3):
        combee.capture(trace)
    combee.close()
    combee.close()
    with open_store(conn, create=False) as store:
        assert Combee(prompt_id="p", store=store).queue().pending_count() == 3


def test_unreachable_postgres_names_the_dsn_without_its_password() -> None:
    pytest.importorskip("langgraph.store.postgres")
    # Port 1 on the loopback address: nothing listens there, the connection is refused.
    dsn = "postgresql://u:secret@127.0.0.1:1/db?connect_timeout=2"
    with pytest.raises(StoreError, match=r"cannot open PostgreSQL store 'postgresql://u:\*\*\*@"):
        Combee.from_conn_string(dsn, prompt_id="p")
    try:
        Combee.from_conn_string(dsn, prompt_id="p")
    except StoreError as exc:
        assert "secret" not in str(exc) and "secret" not in exc.conn


def test_bad_values(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="conn=''"):
        Combee.from_conn_string("", prompt_id="p")
    with pytest.raises(StoreError, match="is a directory"):
        Combee.from_conn_string(str(tmp_path), prompt_id="p")
    missing = tmp_path / "no" / "dir" / "x.db"
    with pytest.raises(StoreError, match=f"cannot open store '{missing}'.*does not exist"):
        Combee.from_conn_string(str(missing), prompt_id="p")
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("hello, not SQLite\n" * 100, encoding="utf-8")
    with pytest.raises(StoreError, match="cannot open SQLite store"):
        Combee.from_conn_string(str(not_sqlite), prompt_id="p")
    with pytest.raises(StoreError, match="names no file"):
        Combee.from_conn_string("sqlite:///", prompt_id="p")
    with pytest.raises(ConfigurationError, match="store="):
        Combee.from_conn_string("memory", prompt_id="p", store=InMemoryStore())


def test_a_bad_argument_fails_after_the_store_opened(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="prompt_id"):
        Combee.from_conn_string(str(tmp_path / "x.db"), prompt_id="")


def test_readers_do_not_create_files(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with (
        pytest.raises(StoreError, match="does not exist; make it"),
        open_store(str(path), create=False, missing_hint="make it"),
    ):
        pass
    assert not path.exists()


def test_missing_extras_give_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.store.postgres", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'langgraph-combee\[postgres\]'"):
        Combee.from_conn_string("postgresql://u:pw@127.0.0.1/db", prompt_id="p")
    monkeypatch.setitem(sys.modules, "langgraph.store.sqlite", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'langgraph-combee\[sqlite\]'"):
        Combee.from_conn_string("combee.db", prompt_id="p")
