"""``Combee.from_conn_string`` and the store opener behind it (and behind the CLI)."""

from __future__ import annotations

import re
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_combee import Combee, Trace
from langgraph_combee._storage.locked import LockedStore
from langgraph_combee._storage.open import is_postgres, open_store
from langgraph_combee.errors import (
    CombeeClosedError,
    ConfigurationError,
    MissingExtraError,
    StoreError,
)
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


@pytest.mark.parametrize(
    ("conn", "reason"),
    [
        ("postgres+asyncpg://u:s3cret@db.example/app", "unsupported driver 'asyncpg'"),
        ("postgresql+psycopg2://u:s3cret@db.example/app", "unsupported driver 'psycopg2'"),
        ("mysql://u:s3cret@h/db", "unsupported scheme 'mysql'; give 'memory', a SQLite"),
        ("redis://:s3cret@h:6379/0", "unsupported scheme 'redis'"),
        ("sqlite+aiosqlite:///x.db", r"unsupported driver 'aiosqlite'.*write sqlite:///path"),
        ("sqlite://", "in-memory 'sqlite://' is not supported: give 'memory'"),
        ("sqlite://host/x.db", "names its file after a third slash"),
        ("file:/tmp/x.db", r"SQLite URI filenames \(file:...\) are not supported"),
        ("file:///tmp/x.db", r"SQLite URI filenames \(file:...\) are not supported"),
        ("a\nb.db", r"control character \('\\n' at index 1\)"),
        ("a\x00b.db", r"control character \('\\x00' at index 1\)"),
    ],
)
def test_urls_and_names_that_are_not_stores_are_refused_not_made_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, conn: str, reason: str
) -> None:
    # Each of these once became (or tried to become) a SQLite file named after the URL.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=reason) as caught:
        Combee.from_conn_string(conn, prompt_id="c")
    assert "s3cret" not in str(caught.value) and "s3cret" not in caught.value.conn
    assert "does not exist" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_postgresql_psycopg_url_is_opened_as_postgresql(monkeypatch: pytest.MonkeyPatch) -> None:
    # SQLAlchemy's spelling for the driver the store uses: the suffix is dropped.
    pytest.importorskip("langgraph.store.postgres")
    from langgraph.store.postgres import PostgresStore

    seen: list[str] = []

    def refuse(conn: str) -> None:
        seen.append(conn)
        raise RuntimeError("connection to 'postgresql://user:s3cret@127.0.0.1:1/app' failed")

    monkeypatch.setattr(PostgresStore, "from_conn_string", refuse)
    url = "postgresql+psycopg://user:s3cret@127.0.0.1:1/app"
    with pytest.raises(
        StoreError, match=r"cannot open PostgreSQL store 'postgresql\+psycopg://user:\*\*\*@"
    ) as caught:
        Combee.from_conn_string(url, prompt_id="c")
    assert seen == ["postgresql://user:s3cret@127.0.0.1:1/app"]
    assert "s3cret" not in str(caught.value)
    assert is_postgres(url) and is_postgres("postgres+asyncpg://h/db") and not is_postgres("a.db")


def test_sqlite_url_three_slashes_is_relative_and_the_error_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    absolute = tmp_path / "abs" / "x.db"
    absolute.parent.mkdir()
    relative = str(absolute).lstrip("/")
    expected = (
        f"directory '{Path(relative).parent}' does not exist (sqlite:///{relative} is a "
        f"relative path '{relative}'; write sqlite:///{absolute} for an absolute one)"
    )
    with pytest.raises(StoreError, match=re.escape(expected)):
        Combee.from_conn_string(f"sqlite:///{relative}", prompt_id="c")
    with Combee.from_conn_string(f"sqlite:///{absolute}", prompt_id="c"):
        pass
    assert absolute.exists()
    with Combee.from_conn_string("sqlite:///here.db", prompt_id="c"):
        pass
    assert (tmp_path / "here.db").exists()


# ---- a closed Combee ------------------------------------------------------------


def _closed(tmp_path: Path) -> Combee:
    combee = Combee.from_conn_string(str(tmp_path / "x.db"), prompt_id="cl", model=fake_learner())
    combee.close()
    return combee


_CLOSED_CALLS: dict[str, Callable[[Combee], object]] = {
    "feedback": lambda c: c.feedback("some-run", correct=True),
    "start": lambda c: c.start(),
    "running": lambda c: c.running().__enter__(),
    "current": lambda c: c.current(),
    "get": lambda c: c.get(0),
    "history": lambda c: c.history(),
    "diff": lambda c: c.diff(0, 0),
    "rollback": lambda c: c.rollback(0),
    "approve": lambda c: c.approve(1),
    "reject": lambda c: c.reject(1),
    "learn": lambda c: c.learn(failing_traces(2)),
    "flush": lambda c: c.flush(),
    "registry": lambda c: c.registry(),
    "queue": lambda c: c.queue(),
    "describe_roles": lambda c: c.describe_roles(),
    "next_batch_size": lambda c: c.next_batch_size(),
}

