"""The text of a message's content, whether a plain string or a list of content blocks."""

from __future__ import annotations

from typing import Any

__all__ = ["message_text"]


def message_text(content: Any) -> str:
    """Return the text of a message's content, whether a string or content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return str(content)
