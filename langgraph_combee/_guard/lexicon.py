"""The guard's pattern families and lexicons, read from the TOML files in ``_guard/data``.

The words and phrasings the checks look for (instruction overrides, exfiltration, secrets,
personal data, loosened controls, grants, disclosures, money, every-user scopes, the verbs
and negations of many languages) are data: one file per family, each entry documenting what
it stops. This module is the engine that reads them, checks their shape and compiles them,
once, into the patterns the checks in ``patterns.py`` and ``scope.py`` use.

A file holds top-level tables, one per entry, or arrays of tables for a family of several
patterns (``[[override]]``; a family may take entries from several files, read in the order
of their names). Each entry has a ``doc`` (what it stops, or what it is for) and
exactly one value:

* ``pattern``: a list of regular-expression parts, joined. ``${name}`` inserts the text of
  the ``pattern`` or ``verbs`` entry ``name`` (from any file) as it stands;
* ``verbs``: English verbs, expanded to every form ("share": share, shares, shared,
  sharing; irregular forms from the ``irregular`` map) as an alternation, longest first;
  ``"${name}"`` in the list takes in the verbs of the ``verbs`` entry ``name``;
* ``words``: a word list, for code that looks words up;
* ``map``: a string-to-string table (look-alike letters, irregular verb forms).

A ``pattern`` entry may also set ``fold = true`` (it reads folded text: its own accents are
taken off, as ``patterns.fold`` takes them off the text), ``flags`` (``"ignorecase"``,
``"multiline"``, ``"dotall"``) and, in a family, ``label`` (the name a finding reports).
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, from PyPI, before it joined the standard library
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

DATA_PACKAGE = "langgraph_combee._guard"
DATA_FOLDER = "data"

Kind = Literal["pattern", "verbs", "words", "map"]
_KINDS: tuple[Kind, ...] = ("pattern", "verbs", "words", "map")
_OPTIONS = frozenset({"doc", "fold", "flags", "label"})
_FLAGS = {"ignorecase": re.IGNORECASE, "multiline": re.MULTILINE, "dotall": re.DOTALL}
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_MARKS = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u20d0-\u20ff]")
PATTERN_CHARS = 50_000
"""Longest text a pattern or a verbs entry may expand to (the longest shipped is about 2,300):
references that insert an entry twice at every level would otherwise double it each time."""
WIDE_REPEAT = 64
"""Most times a repeat may match and still be bounded where it repeats inside another repeat."""


class LexiconError(ValueError):
    """A data file of the guard is malformed: the message names the file and the entry."""


@dataclass(frozen=True)
class Entry:
    """One documented entry of a data file.

    Attributes:
        file: The file it comes from (``override.toml``).
        name: Its name; in a family, ``family[i]``.
        doc: What it stops, or what it is for.
        kind: ``pattern``, ``verbs``, ``words`` or ``map``.
        parts: The pattern's parts, the verbs or the words (empty for a map).
        mapping: The map (empty for the other kinds).
        fold: Whether the pattern reads folded text (its accents are taken off).
        flags: The ``re`` flags it is compiled with.
        label: What a finding of it is reported as (a family's entries), or "".
    """

    file: str
    name: str
    doc: str
    kind: Kind
    parts: tuple[str, ...] = ()
    mapping: Mapping[str, str] | None = None
    fold: bool = False
    flags: int = 0
    label: str = ""


@dataclass(frozen=True)
class Lexicon:
    """Every entry of the data files, by name; families (arrays of tables) by family name."""

    entries: Mapping[str, Entry]
    families: Mapping[str, tuple[Entry, ...]]


def unaccented(text: str) -> str:
    """``text`` without combining marks (NFKD, marks removed, NFKC): "nötig" -> "notig"."""
    return unicodedata.normalize("NFKC", _MARKS.sub("", unicodedata.normalize("NFKD", text)))


def _fail(file: str, name: str, problem: str) -> LexiconError:
    return LexiconError(f"guard data file {file!r}, entry {name!r}: {problem}")


def _strings(file: str, name: str, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise _fail(file, name, f"{key!r} must be a non-empty list of strings, got {value!r}")
    return tuple(value)


def _entry(file: str, name: str, raw: Any) -> Entry:
    if not isinstance(raw, dict):
        raise _fail(file, name, f"must be a table with a 'doc' and a value, got {raw!r}")
    kinds = [k for k in _KINDS if k in raw]
    unknown = sorted(set(raw) - _OPTIONS - set(_KINDS))
    if unknown:
        allowed = ", ".join(sorted(_OPTIONS | set(_KINDS)))
        raise _fail(file, name, f"unknown key {unknown[0]!r} (allowed: {allowed})")
    if len(kinds) != 1:
        raise _fail(file, name, f"needs exactly one of {', '.join(_KINDS)}, got {kinds or None}")
    kind = kinds[0]
    doc = raw.get("doc")
    if not isinstance(doc, str) or not doc.strip():
        raise _fail(file, name, f"'doc' must say what the entry stops, got {doc!r}")
    fold = raw.get("fold", False)
    if not isinstance(fold, bool):
        raise _fail(file, name, f"'fold' must be true or false, got {fold!r}")
    names = raw.get("flags", [])
    if not isinstance(names, list) or any(f not in _FLAGS for f in names):
        raise _fail(file, name, f"'flags' must list some of {', '.join(_FLAGS)}, got {names!r}")
    label = raw.get("label", "")
    if not isinstance(label, str):
        raise _fail(file, name, f"'label' must be a string, got {label!r}")
    if kind != "pattern" and (fold or names or label):
        raise _fail(file, name, "'fold', 'flags' and 'label' apply to a 'pattern' only")
    flags = 0
    for flag in names:
        flags |= _FLAGS[flag]
    if kind == "map":
        mapping = raw["map"]
        if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
            raise _fail(file, name, f"'map' must map strings to strings, got {mapping!r}")
        return Entry(file=file, name=name, doc=doc, kind=kind, mapping=dict(mapping))
    parts = _strings(file, name, kind, raw[kind])
    return Entry(
        file=file, name=name, doc=doc, kind=kind, parts=parts, fold=fold, flags=flags, label=label
    )


def parse(file: str, text: str) -> dict[str, Entry | tuple[Entry, ...]]:
    """The entries of one data file (its ``text``), checked; families as tuples.

    Raises:
        LexiconError: The file is not TOML, or an entry is malformed (the message names the
            file and the entry).
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LexiconError(f"guard data file {file!r} is not valid TOML: {exc}") from exc
    out: dict[str, Entry | tuple[Entry, ...]] = {}
    for name, raw in data.items():
        if not _NAME.match(name):
            raise _fail(file, name, "names are lower-case words joined by '_'")
        if isinstance(raw, list):
            if not raw:
                raise _fail(file, name, "a family needs at least one entry")
            out[name] = tuple(_entry(file, f"{name}[{i}]", r) for i, r in enumerate(raw))
        else:
            out[name] = _entry(file, name, raw)
    return out


def build(files: Mapping[str, str]) -> Lexicon:
    """The lexicon of data files given as name -> TOML text; every pattern compiled once.

    Raises:
        LexiconError: A file or an entry is malformed, two files define the same entry, a
            ``${name}`` names no entry or loops, or a pattern does not compile.
    """
    entries: dict[str, Entry] = {}
    families: dict[str, tuple[Entry, ...]] = {}
    for file in sorted(files):
        for name, found in parse(file, files[file]).items():
            for entry in found if isinstance(found, tuple) else ():
                if entry.kind != "pattern":
                    # A family is compiled when a check first reads it: a wrong kind
                    # there would fail the guard's first screening, not this read.
                    raise _fail(
                        entry.file, entry.name, f"a family's entries are patterns, not {entry.kind}"
                    )
            if isinstance(found, tuple) and name in families:
                # A family may take entries from several files: a new file of
                # [[override]] entries adds to the shipped ones.
                families[name] = (*families[name], *found)
                continue
            if name in entries or name in families:
                where = (entries.get(name) or families[name][0]).file
                raise _fail(file, name, f"is defined in {where!r} too")
            if isinstance(found, tuple):
                families[name] = found
            else:
                entries[name] = found
    lexicon = Lexicon(entries=entries, families=families)
    for entry in [*entries.values(), *(e for family in families.values() for e in family)]:
        if entry.kind == "pattern":
            _compile(lexicon, entry)
        elif entry.kind == "verbs":
            _text(lexicon, entry, (entry.name,))
    return lexicon


def _forms(verb: str, irregular: Mapping[str, str]) -> list[str]:
    """``verb`` (its first word) in every English form: "share" -> shares, shared, sharing."""
    head, space, rest = verb.partition(" ")
    if head.endswith("e"):
        forms = [head, head + "s", head + "d", head[:-1] + "ing"]
    elif head.endswith("y") and head[-2:-1] not in "aeiou":
        forms = [head, head[:-1] + "ies", head[:-1] + "ied", head + "ing"]
    elif head.endswith(("sh", "ch", "x", "s", "o")):
        forms = [head, head + "es", head + "ed", head + "ing"]
    else:
        forms = [head, head + "s", head + "ed", head + "ing"]
    forms.extend(irregular.get(head, "").split())
    return [f + space + rest for f in dict.fromkeys(forms)]


def _verb_list(lexicon: Lexicon, entry: Entry, seen: tuple[str, ...]) -> list[str]:
    # A verbs entry may take in another's verbs: "${share}" in a list of verbs.
    out = []
    for verb in entry.parts:
        included = _REFERENCE.fullmatch(verb)
        if included is None:
            out.append(verb)
            continue
        name = included.group(1)
        found = lexicon.entries.get(name)
        if name in seen or found is None or found.kind != "verbs":
            raise _fail(entry.file, entry.name, f"{verb!r} names no other verbs entry")
        out.extend(_verb_list(lexicon, found, (*seen, name)))
        if len(out) > PATTERN_CHARS:
            raise _fail(entry.file, entry.name, f"takes in more than {PATTERN_CHARS} verbs")
    return out


def _text(lexicon: Lexicon, entry: Entry, seen: tuple[str, ...] = ()) -> str:
    if entry.kind == "verbs":
        irregular = lexicon.entries.get("irregular")
        table = irregular.mapping if irregular is not None and irregular.mapping else {}
        forms = {f for verb in _verb_list(lexicon, entry, seen) for f in _forms(verb, table)}
        # Longest first, so that "read out" is tried before "read"; ties in a fixed order.
        return "|".join(sorted(forms, key=lambda f: (-len(f), f)))
    if entry.kind != "pattern":
        raise _fail(entry.file, entry.name, f"is a {entry.kind} entry, not a pattern")

    def insert(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in seen:
            loop = " -> ".join([*seen, name])
            raise _fail(entry.file, entry.name, f"'${{{name}}}' refers to itself ({loop})")
        found = lexicon.entries.get(name)
        if found is None or found.kind not in ("pattern", "verbs"):
            raise _fail(entry.file, entry.name, f"'${{{name}}}' names no pattern or verbs entry")
        return _text(lexicon, found, (*seen, name))

    expanded = _REFERENCE.sub(insert, "".join(entry.parts))
    if len(expanded) > PATTERN_CHARS:
        raise _fail(
            entry.file,
            entry.name,
            f"expands to {len(expanded)} characters, longer than {PATTERN_CHARS} "
            "(does it insert an entry that inserts another twice?)",
        )
    return expanded


def _compile(lexicon: Lexicon, entry: Entry) -> re.Pattern[str]:
    text = _text(lexicon, entry, (entry.name,))
    try:
        compiled = re.compile(unaccented(text) if entry.fold else text, entry.flags)
    except re.error as exc:
        raise _fail(entry.file, entry.name, f"does not compile: {exc}") from exc
    nested = repeated_repeat(compiled.pattern, compiled.flags)
    if nested is not None:
        raise _fail(
            entry.file,
            entry.name,
            f"repeats a repeat ({nested}): a search would try every split of a long run; "
            f"bound the inner repeat to at most {WIDE_REPEAT} ({{1,{WIDE_REPEAT}}})",
        )
    return compiled


def repeated_repeat(pattern: str, flags: int = 0) -> str | None:
    """Where ``pattern`` repeats, without a bound, a part that itself repeats without one.

    ``(a+)+``, ``(?:\\w+\\s*)*``: on a long run the search backtracks over every way of
    splitting it between the two repeats, from every start (exponential or polynomial in
    the run). A repeat of at most ``WIDE_REPEAT`` (``{1,63}``) and a possessive one are
    bounded. Alternatives that overlap inside a repeat (``(?:a|ab)*``) are not found here.

    Returns:
        The outer repeat's text as ``re`` parsed it (its bounds), or None.
    """
    parser = _parser()

    def wide(code: Any, bounds: Any) -> bool:
        return str(code) in ("MAX_REPEAT", "MIN_REPEAT") and bounds[1] > WIDE_REPEAT

    def walk(items: Any, inside: str | None) -> str | None:
        for code, value in items:
            name = str(code)
            if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                low, high, body = value
                if wide(code, value):
                    if inside is not None:
                        return inside
                    bound = "" if high > 10**6 else str(high)
                    found = walk(body, f"a part repeated {{{low},{bound}}}")
                else:
                    found = walk(body, inside)
            elif name == "SUBPATTERN":
                found = walk(value[-1], inside)
            elif name == "BRANCH":
                found = next((f for b in value[1] if (f := walk(b, inside))), None)
            elif name == "ATOMIC_GROUP":
                found = walk(value, inside)
            elif name in ("ASSERT", "ASSERT_NOT"):
                found = walk(value[1], inside)
            elif name == "GROUPREF_EXISTS":
                found = walk(value[1], inside) or (walk(value[2], inside) if value[2] else None)
            else:
                found = None
            if found is not None:
                return found
        return None

    return walk(parser.parse(pattern, flags), None)


def _parser() -> Any:
    """The standard library's regular-expression parser (``re._parser``, ``sre_parse``)."""
    with warnings.catch_warnings():
        # Importing ``sre_parse`` on Python 3.11 and later warns: it became ``re._parser``.
        warnings.simplefilter("ignore", DeprecationWarning)
        import sre_parse

    return sre_parse


def data_files() -> dict[str, str]:
    """Every ``*.toml`` file of ``_guard/data``, read as package data (name -> text)."""
    folder = resources.files(DATA_PACKAGE).joinpath(DATA_FOLDER)
    return {
        item.name: item.read_text(encoding="utf-8")
        for item in folder.iterdir()
        if item.name.endswith(".toml")
    }


@functools.cache
def shipped() -> Lexicon:
    """The lexicon of the data files shipped with the package, read and compiled once."""
    return build(data_files())


def _get(name: str) -> Entry:
    entry = shipped().entries.get(name)
    if entry is None:
        raise KeyError(f"no guard data entry {name!r}")
    return entry


def text(name: str) -> str:
    """The regular-expression text of the ``pattern`` or ``verbs`` entry ``name``."""
    entry = _get(name)
    return _text(shipped(), entry, (name,))


@functools.cache
def pattern(name: str) -> re.Pattern[str]:
    """The ``pattern`` entry ``name``, compiled (once)."""
    return _compile(shipped(), _get(name))


@functools.cache
def family(name: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The family ``name`` (an array of tables): each entry's label and compiled pattern."""
    lexicon = shipped()
    entries = lexicon.families.get(name)
    if entries is None:
        raise KeyError(f"no guard data family {name!r}")
    return tuple((e.label, _compile(lexicon, e)) for e in entries)


def words(name: str) -> tuple[str, ...]:
    """The ``words`` entry ``name``."""
    entry = _get(name)
    if entry.kind != "words":
        raise _fail(entry.file, entry.name, f"is a {entry.kind} entry, not words")
    return entry.parts


def mapping(name: str) -> dict[str, str]:
    """The ``map`` entry ``name``."""
    entry = _get(name)
    if entry.mapping is None:
        raise _fail(entry.file, entry.name, f"is a {entry.kind} entry, not a map")
    return dict(entry.mapping)
