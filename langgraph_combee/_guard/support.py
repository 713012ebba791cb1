"""The support threshold: a new bullet goes live only once enough distinct people back it.

One user in one conversation must not be able to write the prompt everyone is
served. With ``BulletGuard(min_support=m)``, a bullet added by a step is stored
as *pending* (kept in the playbook, never rendered) and records who supported
it: one key per distinct user (``metadata[user_key]``), else per thread
(``thread_id``), else per trace. Later ops that back it (an ADD that de-dup
merges into it, a TAG with helpful counts) add their traces' keys; at ``m``
distinct keys it is promoted. Live bullets are never demoted.

Support is credited from the trace ids an op cites (its ``sources``), which the
learner LLM writes; an op that cites none is credited to every trace its
curator read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langgraph_combee._core.ops import Add, Tag
from langgraph_combee._core.playbook import ApplyResult, Playbook
from langgraph_combee._core.types import Trace

DEFAULT_USER_KEY = "combee_user"
"""The trace metadata key naming the user unless ``BulletGuard(user_key=...)`` says another."""


def support_key(trace: Trace, user_key: str = DEFAULT_USER_KEY) -> str:
    """Who a trace speaks for: ``user:<id>``, else ``thread:<id>``, else ``trace:<id>``."""
    user = trace.metadata.get(user_key)
    if user is not None and str(user).strip():
        return f"user:{user}"
    if trace.thread_id:
        return f"thread:{trace.thread_id}"
    return f"trace:{trace.id}"


def support_keys(
    traces: Sequence[Trace], user_key: str, *, anonymous: bool = True
) -> dict[str, str]:
    """Trace id to support key, for a batch; without ``anonymous``, only traces naming a user."""
    keys = {t.id: support_key(t, user_key) for t in traces}
    return keys if anonymous else {k: v for k, v in keys.items() if v.startswith("user:")}


def attribute(applied: ApplyResult, keys: Mapping[str, str]) -> Playbook:
    """Record the support the applied ops give; new bullets start pending.

    Args:
        applied: The result of ``Playbook.apply`` for this step's ops.
        keys: Support key of every trace of the batch (from ``support_keys``).

    Returns:
        The applied playbook, with supporters added and new bullets pending.
    """
    backing: dict[str, list[str]] = {}
    new: set[str] = set()
    for outcome in applied.outcomes:
        op = outcome.op
        if not outcome.applied or outcome.bullet_id is None:
            continue
        if isinstance(op, Add):
            new.add(outcome.bullet_id)
        elif not (isinstance(op, Tag) and op.helpful > 0):
            continue
        backing.setdefault(outcome.bullet_id, []).extend(keys[s] for s in op.sources if s in keys)
    if not backing and not new:
        return applied.playbook
    bullets = []
    for bullet in applied.playbook.bullets:
        extra = backing.get(bullet.id)
        if extra is None and bullet.id not in new:
            bullets.append(bullet)
            continue
        bullets.append(
            bullet.model_copy(
                update={
                    "supporters": list(dict.fromkeys([*bullet.supporters, *(extra or [])])),
                    "pending": bullet.pending or bullet.id in new,
                }
            )
        )
    return applied.playbook.replace_bullets(bullets)


def promote(playbook: Playbook, *, min_support: int, max_pending: int) -> tuple[Playbook, int]:
    """Make pending bullets with ``min_support`` supporters live; drop the oldest surplus.

    Returns:
        The playbook and the number of bullets promoted.
    """
    promoted = 0
    bullets = []
    for bullet in playbook.bullets:
        if bullet.pending and len(bullet.supporters) >= min_support:
            bullet = bullet.model_copy(update={"pending": False})
            promoted += 1
        bullets.append(bullet)
    pending = [b for b in bullets if b.pending]
    if len(pending) > max_pending:
        oldest = sorted(pending, key=lambda b: b.created_version)[: len(pending) - max_pending]
        dropped = {b.id for b in oldest}
        bullets = [b for b in bullets if b.id not in dropped]
    if not promoted and len(bullets) == len(playbook.bullets):
        return playbook, 0
    return playbook.replace_bullets(bullets), promoted
