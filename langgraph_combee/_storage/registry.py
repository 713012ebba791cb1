"""The prompt registry: every version of a learned prompt, and HEAD, the one in force.

Versions are ``PromptVersion`` records stored under zero-padded keys (see
``keys``); HEAD is a small pointer record. A version is written as a
*candidate*, then accepted (HEAD moves to it) or rejected (HEAD stays). A
rollback writes a new accepted version with an older playbook, so the audit
trail is only ever appended to.

A version record and the pointers that name it (HEAD, the latest-version
hint) are written in one ``store.batch`` call: one transaction on SQLite and
PostgreSQL. On stores without transactions they are written in order, version
record first, so a crash never leaves HEAD pointing at a missing or
non-accepted version; a writer that died after writing an accepted version but
before moving HEAD is repaired by ``repair_head`` (run by every writer before it
writes).

A candidate is accepted only while its parent is HEAD: accepting one learned
from an older version would drop the rules accepted since, so ``accept`` raises
``StaleCandidateError`` and the caller rebases it first (``rebase`` stores the
candidate's ops re-applied onto HEAD; ``VersionWriter`` does both).

``BaseStore`` has no compare-and-swap, so two writers adding versions at the
same moment could both pick the same version number and the second would
overwrite the first. Run one writer per prompt and tenant: ``VersionWriter``
serialises writers within a process and ``Lease`` across processes (on
PostgreSQL atomically, with every write fenced by the lease's epoch).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from langgraph.store.base import BaseStore

from langgraph_combee._core.diff import PlaybookDiff, diff_playbooks
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._core.types import Decision, PromptVersion
from langgraph_combee._errors import (
    ConfigurationError,
    RegistryError,
    StaleCandidateError,
    VersionNotFoundError,
)
from langgraph_combee._storage import _io as io
from langgraph_combee._storage._io import Flow, run_async, run_sync
from langgraph_combee._storage.keys import (
    CANARY_KEY,
    HEAD_KEY,
    LATEST_KEY,
    MAX_VERSION,
    PromptSpace,
    parse_version_key,
    version_key,
)

# The implicit version 0 has a fixed timestamp so that reading it twice gives equal records.
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class PromptRegistry:
    """Versions of one learned prompt (per tenant) and the HEAD pointer, in a ``BaseStore``.

    Version 0 is implicit: an empty, accepted playbook that is never written.
    Every method has an async twin prefixed with ``a`` (``ahead``, ``aget``, ...).

    Example::

        registry = PromptRegistry(store, "support-agent")
        candidate = registry.add_candidate(PromptVersion(prompt_id="support-agent",
                                                         playbook=new_playbook))
        registry.accept(candidate.version, Decision(accepted=True, policy="manual",
                                                    reason="reviewed"))
        registry.head().render()

    Args:
        store: The LangGraph store holding the registry.
        prompt_id: The prompt's id: a non-empty string without ``.``.
        tenant: The tenant, or None for the single default tenant.

    Raises:
        ConfigurationError: When the store is not a ``BaseStore`` or ``prompt_id``
            or ``tenant`` is not a valid namespace label.
    """

    def __init__(self, store: BaseStore, prompt_id: str, *, tenant: str | None = None) -> None:
        if not isinstance(store, BaseStore):
            raise ConfigurationError("store", store, "a langgraph.store.base.BaseStore")
        self._store = store
        self._space = PromptSpace(prompt_id, tenant)
        self._versions = self._space.namespace("versions")
        self._meta = self._space.namespace("meta")

    @property
    def prompt_id(self) -> str:
        """The prompt's id."""
        return self._space.prompt_id

    @property
    def tenant(self) -> str | None:
        """The tenant, or None."""
        return self._space.tenant

    def __repr__(self) -> str:
        return f"PromptRegistry(prompt_id={self.prompt_id!r}, tenant={self.tenant!r})"

    # ---- reading -------------------------------------------------------

    def head(self) -> PromptVersion:
        """Return the accepted version HEAD points to (version 0 when none was accepted).

        Raises:
            RegistryError: When HEAD points at a missing or non-accepted version,
                which only concurrent writers (no compare-and-swap) can cause.
        """
        return run_sync(self._store, self._head_flow())

    async def ahead(self) -> PromptVersion:
        """Async twin of ``head``."""
        return await run_async(self._store, self._head_flow())

    def get(self, version: int) -> PromptVersion:
        """Return one version; 0 is the implicit initial version.

        Raises:
            VersionNotFoundError: When no such version was written.
        """
        return run_sync(self._store, self._get_flow(version))

    async def aget(self, version: int) -> PromptVersion:
        """Async twin of ``get``."""
        return await run_async(self._store, self._get_flow(version))

    def latest_version(self) -> int:
        """Return the highest version number written, whatever its status (0 when none)."""
        return run_sync(self._store, self._latest_flow())

    async def alatest_version(self) -> int:
        """Async twin of ``latest_version``."""
        return await run_async(self._store, self._latest_flow())

    def canary(self) -> PromptVersion | None:
        """Return the candidate being tried on live traffic, if any (see ``set_canary``)."""
        return run_sync(self._store, self._canary_flow())

    async def acanary(self) -> PromptVersion | None:
        """Async twin of ``canary``."""
        return await run_async(self._store, self._canary_flow())

    def set_canary(self, version: int | None) -> None:
        """Mark a candidate as the canary served to part of the traffic (None clears it).

        Raises:
            RegistryError: When ``version`` is not a candidate.
        """
        run_sync(self._store, self._set_canary_flow(version))

    async def aset_canary(self, version: int | None) -> None:
        """Async twin of ``set_canary``."""
        await run_async(self._store, self._set_canary_flow(version))

    def history(self) -> list[PromptVersion]:
        """Return every written version, ascending, whatever its status.

        The implicit version 0 is not included: it was never written (``get(0)``
        returns it).
        """
        return run_sync(self._store, self._list_flow(None))

    async def ahistory(self) -> list[PromptVersion]:
        """Async twin of ``history``."""
        return await run_async(self._store, self._list_flow(None))

    def candidates(self) -> list[PromptVersion]:
        """Return the versions still waiting for a decision, ascending."""
        return run_sync(self._store, self._list_flow("candidate"))

    async def acandidates(self) -> list[PromptVersion]:
        """Async twin of ``candidates``."""
        return await run_async(self._store, self._list_flow("candidate"))

    def diff(self, a: int, b: int) -> PlaybookDiff:
        """Return what changed from version ``a``'s playbook to version ``b``'s.

        Raises:
            VersionNotFoundError: When either version does not exist.
        """
        return run_sync(self._store, self._diff_flow(a, b))

    async def adiff(self, a: int, b: int) -> PlaybookDiff:
        """Async twin of ``diff``."""
        return await run_async(self._store, self._diff_flow(a, b))

    # ---- writing -------------------------------------------------------

    def add_candidate(self, candidate: PromptVersion) -> PromptVersion:
        """Store a new candidate version and return the stored record.

        The record gets the next version number (the caller's ``version`` is
        ignored), ``status="candidate"``, this registry's ``prompt_id`` and
        ``tenant``, and as ``parent`` the current HEAD version unless the caller
        set one.

        Raises:
            ConfigurationError: When the caller's ``parent`` is not an existing version.
        """
        return run_sync(self._store, self._add_flow(candidate))

    async def aadd_candidate(self, candidate: PromptVersion) -> PromptVersion:
        """Async twin of ``add_candidate``."""
        return await run_async(self._store, self._add_flow(candidate))

    def accept(self, version: int, decision: Decision) -> PromptVersion:
        """Mark a candidate accepted with ``decision`` and move HEAD to it.

        Only a candidate whose parent is HEAD can be accepted: one learned from an
        older version would drop the rules accepted since. Rebase it first
        (``rebase``), or accept through ``Combee.approve``, which does.

        Raises:
            VersionNotFoundError: When the version does not exist.
            StaleCandidateError: When the candidate's parent is no longer HEAD.
            RegistryError: When the version is not a candidate.
            ConfigurationError: When ``decision.accepted`` is False.
        """
        return run_sync(self._store, self._decide_flow(version, decision, "accepted"))

    async def aaccept(self, version: int, decision: Decision) -> PromptVersion:
        """Async twin of ``accept``."""
        return await run_async(self._store, self._decide_flow(version, decision, "accepted"))

    def reject(self, version: int, decision: Decision) -> PromptVersion:
        """Mark a candidate rejected with ``decision``; HEAD does not move.

        Raises:
            VersionNotFoundError: When the version does not exist.
            RegistryError: When the version is not a candidate.
            ConfigurationError: When ``decision.accepted`` is True.
        """
        return run_sync(self._store, self._decide_flow(version, decision, "rejected"))

    async def areject(self, version: int, decision: Decision) -> PromptVersion:
        """Async twin of ``reject``."""
        return await run_async(self._store, self._decide_flow(version, decision, "rejected"))

    def rebase(self, version: int, playbook: Playbook, *, onto: int) -> PromptVersion:
        """Store a candidate's edits re-applied onto HEAD: its new playbook and parent.

        The record keeps its number, ops and traces; ``parent`` becomes ``onto``
        and ``rebased_from`` the version it was first learned from. Computing
        the playbook (re-applying ``ops`` with screening) is the caller's job:
        storage applies no learning logic.

        Raises:
            VersionNotFoundError: When the version does not exist.
            RegistryError: When it is not a candidate, or ``onto`` is not HEAD.
        """
        return run_sync(self._store, self._rebase_flow(version, playbook, onto))

    async def arebase(self, version: int, playbook: Playbook, *, onto: int) -> PromptVersion:
        """Async twin of ``rebase``."""
        return await run_async(self._store, self._rebase_flow(version, playbook, onto))

    def repair_head(self) -> PromptVersion | None:
        """Move HEAD past accepted versions a dead writer left behind it; return the new HEAD.

        A writer that died after writing an accepted version but before moving
        HEAD left that version out of force. Walking forward from HEAD, each
        accepted version whose parent is the HEAD found so far becomes HEAD
        (found by parent, whatever its number: a rebased one may be numbered
        below the HEAD it extends).
        Returns None when HEAD was already right. Only a writer should call it
        (it moves HEAD); ``VersionWriter`` does before every write.
        """
        return run_sync(self._store, self._repair_flow())

    async def arepair_head(self) -> PromptVersion | None:
        """Async twin of ``repair_head``."""
        return await run_async(self._store, self._repair_flow())

    def rollback(self, version: int, *, reason: str = "") -> PromptVersion:
        """Write a new accepted version with ``version``'s playbook and move HEAD to it.

        The new version's parent is the HEAD it replaces, its note reads
        ``"rollback to vN: reason"`` and its decision's policy is ``"rollback"``.
        Nothing already written is changed.

        Raises:
            VersionNotFoundError: When the version does not exist.
            RegistryError: When the version was never accepted (a candidate or a
                rejected version is not something to roll back to).
        """
        return run_sync(self._store, self._rollback_flow(version, reason))

    async def arollback(self, version: int, *, reason: str = "") -> PromptVersion:
        """Async twin of ``rollback``."""
        return await run_async(self._store, self._rollback_flow(version, reason))

    # ---- flows shared by the sync and async methods --------------------

    def _initial(self) -> PromptVersion:
        return PromptVersion(
            prompt_id=self.prompt_id,
            tenant=self.tenant,
            version=0,
            parent=None,
            playbook=Playbook(),
            status="accepted",
            created_at=_EPOCH,
            note="initial empty version",
        )

    def _read_flow(self, version: int) -> Flow[PromptVersion | None]:
        if isinstance(version, int) and not 0 <= version <= MAX_VERSION:
            return None
        key = version_key(version)  # rejects non-int versions
        if version == 0:
            return self._initial()
        item = yield from io.get(self._versions, key)
        return None if item is None else PromptVersion.model_validate(item.value)

    def _get_flow(self, version: int) -> Flow[PromptVersion]:
        record = yield from self._read_flow(version)
        if record is None:
            raise VersionNotFoundError(self.prompt_id, version)
        return record

    def _head_version_flow(self) -> Flow[int]:
        item = yield from io.get(self._meta, HEAD_KEY)
        return 0 if item is None else int(item.value["version"])

    def _head_flow(self) -> Flow[PromptVersion]:
        version = yield from self._head_version_flow()
        record = yield from self._read_flow(version)
        if record is None or record.status != "accepted":
            state = "missing" if record is None else record.status
            raise RegistryError(
                f"HEAD of prompt {self.prompt_id!r} points to version {version}, which is "
                f"{state}; was the registry written by two writers at once?"
            )
        return record

    def _canary_flow(self) -> Flow[PromptVersion | None]:
        item = yield from io.get(self._meta, CANARY_KEY)
        if item is None or item.value.get("version") is None:
            return None
        record = yield from self._read_flow(int(item.value["version"]))
        # A canary that was decided since is no longer served.
        return record if record is not None and record.status == "candidate" else None

    def _set_canary_flow(self, version: int | None) -> Flow[None]:
        if version is not None:
            record = yield from self._get_flow(version)
            if record.status != "candidate":
                raise RegistryError(
                    f"version {version} of prompt {self.prompt_id!r} is {record.status}, "
                    "not a candidate; only candidates can be canaries"
                )
        yield from io.put(
            self._meta, CANARY_KEY, {"version": version, "updated_at": _now().isoformat()}
        )

    def _latest_flow(self) -> Flow[int]:
        # The "latest" record is a hint written after each version; probing forward
        # from it finds versions written by a process that died before the hint.
        hint = yield from io.get(self._meta, LATEST_KEY)
        latest = 0 if hint is None else int(hint.value["version"])
        while (yield from io.get(self._versions, version_key(latest + 1))) is not None:
            latest += 1
        return latest

    def _list_flow(self, status: str | None) -> Flow[list[PromptVersion]]:
        items = yield from io.search_all(
            self._versions, filter=None if status is None else {"status": status}
        )
        records = [
            PromptVersion.model_validate(item.value)
            for item in items
            if parse_version_key(item.key) is not None
        ]
        return sorted(records, key=lambda record: record.version)

    def _diff_flow(self, a: int, b: int) -> Flow[PlaybookDiff]:
        old = yield from self._get_flow(a)
        new = yield from self._get_flow(b)
        return diff_playbooks(old.playbook, new.playbook)

    def _write_flow(
        self, record: PromptVersion, *, move_head: bool, new: bool
    ) -> Flow[PromptVersion]:
        # One batch: one transaction where the store has them. Where it has not,
        # the order still matters: the version record first, then the pointers.
        writes = [
            io.PutRequest(
                self._versions, version_key(record.version), record.model_dump(mode="json")
            )
        ]
        if move_head:
            writes.append(
                io.PutRequest(
                    self._meta,
                    HEAD_KEY,
                    {"version": record.version, "updated_at": _now().isoformat()},
                )
            )
        if new:
            writes.append(io.PutRequest(self._meta, LATEST_KEY, {"version": record.version}))
        yield from io.batch(writes)
        return record

    def _add_flow(self, candidate: PromptVersion) -> Flow[PromptVersion]:
        latest = yield from self._latest_flow()
        parent = candidate.parent
        if parent is None:
            parent = yield from self._head_version_flow()
        elif not 0 <= parent <= latest:
            raise ConfigurationError(
                "candidate.parent", parent, f"an existing version (0 to {latest})"
            )
        data: dict[str, Any] = candidate.model_dump(mode="json")
        data.update(
            prompt_id=self.prompt_id,
            tenant=self.tenant,
            version=latest + 1,
            parent=parent,
            status="candidate",
            decision=None,
        )
        record = PromptVersion.model_validate(data)
        return (yield from self._write_flow(record, move_head=False, new=True))

    def _decide_flow(
        self, version: int, decision: Decision, status: Literal["accepted", "rejected"]
    ) -> Flow[PromptVersion]:
        action = "accept" if status == "accepted" else "reject"
        if decision.accepted != (status == "accepted"):
            raise ConfigurationError(
                "decision.accepted",
                decision.accepted,
                f"{status == 'accepted'} when calling {action}()",
            )
        record = yield from self._get_flow(version)
        if version == 0 or record.status != "candidate":
            raise RegistryError(
                f"cannot {action} version {version} of prompt {self.prompt_id!r}: it is "
                f"{'the implicit initial version' if version == 0 else record.status}, "
                "and only candidates can be accepted or rejected"
            )
        if status == "accepted":
            head = yield from self._head_version_flow()
            if record.parent != head:
                raise StaleCandidateError(self.prompt_id, version, record.parent, head)
        decided = record.model_copy(update={"status": status, "decision": decision})
        return (yield from self._write_flow(decided, move_head=status == "accepted", new=False))

    def _rebase_flow(self, version: int, playbook: Playbook, onto: int) -> Flow[PromptVersion]:
        record = yield from self._get_flow(version)
        if version == 0 or record.status != "candidate":
            raise RegistryError(
                f"cannot rebase version {version} of prompt {self.prompt_id!r}: it is "
                f"{'the implicit initial version' if version == 0 else record.status}, "
                "and only candidates can be rebased"
            )
        head = yield from self._head_version_flow()
        if onto != head:
            raise RegistryError(
                f"cannot rebase version {version} of prompt {self.prompt_id!r} onto v{onto}: "
                f"HEAD is v{head}"
            )
        if record.parent == onto:
            return record
        rebased = record.model_copy(
            update={
                "playbook": playbook,
                "parent": onto,
                "rebased_from": record.rebased_from
                if record.rebased_from is not None
                else record.parent,
            }
        )
        return (yield from self._write_flow(rebased, move_head=False, new=False))

    def _repair_flow(self) -> Flow[PromptVersion | None]:
        head = yield from self._head_version_flow()
        found: PromptVersion | None = None
        current, seen = head, {head}
        while True:
            # By parent, not by number: a candidate rebased onto HEAD and accepted
            # can carry a lower number than the HEAD it extends.
            items = yield from io.search_all(
                self._versions, filter={"status": "accepted", "parent": current}
            )
            children = [
                PromptVersion.model_validate(item.value)
                for item in items
                if parse_version_key(item.key) not in (None, *seen)
            ]
            if not children:
                break
            found = min(children, key=lambda record: record.version)
            current = found.version
            seen.add(current)
        if found is None:
            return None
        yield from io.put(
            self._meta, HEAD_KEY, {"version": found.version, "updated_at": _now().isoformat()}
        )
        return found

    def _rollback_flow(self, version: int, reason: str) -> Flow[PromptVersion]:
        target = yield from self._get_flow(version)
        if target.status != "accepted":
            raise RegistryError(
                f"cannot roll prompt {self.prompt_id!r} back to version {version}: it is "
                f"{target.status}, and only accepted versions can be rolled back to"
            )
        latest = yield from self._latest_flow()
        head = yield from self._head_version_flow()
        current = yield from self._read_flow(head)
        # Bullet ids are never reused: keep HEAD's id counters where they are
        # ahead, or a rule learned after the rollback would take the id of a
        # rolled-back one (and a stale candidate's UPDATE or REMOVE of that id,
        # rebased onto HEAD, would hit the wrong rule).
        counters = dict(target.playbook.counters)
        for slug, count in ({} if current is None else current.playbook.counters).items():
            counters[slug] = max(count, counters.get(slug, 0))
        note = f"rollback to v{version}: {reason}" if reason else f"rollback to v{version}"
        record = PromptVersion(
            prompt_id=self.prompt_id,
            tenant=self.tenant,
            version=latest + 1,
            parent=head,
            playbook=target.playbook.model_copy(deep=True, update={"counters": counters}),
            status="accepted",
            decision=Decision(accepted=True, policy="rollback", reason=reason or note),
            note=note,
        )
        return (yield from self._write_flow(record, move_head=True, new=True))


def _now() -> datetime:
    return datetime.now(timezone.utc)