_CLOSED_ACALLS: dict[str, Callable[[Combee], Awaitable[object]]] = {
    "afeedback": lambda c: c.afeedback("some-run", correct=True),
    "astart": lambda c: c.astart(),
    "acurrent": lambda c: c.acurrent(),
    "aget": lambda c: c.aget(0),
    "ahistory": lambda c: c.ahistory(),
    "adiff": lambda c: c.adiff(0, 0),
    "arollback": lambda c: c.arollback(0),
    "aapprove": lambda c: c.aapprove(1),
    "areject": lambda c: c.areject(1),
    "alearn": lambda c: c.alearn(failing_traces(2)),
    "aflush": lambda c: c.aflush(),
}


def _refused(method: str) -> str:
    return rf"Combee\(prompt_id='cl'\) is closed: {method}\(\) cannot run after close\(\)"


@pytest.mark.parametrize("method", sorted(_CLOSED_CALLS))
def test_a_closed_combee_refuses_its_calls_with_one_clear_error(
    tmp_path: Path, method: str
) -> None:
    # After close(), feedback() answered True and warned "will retry"
    # while nothing ever would (the feedback was lost), the reads raised a bare
    # sqlite3.ProgrammingError, and start() ran a learner failing every second.
    combee = _closed(tmp_path)
    with pytest.raises(CombeeClosedError, match=_refused(method)) as caught:
        _CLOSED_CALLS[method](combee)
    assert (caught.value.prompt_id, caught.value.method) == ("cl", method)
    assert combee._learner is None or not combee._learner.running


@pytest.mark.parametrize("method", sorted(_CLOSED_ACALLS))
async def test_a_closed_combee_refuses_the_async_twins_too(tmp_path: Path, method: str) -> None:
    combee = _closed(tmp_path)
    with pytest.raises(CombeeClosedError, match=_refused(method)):
        await _CLOSED_ACALLS[method](combee)
    assert combee._learner is None or not combee._learner.running


async def test_a_closed_combee_still_captures_stops_and_closes_without_raising(
    tmp_path: Path,
) -> None:
    combee = _closed(tmp_path)
    combee.capture(Trace(id="late", input="q"))  # the hot path: dropped, counted, never raised
    combee.stop()
    combee.close()
    await combee.astop()
    await combee.aclose()
    assert combee.describe()["serving"]["dropped"] == 1


def test_close_ends_a_combee_on_a_store_it_was_given_too() -> None:
    # One rule, whoever owns the store: code tried on an in-memory store behaves
    # as it will on the database from_conn_string opens.
    combee = Combee(prompt_id="cl", store=InMemoryStore())
    combee.close()
    with pytest.raises(CombeeClosedError, match=_refused("current")):
        combee.current()


def _feedback_racing_close(combee: Combee, trace_id: str, *, asynchronous: bool = False) -> object:
    """What ``feedback()`` gives when ``close()`` runs while it is inside the capture buffer."""
    import asyncio
    import threading

    server = combee._agent.server
    attach = server.attach_feedback
    entered, closed = threading.Event(), threading.Event()

    def slow_attach(*args: Any, **kwargs: Any) -> bool:
        entered.set()
        closed.wait(5)
        return attach(*args, **kwargs)

    server.attach_feedback = slow_attach  # type: ignore[method-assign]
    outcome: dict[str, object] = {}

    def give() -> None:
        try:
            if asynchronous:
                outcome["r"] = asyncio.run(combee.afeedback(trace_id, correct=True))
            else:
                outcome["r"] = combee.feedback(trace_id, correct=True)
        except Exception as exc:
            outcome["r"] = exc

    thread = threading.Thread(target=give)
    thread.start()
    entered.wait(5)
    combee.close(timeout=1)
    closed.set()
    thread.join(10)
    return outcome["r"]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_feedback_racing_close_is_refused_not_reported_kept(
    tmp_path: Path, asynchronous: bool
) -> None:
    # feedback() past the closed check when close() ran was
    # answered True ("will retry"), then dropped, since nothing retries after close.
    combee = Combee.from_conn_string(str(tmp_path / "c.db"), prompt_id="p")
    trace = Trace(input="hi", output="x")
    combee.capture(trace)
    combee.flush()
    outcome = _feedback_racing_close(combee, trace.id, asynchronous=asynchronous)
    assert isinstance(outcome, CombeeClosedError)
    assert combee.describe()["serving"]["feedback_dropped"] == 1


def test_feedback_racing_close_on_a_buffered_trace_is_refused() -> None:
    # With the store down at close(), the trace stayed in the
    # capture buffer; feedback attached to it there was answered True and lost.
    class Down(InMemoryStore):
        failing = False

        def batch(self, ops: Any) -> Any:
            if self.failing:
                raise ConnectionError("store down")
            return super().batch(ops)

    store = Down()
    combee = Combee(prompt_id="p", store=store)
    store.failing = True
    trace = Trace(input="hi", output="x")
    combee.capture(trace)
    assert isinstance(_feedback_racing_close(combee, trace.id), CombeeClosedError)
    assert combee.describe()["serving"]["feedback_dropped"] == 1
