"""Appending a rendered playbook to an application's own system prompt.

The application's prompt always comes first and stays authoritative (the
playbook's header says so); the playbook is appended after it, so a provider's
prompt cache keyed on the application's prefix keeps hitting. Content blocks are
kept as they are (cache-control markers included) and the playbook becomes one
more text block; a string prompt gets the playbook after a blank line.
"""

from __future__ import annotations

from langchain_core.messages import SystemMessage

__all__ = ["join_prompt", "with_playbook"]


def join_prompt(base: str, playbook: str) -> str:
    """Return ``base`` followed by ``playbook`` after a blank line ('' parts dropped)."""
    if not playbook:
        return base
    if not base.strip():
        return playbook
    return f"{base.rstrip()}\n\n{playbook}"


def with_playbook(system: SystemMessage | None, playbook: str) -> SystemMessage | None:
    """Return ``system`` with ``playbook`` appended (``system`` itself when it is empty).

    Args:
        system: The application's system message, or None when it has none.
        playbook: The rendered playbook; '' leaves ``system`` untouched.

    Returns:
        A new message (the input is never mutated): the playbook alone when there
        was no system message; for a string content, the text joined with a blank
        line; for content blocks, the blocks followed by a text block.
    """
    if not playbook:
        return system
    if system is None:
        return SystemMessage(content=playbook)
    content = system.content
    if isinstance(content, str):
        return system.model_copy(update={"content": join_prompt(content, playbook)})
    blocks = [*content, {"type": "text", "text": playbook}]
    return system.model_copy(update={"content": blocks})
