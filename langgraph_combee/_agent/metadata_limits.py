"""Size limits on a trace's metadata: its size, its long strings cut, its entries dropped.

``Trace.metadata`` holds whatever the user passed, to any depth. What counts is
the text it is stored as (``_agent.buffer`` writes values JSON cannot carry as
their ``repr``):

* a string counts its characters; ``bytes`` the characters of their ``repr``
  (stored when they are not UTF-8, and never shorter than what is stored); a
  number, bool or None the characters it is written with;
* a dict counts its keys (non-str keys as their text) and its values; a list,
  tuple or set its items;
* any other object counts as its JSON form (``to_jsonable_python``, else its
  ``repr``).

A container met twice (shared, or holding itself) counts once and is walked
once. Every walk here keeps its own stack, so no nesting depth, cycle or size
makes it raise. (Metadata that holds itself cannot be stored, and the buffer
drops such a trace when it writes it; ``clip_metadata`` replaces the reference
with ``CYCLE`` in what it rebuilds.)

Cutting (``clip_metadata``): a string longer than the limit is cut as
``limits.clip_text`` cuts any field; so are ``bytes`` whose ``repr`` is longer,
and other objects whose JSON form holds such a string (they become that form,
cut). A container with something cut becomes a new dict or list (tuples and sets
become lists, as they are stored); the others stay the same objects. A key
longer than the limit is cut too, unless the caller keeps it, and a cut key that
would equal another key gets a suffix `` (2)``, `` (3)``... so no entry is lost.

Dropping (``drop_entries``): the last resort when a trace is still too large.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_core import to_jsonable_python

__all__ = ["clip_metadata", "drop_entries", "value_size"]

CYCLE = "[combee: a container holding itself]"
"""What a container's reference to itself (or to one holding it) becomes when it is cut."""

_SEQUENCES = (list, tuple, set, frozenset)
_PLAIN = (str, bytes, bytearray, int, float, type(None), dict, *_SEQUENCES)


def _plain(value: Any) -> Any:
    """``value`` as the JSON data it is stored as (its ``repr`` when it has none)."""
    if isinstance(value, _PLAIN):
        return value
    try:
        plain = to_jsonable_python(value, fallback=repr)
    except Exception:  # a failing __repr__, a model nested too deeply, ...
        plain = None
    if isinstance(plain, _PLAIN) and not isinstance(plain, (bytes, bytearray)):
        return plain
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


def _key_text(key: Any) -> str:
    """The text a mapping key is stored as (``bytes`` as their ``repr``)."""
    if isinstance(key, str):
        return key
    if isinstance(key, (bytes, bytearray)):
        return repr(key)
    try:
        return str(key)
    except Exception:  # an int too long to print, a failing __str__
        return f"<{type(key).__name__}>"


def _scalar_size(value: int | float | None) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return len(str(value))
        except ValueError:  # more digits than Python prints (sys.set_int_max_str_digits)
            return value.bit_length() * 3 // 10 + 1
    return len(repr(value))


def value_size(value: Any) -> int:
    """Characters of text ``value`` is stored as (see the module docstring)."""
    size = 0
    seen: dict[int, Any] = {}  # holds each container, so that no id is reused meanwhile
    stack = [value]
    while stack:
        item = _plain(stack.pop())
        if isinstance(item, str):
            size += len(item)
        elif isinstance(item, (bytes, bytearray)):
            size += len(repr(item))
        elif isinstance(item, (dict, *_SEQUENCES)):
            if id(item) in seen:
                continue
            seen[id(item)] = item
            if isinstance(item, dict):
                size += sum(len(_key_text(k)) for k in item)
                stack.extend(item.values())
            else:
                stack.extend(item)
        else:
            size += _scalar_size(item)
    return size


class _Frame:
    """A container being rebuilt: its entries, what each became, whether any changed."""

    __slots__ = ("changed", "done", "entries", "original", "source", "top")

    def __init__(self, source: Any, original: Any, *, top: bool = False) -> None:
        self.source = source  # the container walked: ``original`` or its JSON form
        self.original = original
        self.top = top
        self.entries: list[tuple[Any, Any]] = (
            list(source.items()) if isinstance(source, dict) else [(None, v) for v in source]
        )
        self.done: list[tuple[Any, Any]] = []
        self.changed = False

    def put(self, value: Any, was: Any) -> None:
        key = self.entries[len(self.done)][0]
        self.done.append((key, value))
        self.changed = self.changed or value is not was


