"""What changed between two playbooks, bullet by bullet.

A pure function of two playbooks (no I/O): the registry uses it to compare
versions, reports and the CLI use it to show what a learning step did::

    diff = diff_playbooks(old, new)
    print(diff.summary())   # "+3 -1 ~2"
    print(diff.render())
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from langgraph_combee._core.playbook import Bullet, Playbook

# Trace ids shown per line of ``PlaybookDiff.render``; the rest are counted.
MAX_RENDERED_TRACES = 5
# Characters of bullet content shown per line of ``PlaybookDiff.render``.
MAX_RENDERED_CONTENT = 200


@dataclass(frozen=True)
class PlaybookDiff:
    """Bullets added, removed, rewritten and retagged between two playbooks.

    Bullets are matched by id. Each list follows playbook order: ``removed`` the
    old playbook's, the others the new playbook's.

    Attributes:
        added: Bullets only in the new playbook.
        removed: Bullets only in the old playbook.
        updated: ``(old, new)`` pairs whose content or section changed.
        retagged: ``(old, new)`` pairs with the same content and section whose
            helpful/harmful counters or provenance changed.
    """

    added: list[Bullet] = field(default_factory=list)
    removed: list[Bullet] = field(default_factory=list)
    updated: list[tuple[Bullet, Bullet]] = field(default_factory=list)
    retagged: list[tuple[Bullet, Bullet]] = field(default_factory=list)

    def is_empty(self) -> bool:
        """Return True when the two playbooks hold the same bullets."""
        return not (self.added or self.removed or self.updated or self.retagged)

    def summary(self) -> str:
        """Return a one-line count of changes: ``"+3 -1 ~2"``, or ``"+0 -0 ~0 (4 retagged)"``."""
        text = f"+{len(self.added)} -{len(self.removed)} ~{len(self.updated)}"
        if self.retagged:
            text += f" ({len(self.retagged)} retagged)"
        return text

    def render(self) -> str:
        """Return one readable line per change, ``"(no changes)"`` when there are none.

        Each line starts with ``+`` (added), ``-`` (removed), ``~`` (updated) or
        ``#`` (retagged), then the bullet id and its content, then the trace ids
        behind the change: the bullet's provenance for added and removed bullets,
        and the provenance the change brought in for updated and retagged ones
        (all of it when none is new). At most five trace ids are listed.
        """
        if self.is_empty():
            return "(no changes)"
        lines = [
            f"+ [{b.id}] ({b.section}) {_clip(b.content)}{_traces(b.provenance)}"
            for b in self.added
        ]
        lines.extend(
            f"- [{b.id}] ({b.section}) {_clip(b.content)}{_traces(b.provenance)}"
            for b in self.removed
        )
        for old, new in self.updated:
            section = (
                new.section if old.section == new.section else f"{old.section} -> {new.section}"
            )
            content = (
                _clip(new.content)
                if old.content == new.content
                else f"{_clip(old.content)!r} -> {_clip(new.content)!r}"
            )
            lines.append(f"~ [{new.id}] ({section}) {content}{_traces(_new_sources(old, new))}")
        for old, new in self.retagged:
            counters = f"helpful {old.helpful}->{new.helpful}, harmful {old.harmful}->{new.harmful}"
            lines.append(
                f"# [{new.id}] {counters}: {_clip(new.content)}{_traces(_new_sources(old, new))}"
            )
        return "\n".join(lines)


def diff_playbooks(old: Playbook, new: Playbook) -> PlaybookDiff:
    """Compare two playbooks bullet by bullet (matched by id).

    Args:
        old: The earlier playbook.
        new: The later playbook.

    Returns:
        The bullets added, removed, updated (content or section changed) and
        retagged (only counters or provenance changed). Changes to a bullet's
        ``created_version``/``updated_version`` alone are not reported.
    """
    old_by_id = {b.id: b for b in old.bullets}
    new_ids = {b.id for b in new.bullets}
    added: list[Bullet] = []
    updated: list[tuple[Bullet, Bullet]] = []
    retagged: list[tuple[Bullet, Bullet]] = []
    for bullet in new.bullets:
        before = old_by_id.get(bullet.id)
        if before is None:
            added.append(bullet)
        elif before.content != bullet.content or before.section != bullet.section:
            updated.append((before, bullet))
        elif (before.helpful, before.harmful, before.provenance) != (
            bullet.helpful,
            bullet.harmful,
            bullet.provenance,
        ):
            retagged.append((before, bullet))
    removed = [b for b in old.bullets if b.id not in new_ids]
    return PlaybookDiff(added=added, removed=removed, updated=updated, retagged=retagged)


def _new_sources(old: Bullet, new: Bullet) -> list[str]:
    before = set(old.provenance)
    fresh = [t for t in new.provenance if t not in before]
    return fresh or list(new.provenance)


def _traces(trace_ids: Sequence[str]) -> str:
    if not trace_ids:
        return ""
    shown = ", ".join(trace_ids[:MAX_RENDERED_TRACES])
    more = len(trace_ids) - MAX_RENDERED_TRACES
    return f"  [traces: {shown}{f' (+{more} more)' if more > 0 else ''}]"


def _clip(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MAX_RENDERED_CONTENT:
        return text
    return text[: MAX_RENDERED_CONTENT - 3] + "..."
