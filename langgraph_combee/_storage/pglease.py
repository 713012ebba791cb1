"""The writer lease on PostgreSQL: atomic takes and fenced writes.

``BaseStore`` has no compare-and-swap, but a LangGraph ``PostgresStore`` sits
on a database that has transactions and row locks. Here the lease is a row of a
table of our own, ``combee_leases`` (created on first use, beside the store's
tables, in the connection's schema):

* taking it is one conditional ``INSERT ... ON CONFLICT DO UPDATE ... WHERE``:
  the row changes only when it is free, expired or already ours, so two takers
  can never both succeed; its ``epoch`` goes up by one whenever the holder
  changes, and never goes down (releasing keeps the row, with no holder);
* every write of a version or of HEAD runs in one transaction with a
  ``SELECT ... FOR UPDATE`` of the lease row naming our holder and epoch. When
  a successor took the lease, that select finds nothing and the transaction
  writes nothing (``LeaseLostError``); while the write's transaction holds the
  row, a successor's take waits for it (up to ``LOCK_TIMEOUT``, then it simply
  fails and is retried). So a holder paused past expiry (SIGSTOP, a long GC)
  that resumes can never write after its successor did.

Times are the holders' shared clock (the ``Lease``'s), as on the generic path.
The store's own connection is used, under the store's lock, through
``PostgresStore._batch_put_ops`` (the store's private writer, so the rows are
exactly those ``put`` would write). A store on a connection pool is served
too (the pool lends one connection per transaction); a store in pipeline mode
and ``AsyncPostgresStore`` take the generic, best-effort path.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from langgraph.store.base import BaseStore, Op, PutOp, Result

if TYPE_CHECKING:
    from psycopg import Cursor
    from psycopg.rows import DictRow

# How long a take waits for a writer's transaction to end before it gives up
# (it is retried on the learner's next pass). A write takes milliseconds.
LOCK_TIMEOUT = "2s"

_TABLE = """
CREATE TABLE IF NOT EXISTS combee_leases (
    name text PRIMARY KEY,
    holder text NOT NULL,
    epoch bigint NOT NULL,
    expires_at double precision NOT NULL,
    acquired_at double precision NOT NULL
)"""

_TAKE = """
INSERT INTO combee_leases AS l (name, holder, epoch, expires_at, acquired_at)
VALUES (%(name)s, %(holder)s, 1, %(expires)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET
    holder = EXCLUDED.holder,
    epoch = CASE WHEN l.holder = EXCLUDED.holder THEN l.epoch ELSE l.epoch + 1 END,
    acquired_at = CASE WHEN l.holder = EXCLUDED.holder THEN l.acquired_at
                       ELSE EXCLUDED.acquired_at END,
    expires_at = EXCLUDED.expires_at
WHERE l.holder = EXCLUDED.holder OR l.expires_at <= %(now)s
RETURNING epoch, acquired_at"""

_RENEW = """
UPDATE combee_leases SET expires_at = %(expires)s
WHERE name = %(name)s AND holder = %(holder)s
RETURNING epoch, acquired_at"""

_RELEASE = """
UPDATE combee_leases SET holder = '', expires_at = 0
WHERE name = %(name)s AND holder = %(holder)s
RETURNING epoch"""

_READ = "SELECT holder, epoch, expires_at FROM combee_leases WHERE name = %(name)s"

_FENCE = """
SELECT 1 FROM combee_leases
WHERE name = %(name)s AND holder = %(holder)s AND epoch = %(epoch)s
FOR UPDATE"""

_ready: weakref.WeakKeyDictionary[BaseStore, bool] = weakref.WeakKeyDictionary()
_ready_guard = threading.Lock()


def postgres_store(store: BaseStore) -> Any | None:
    """The sync LangGraph ``PostgresStore`` under ``store`` (unwrapping ours), or None."""
    try:
        from langgraph.store.postgres import PostgresStore
    except ImportError:  # the [postgres] extra is not installed
        return None
    inner = store
    while hasattr(inner, "inner") and isinstance(inner.inner, BaseStore):
        inner = inner.inner
    if not isinstance(inner, PostgresStore) or inner.pipe is not None:
        return None
    return inner


class LeaseLost(Exception):
    """Internal: the fence found another holder or epoch; the transaction wrote nothing."""


class PostgresLeaseTable:
    """Lease rows of one ``PostgresStore`` (see the module docstring)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    @contextmanager
    def _transaction(self) -> Iterator[Cursor[DictRow]]:
        from langgraph.checkpoint.postgres import _internal as _pg_internal
        from psycopg.rows import dict_row

        store = self._store
        with (
            _pg_internal.get_connection(store.conn) as conn,
            store.lock,
            conn.transaction(),
            conn.cursor(binary=True, row_factory=dict_row) as cur,
        ):
            cur.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            yield cur

    def _setup(self) -> None:
        with _ready_guard:
            if _ready.get(self._store):
                return
            with self._transaction() as cur:
                # Two processes creating the table at once would collide on the catalog.
                cur.execute("SELECT pg_advisory_xact_lock(hashtext('combee_leases'))")
                cur.execute(_TABLE)
            _ready[self._store] = True

    def _one(self, query: str, params: dict[str, Any]) -> dict[str, Any] | None:
        from psycopg import errors

        self._setup()
        try:
            with self._transaction() as cur:
                cur.execute(query, params)
                row = cur.fetchone()
        except errors.LockNotAvailable:
            return None  # a writer's transaction holds the row: not ours now, retry later
        return None if row is None else dict(row)

    def take(
        self, name: str, holder: str, *, now: float, ttl: float, renew: bool
    ) -> tuple[int, float] | None:
        """Take (or renew) the lease atomically; (epoch, acquired_at) when held, else None."""
        params = {"name": name, "holder": holder, "now": now, "expires": now + ttl}
        row = self._one(_RENEW if renew else _TAKE, params)
        return None if row is None else (int(row["epoch"]), float(row["acquired_at"]))

    def release(self, name: str, holder: str) -> bool:
        """Give the lease up (the row and its epoch stay); whether it was ours."""
        return self._one(_RELEASE, {"name": name, "holder": holder}) is not None

    def read(self, name: str) -> tuple[str, int, float] | None:
        """(holder, epoch, expires_at), or None when never taken."""
        row = self._one(_READ, {"name": name})
        if row is None:
            return None
        return str(row["holder"]), int(row["epoch"]), float(row["expires_at"])

    def write(self, ops: Sequence[Op], *, name: str, holder: str, epoch: int) -> list[Result]:
        """Run write ops in one transaction with the lease row locked at our epoch.

        Raises:
            LeaseLost: The row names another holder or epoch; nothing was written.
        """
        puts = [(i, op) for i, op in enumerate(ops) if isinstance(op, PutOp)]
        if len(puts) != len(ops):
            raise TypeError("a fenced write takes put and delete ops only")
        self._setup()
        with self._transaction() as cur:
            cur.execute(_FENCE, {"name": name, "holder": holder, "epoch": epoch})
            if cur.fetchone() is None:
                raise LeaseLost(name)
            self._store._batch_put_ops(puts, cur)
        return [None] * len(ops)