def clip_metadata(
    metadata: dict[str, Any],
    limit: int,
    cut: Callable[[str], str],
    *,
    kept: Callable[[Any], bool],
) -> dict[str, Any]:
    """``metadata`` with every string longer than ``limit`` cut by ``cut`` (the same dict if none).

    Args:
        metadata: A trace's metadata.
        limit: Most characters of one string (``max_message_chars``).
        cut: Cuts one string and records the cut (``_Cutter.text``).
        kept: Whether a top-level key keeps its name whole (a key the package
            reads); long strings in its value are cut all the same.

    The value of ``combee_truncated`` (the record of earlier cuts) is left whole.
    """
    # id of each container walked: the container (held, so that its id is not
    # reused by another) and what it became.
    finished: dict[int, tuple[Any, Any]] = {}
    walking: set[int] = set()
    stack = [_Frame(metadata, metadata, top=True)]
    walking.add(id(metadata))
    result: Any = metadata
    while stack:
        frame = stack[-1]
        if len(frame.done) == len(frame.entries):
            stack.pop()
            walking.discard(id(frame.source))
            value = _rebuilt(frame, limit, cut, kept)
            finished[id(frame.original)] = (frame.original, value)
            if stack:
                stack[-1].put(value, frame.original)
            else:
                result = value
            continue
        key, child = frame.entries[len(frame.done)]
        if frame.top and key == "combee_truncated":
            frame.put(child, child)
            continue
        seen = finished.get(id(child))
        if seen is not None and seen[0] is child:
            frame.put(seen[1], child)
            continue
        plain = _plain(child)
        if isinstance(plain, (dict, *_SEQUENCES)):
            if id(plain) in walking:
                frame.put(CYCLE, child)
            else:
                walking.add(id(plain))
                stack.append(_Frame(plain, child))
            continue
        clipped = _clip_leaf(plain, limit, cut)
        frame.put(child if clipped is plain else clipped, child)
    assert isinstance(result, dict)
    return result


def _clip_leaf(value: Any, limit: int, cut: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return cut(value) if len(value) > limit else value
    # Each byte is at most 4 characters of the repr ("\x00"), in ``bytearray(b'')``.
    if isinstance(value, (bytes, bytearray)) and 4 * len(value) + 14 > limit:
        text = repr(value)
        return cut(text) if len(text) > limit else value
    return value


def _rebuilt(
    frame: _Frame, limit: int, cut: Callable[[str], str], kept: Callable[[Any], bool]
) -> Any:
    """What a walked container becomes: itself when nothing in it was cut."""
    if not isinstance(frame.source, dict):
        return [value for _, value in frame.done] if frame.changed else frame.original
    long = [
        key
        for key, _ in frame.done
        if len(_key_text(key)) > limit and not (frame.top and kept(key))
    ]
    if not long:
        return dict(frame.done) if frame.changed else frame.original
    taken = {key for key, _ in frame.done} - set(long)
    renamed: dict[Any, str] = {}
    for key in long:
        base = cut(_key_text(key))
        name, n = base, 2
        while name in taken:
            name, n = f"{base} ({n})", n + 1
        taken.add(name)
        renamed[key] = name
    return {renamed.get(key, key): value for key, value in frame.done}


def drop_entries(
    metadata: dict[str, Any], room: int, *, kept: Callable[[Any], bool]
) -> tuple[dict[str, Any], int, int]:
    """Drop entries of ``metadata`` from its end until it holds at most ``room`` characters.

    Entries whose key ``kept`` accepts are never dropped, so the result may
    still be larger than ``room``.

    Returns:
        The metadata (the same dict when nothing was dropped), how many
        entries were dropped, and the characters they held.
    """
    sizes = {key: len(_key_text(key)) + value_size(value) for key, value in metadata.items()}
    size = sum(sizes.values())
    dropped: set[Any] = set()
    for key in reversed(list(metadata)):
        if size <= room:
            break
        if not kept(key):
            dropped.add(key)
            size -= sizes[key]
    if not dropped:
        return metadata, 0, 0
    chars = sum(sizes[key] for key in dropped)
    return {k: v for k, v in metadata.items() if k not in dropped}, len(dropped), chars
