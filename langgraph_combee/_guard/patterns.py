"""The deterministic checks of ``BulletGuard``: text variants and the patterns run on them.

Every check reads several variants of the text so that simple obfuscation does
not hide a payload: Unicode-normalised and case-folded, with zero-width and
control characters removed and look-alike letters mapped to Latin; with
"l33t" digits read as letters; with letters spelt out one by one joined up;
HTML entities and %-escapes decoded; base64 runs decoded; ROT13; reversed.

The patterns themselves (override, exfiltration, secrets, personal data, policy
changes, negation, the look-alike tables...) are data: ``_guard/data/*.toml``, compiled
once by ``lexicon``. This module holds what is code: the readings, the decoders and
the logic that tells whose act or data a rule is about. Pure functions; the data files
are read once, at import.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import json
import re
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_combee._guard import lexicon

_INVISIBLE = lexicon.pattern("invisible")
_TAG_RUN = re.compile(r"[\U000e0020-\U000e007e]+")


def _tag_text(text: str) -> list[str]:
    # Tag characters mirror printable ASCII (U+E0020 is a space): what they spell is
    # hidden from a reader but not from a model, so it is read out and screened.
    return ["".join(chr(ord(c) - 0xE0000) for c in run.group(0)) for run in _TAG_RUN.finditer(text)]


_CONFUSABLES = str.maketrans(lexicon.mapping("confusables"))
_LEET = str.maketrans(lexicon.mapping("leet"))
_SPELLED = re.compile(r"(?<!\w)(?:\w[\s.\-_*/+]{1,3}){3,}\w(?!\w)")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_HEX = re.compile(r"(?<![0-9a-f])(?:[0-9a-f]{2}){8,}(?![0-9a-f])", re.IGNORECASE)


def _decode_base64(run: str) -> str | None:
    padded = run + "=" * (-len(run) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            raw = decode(padded)
        except (binascii.Error, ValueError):
            continue
        text = _printable(raw)
        if text:
            return text
    return None


def _printable(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(ch.isprintable() or ch.isspace() for ch in text)
    return text if text and printable / len(text) > 0.9 else None


def _decode_hex(run: str) -> str | None:
    # Random ids and hashes are hex too, but they rarely decode to printable UTF-8.
    return _printable(bytes.fromhex(run))


def _decoded(text: str) -> list[str]:
    """What the base64 and hex runs of ``text`` decode to (runs that decode to text)."""
    runs = [*map(_decode_base64, _BASE64.findall(text)), *map(_decode_hex, _HEX.findall(text))]
    return [d for d in runs if d]


def _join_spelled(run: str) -> str:
    # "i.g.n.o.r.e a.l.l" keeps spaces as word breaks; "i g n o r e  a l l" keeps
    # the wider gaps; either way the letters of one word are joined up.
    if re.search(r"\w[.\-_*/+]\w", run):
        return " ".join(re.sub(r"[.\-_*/+]", "", w) for w in run.split())
    return " ".join(w.replace(" ", "") for w in re.split(r"\s{2,}", run))


# Identifiers hide their words from word-boundary stems: "verify_identity", "auto-approve-limit",
# "STRIPE_SECRET_KEY", "requireManagerApproval". An identifier is read as its words where it is
# a setting (``name = value``, ``name: value``), written in capitals (an environment variable or
# a constant) or four words or more (a sentence joined up). A short lower-case name
# (``issue_refund``, ``lookupOrder``) names one of the agent's tools or fields and is kept
# whole: read as "issue refund", every rule that calls the refund tool would be held.
_IDENTIFIER = re.compile(r"(?<![\w-])[^\W_]+(?:(?:[_-]+|(?<=[a-z])(?=[A-Z]))[^\W_]+)+(?![\w-])")
_PART = re.compile(r"[_-]+|(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SETTING = re.compile(
    r"[\"'`]?\s*(?:=(?!=)|:\s*[\"'`]?[\w.%-]+[\"'`]?\s*(?:$|[\n,;}\]]))", re.MULTILINE
)


def identifier_words(text: str) -> str:
    """``text`` with its settings, constants and long identifiers read as their words:
    ``verify_identity = false`` -> "verify identity = false", ``STRIPE_SECRET_KEY`` -> "STRIPE
    SECRET KEY"; ``issue_refund`` stays whole."""

    def words(match: re.Match[str]) -> str:
        name = match.group(0)
        parts = [p for p in _PART.split(name) if p]
        if "_" in name and name.upper() == name and any(c.isalpha() for c in name):
            return " ".join(parts)
        if len(parts) >= 4 or _SETTING.match(text, match.end()):
            return " ".join(parts)
        return name

    return _IDENTIFIER.sub(words, text)


def _basic(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = _INVISIBLE.sub("", text).casefold().translate(_CONFUSABLES)
    return " ".join(text.split())


def variants(text: str) -> list[str]:
    """Readings of ``text`` the patterns run on (the plain one first, duplicates removed)."""
    unescaped = urllib.parse.unquote(html.unescape(text))
    plain = _basic(unescaped)
    native = " ".join(
        _INVISIBLE.sub("", unicodedata.normalize("NFKC", unescaped)).casefold().split()
    )
    out = [plain, plain.translate(_LEET)]
    spaced = _INVISIBLE.sub("", unicodedata.normalize("NFKC", unescaped)).casefold()
    spelled = _SPELLED.sub(lambda m: _join_spelled(m.group(0)), spaced.translate(_CONFUSABLES))
    out.append(" ".join(spelled.split()))
    out.append(out[-1].translate(_LEET))
    out.extend(_basic(d) for d in _decoded(unescaped))
    out.append(codecs.encode(plain, "rot13"))
    out.append(plain[::-1])
    out.append(native)
    split = identifier_words(unescaped)
    if split != unescaped:
        out.append(_basic(split))
    return list(dict.fromkeys(out))


_COMMON = frozenset(lexicon.words("common_words"))


def _wordiness(text: str) -> int:
    return sum(w in _COMMON for w in re.findall(r"[a-z]+", text))


def decoded_readings(text: str) -> list[str]:
    """The readings of ``text`` that an encoding hid, for checks that read only plain text.

    %-escapes and HTML entities decoded (when there are any), base64 and hex runs
    decoded, and the ROT13 and reversed readings where they read as English more
    than the text itself does (every text has those two readings; only an encoded
    one gains words like "the", "may" and "for" from them).
    """
    unescaped = urllib.parse.unquote(html.unescape(text))
    plain = _basic(unescaped)
    out = [plain] if unescaped != text else []
    out.extend(_basic(d) for d in _decoded(unescaped))
    base = _wordiness(plain)
    for other in (codecs.encode(plain, "rot13"), plain[::-1]):
        if _wordiness(other) >= 2 and _wordiness(other) > base:
            out.append(other)
    return list(dict.fromkeys(out))


# ---- the checks ---------------------------------------------------------------

_NEGATED = lexicon.pattern("negated")


OVERRIDE: tuple[re.Pattern[str], ...] = tuple(p for _, p in lexicon.family("override"))

EXFILTRATION: tuple[re.Pattern[str], ...] = tuple(p for _, p in lexicon.family("exfiltration"))

SECRETS: tuple[tuple[str, re.Pattern[str]], ...] = lexicon.family("secret")
_TOKEN_LIKE = lexicon.pattern("token_like")

_EMAIL = lexicon.pattern("email")
_PHONE = lexicon.pattern("phone")
_SSN = lexicon.pattern("ssn")
_UK_NINO = lexicon.pattern("uk_nino")
_IBAN = lexicon.pattern("iban")
_URL = lexicon.pattern("url")


def _not_negated(text: str, match: re.Match[str]) -> bool:
    return _NEGATED.search(text[max(0, match.start() - 30) : match.start()]) is None


def _first(
    patterns: Sequence[re.Pattern[str]], texts: Sequence[str], *, negatable: bool = False
) -> str | None:
    for text in texts:
        for pattern in patterns:
            for match in pattern.finditer(text):
                if not negatable or _not_negated(text, match):
                    return " ".join(match.group(0).split())[:60]
    return None


def find_override(texts: Sequence[str]) -> str | None:
    """The first instruction-override phrase in any variant, or None."""
    return _first(OVERRIDE, texts)


def find_exfiltration(texts: Sequence[str]) -> str | None:
    """The first request to send or reveal data or credentials (not negated), or None."""
    return _first(EXFILTRATION, texts, negatable=True)


def find_secret(raw: str, texts: Sequence[str]) -> str | None:
    """The kind of the first secret-shaped string, or None."""
    for text in texts:
        for kind, pattern in SECRETS:
            if pattern.search(text):
                return kind
    for token in _TOKEN_LIKE.findall(raw):
        classes = sum(
            (any(c.islower() for c in token), any(c.isupper() for c in token),
             any(c.isdigit() for c in token))
        )  # fmt: skip
        if classes == 3:
            return "high-entropy token"
    return None


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def find_personal_data(texts: Sequence[str]) -> str | None:
    """The kind of the first personal datum (email, phone, card, national id), or None."""
    text = texts[0]
    if _EMAIL.search(text):
        return "email address"
    for match in _PHONE.finditer(text):
        digits = re.sub(r"\D", "", match.group(0))
        if 13 <= len(digits) <= 19 and _luhn(digits):
            return "card number"
        if 9 <= len(digits) <= 15:
            return "phone number"
    if _SSN.search(text):
        return "national id number"
    if _UK_NINO.search(text):
        return "national id number"
    if _IBAN.search(text) and sum(c.isdigit() for c in text) >= 10:
        return "bank account number"
    return None


def _digits(text: str) -> str:
    # Every digit of ``text`` as an ASCII digit, whatever script wrote it.
    return "".join(str(unicodedata.digit(c)) for c in re.sub(r"\D", "", text))


def phone_numbers(text: str) -> list[str]:
    """The digits of each phone number ``find_personal_data`` would find in ``text``, as ASCII
    digits whatever the script wrote them in ("０８００", "٠٨٠٠")."""
    found = []
    for match in _PHONE.finditer(text):
        digits = _digits(match.group(0))
        if 9 <= len(digits) <= 15 and not (len(digits) >= 13 and _luhn(digits)):
            found.append(digits)
    return found


_DIGIT_WORDS = {
    "zero": "0", "oh": "0", "o": "0", "nought": "0", "one": "1", "two": "2", "three": "3",
    "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
    "hundred": "00", "thousand": "000",
}  # fmt: skip
_SPOKEN = re.compile(
    r"\b(?:(?:double|triple|" + "|".join(_DIGIT_WORDS) + r")(?:[\s,-]+|\b)){4,}", re.IGNORECASE
)


def _spoken(run: str) -> str:
    out: list[str] = []
    times = 1
    for word in re.findall(r"[a-z]+", run.casefold()):
        if word in ("double", "triple"):
            times = 2 if word == "double" else 3
            continue
        out.append(_DIGIT_WORDS[word] * times)
        times = 1
    return " " + "".join(out) + " "


def spoken_digits(text: str) -> str:
    """``text`` with each run of four or more English digit words ("oh eight hundred three
    one six...", "double two") written in digits: a number said in words is still a number."""
    return _SPOKEN.sub(lambda m: _spoken(m.group(0)), text)


def same_number(a: str, b: str) -> bool:
    """Whether the digits ``a`` and ``b`` are one phone number, written with or without its
    country code (of at most three digits) or trunk zero ("+44 800 316 2020", "0800 316 2020",
    "800 316 2020")."""
    a, b = a.lstrip("0"), b.lstrip("0")
    short, long = sorted((a, b), key=len)
    return len(short) >= 7 and long.endswith(short) and len(long) - len(short) <= 3


def without_numbers(text: str, numbers: Sequence[str]) -> str:
    """``text`` with each phone number ``same_number`` as one of ``numbers`` taken out."""

    def drop(match: re.Match[str]) -> str:
        digits = _digits(match.group(0))
        return " " if any(same_number(digits, n) for n in numbers) else match.group(0)

    return _PHONE.sub(drop, text)


def find_urls(texts: Sequence[str]) -> Iterator[str]:
    """Every URL or bare domain in the plain and de-obfuscated variants."""
    seen: set[str] = set()
    for text in texts[:4]:
        for match in _URL.finditer(text):
            url = match.group(0).rstrip(".,;:!?")
            if url not in seen:
                seen.add(url)
                yield url


def host_of(url: str) -> str:
    """The host name of a URL or bare domain (lower case, no port); "" if it has none.

    A URL the parser refuses ("http://[evil.example") has no host an allow-list names.
    """
    try:
        parsed = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
        host = parsed.hostname or ""
    except ValueError:
        return ""
    return host.lower().removeprefix("www.")


# ---- markup and role-play: what a reader would not see, or a model would obey --------------

_HTML_COMMENT = re.compile(r"<!--(.*?)(?:-->|$)", re.DOTALL)
# A markdown link-reference definition used as a comment: "[//]: # (text)", "[x]: <> (text)".
# The "[//]: # (text)" idiom anywhere (a learner may have joined the lines), and any
# link-reference definition at the start of a line (also invisible when rendered).
_MD_COMMENT = re.compile(
    r"\[[^\]\n]*\]:[ \t]*(?:#|<>)[ \t]*[(\"'](.*?)(?:[)\"']|$)"
    r"|^[ \t]*\[[^\]\n]*\]:[ \t]*\S+[ \t]*[(\"'](.*?)[)\"']?[ \t]*$",
    re.MULTILINE,
)
_CHAT_TOKENS = lexicon.pattern("chat_tokens")
_TAG = re.compile(r"</?[a-z][a-z0-9_-]*(?:\s[^<>]*)?/?>", re.IGNORECASE)
_ROLE_FENCE = lexicon.pattern("role_fence")
_ROLE_KEY = lexicon.pattern("role_key")


@dataclass(frozen=True)
class Markup:
    """Text with its markup and role-play taken out, and what was found.

    Attributes:
        visible: What a reader of the rendered text sees, normalised.
        hidden: The text inside comments and role objects (screened too).
        kinds: The kinds of markup found (``html comment``, ``json role object``...).
    """

    visible: str
    hidden: tuple[str, ...]
    kinds: tuple[str, ...]


def _json_roles(text: str) -> tuple[str, list[str]]:
    # Every JSON value in the text that carries a "role" key is a role-play object:
    # it is cut out and its string contents kept for screening.
    if "role" not in text.casefold():
        return text, []  # nothing to look for: skip the scan (traces can be long)
    decoder = json.JSONDecoder()
    out, hidden, pos = [], [], 0
    i = 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            if _has_role(value):
                out.append(text[pos:i])
                hidden.extend(_strings(value))
                pos = i = end
                continue
        i += 1
    out.append(text[pos:])
    return "".join(out), hidden


def _has_role(value: Any) -> bool:
    if isinstance(value, dict):
        return "role" in {str(k).lower() for k in value} or any(map(_has_role, value.values()))
    if isinstance(value, list):
        return any(map(_has_role, value))
    return False


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


_LOOKALIKE_SCRIPTS = lexicon.words("lookalike_scripts")


def _scripts(word: str) -> set[str]:
    # A word that mixes Latin with Cyrillic or Greek letters is a spoof: honest text in
    # those languages writes whole words in one script.
    found: set[str] = set()
    for ch in word:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            found.update(s for s in _LOOKALIKE_SCRIPTS if name.startswith(s))
    return found


def fold(text: str) -> str:
    """Normalise for comparison: NFKC, no invisibles or combining marks, case-folded, look-alikes
    mapped to Latin, whitespace collapsed. Works on any script (others pass unchanged)."""
    text = lexicon.unaccented(_INVISIBLE.sub("", unicodedata.normalize("NFKC", text)))
    text = text.casefold().translate(_CONFUSABLES)
    return " ".join(text.split())


def strip_markup(text: str) -> Markup:
    """Take comments, role objects, chat-template tokens and tags out of ``text``."""
    kinds: list[str] = []
    hidden: list[str] = []
    raw = html.unescape(unicodedata.normalize("NFKC", text))
    for kind, pattern in (("html comment", _HTML_COMMENT), ("markdown comment", _MD_COMMENT)):
        found = [next((g for g in m.groups() if g), "") for m in pattern.finditer(raw)]
        if found:
            kinds.append(kind)
            hidden.extend(found)
            raw = pattern.sub(" ", raw)
    raw, roles = _json_roles(raw)
    if roles:
        kinds.append("json role object")
        hidden.extend(roles)
    if _ROLE_KEY.search(raw):
        kinds.append("role key")
    if _CHAT_TOKENS.search(raw):
        kinds.append("chat-template token")
        raw = _CHAT_TOKENS.sub(" ", raw)
    if _ROLE_FENCE.search(raw):
        kinds.append("role-labelled code block")
    if _TAG.search(raw):
        kinds.append("markup tag")
        raw = _TAG.sub(" ", raw)
    if _INVISIBLE.search(text):
        kinds.append("invisible characters")
        hidden.extend(_tag_text(text))
    if any(len(_scripts(word)) > 1 for word in re.findall(r"\w+", raw)):
        kinds.append("mixed-script look-alikes")
    return Markup(visible=fold(raw), hidden=tuple(fold(h) for h in hidden if h.strip()),
                  kinds=tuple(kinds))  # fmt: skip


# ---- policy changes: rules a person must approve, whatever their wording --------------------
# Each family is a set of stems in several languages; a rule is held when a loosening
# word meets a control word, or a grant, disclosure or money-moving phrase appears.
# These are one signal among several (links, amounts, provenance, the judge): see
# ``_guard/guard.py``. The families live in ``_guard/data/policy_*.toml`` and
# ``contacts.toml``; each entry there says what it holds.

_LOOSEN = lexicon.pattern("loosen")
_FORBID_CHECK = lexicon.pattern("forbid_check")
_CONTROL = lexicon.pattern("control")
_TURN_OFF = lexicon.pattern("turn_off")
_ALERT = lexicon.pattern("alert")
_GRANT = lexicon.pattern("grant")
_DISCLOSE = lexicon.pattern("disclose")
_DISCLOSE_CODE = lexicon.pattern("disclose_code")
_MONEY = lexicon.pattern("money")
_MONEY_MOVE = lexicon.pattern("money_move")
_CURRENCY = lexicon.pattern("currency")
_LIMIT = lexicon.pattern("limit")
_AMOUNT = lexicon.pattern("amount")
_PERCENT = lexicon.pattern("percent")
_GROUPED = lexicon.pattern("grouped")
_DEFANGED = lexicon.pattern("defanged")
_HANDLE = lexicon.pattern("handle")
_WAIVE_CHARGE = lexicon.pattern("waive_charge")
_SWITCHED_OFF = lexicon.pattern("switched_off")
_CONDITION = lexicon.pattern("condition")
_PERSONAL = lexicon.pattern("personal")
_PERSONAL_VERB = lexicon.pattern("personal_verb")
_AGENT_GAINS = lexicon.pattern("agent_gains")
_DESTINATION = lexicon.pattern("destination")
_AUDIENCE = lexicon.pattern("audience")
_READ_ALOUD = lexicon.pattern("read_aloud")
_CLAUSE_END = lexicon.pattern("clause_end")
_NEAR_WORDS = 5
_REPLACED = lexicon.pattern("replaced")
_PARTICIPLE = lexicon.pattern("participle")
_AUXILIARY = frozenset(lexicon.words("auxiliary"))
_QUOTED = lexicon.pattern("quoted")


def _subject(text: str, start: int) -> str:
    """The subject before ``start`` that a participle or "deprecated" says is turned off: up
    to five words of the clause, auxiliaries left out; from its last quoted name on, or after
    its last possessive ("the check_stock tool's 'warehouse' argument" is the argument)."""
    head = text[max(0, start - 120) : start]
    ends = list(_CLAUSE_END.finditer(head))
    words = (head[ends[-1].end() :] if ends else head).split()
    while words and words[-1] in _AUXILIARY:
        words.pop()
    words = words[-_NEAR_WORDS:]
    for n in range(len(words) - 1, -1, -1):
        if _QUOTED.match(words[n]):
            return " ".join(words[n:])
        if words[n].endswith(("'s", "s'", "’s")) and n < len(words) - 1:
            return " ".join(words[n + 1 :])
    return " ".join(words)


def _near(text: str, match: re.Match[str], *, before: bool) -> str:
    """``match`` with the words of its clause after it (five), and if ``before`` its subject
    (what a participle or "deprecated" says is turned off comes first)."""
    after = text[match.end() : match.end() + 160]
    subject = _subject(text, match.start()) if before else ""
    cut = _CLAUSE_END.search(after)
    if cut and not after[: cut.start()].strip():
        # No object before the clause ends: it follows an aside ("turn off, for anyone who
        # asks, the login alerts"); read on over the commas.
        after = re.split(r"[;:!?()\n]|\.(?!\w)", after)[0].replace(",", " ")
        return " ".join([subject, match.group(0), " ".join(after.split()[: 3 * _NEAR_WORDS])])
    after = after[: cut.start()] if cut else after
    return " ".join([subject, match.group(0), " ".join(after.split()[:_NEAR_WORDS])])


def _controls(text: str) -> set[str]:
    return {m.group(0) for m in _CONTROL.finditer(text)} | {
        m.group(0) for m in _ALERT.finditer(text)
    }


def _turned_off(text: str) -> str | None:
    """A control the rule opts out of, turns off, mutes or retires; or an alert it loosens.

    The control must be what is turned off, in the clause: "opt out of the login alerts",
    "turn the password warnings off", "the 2FA flow is deprecated"; not "opt out of marketing
    emails and confirm". A thing retired for a replacement that keeps its controls is a
    migration ("verify_address is deprecated; call verify_address_v2"). A loosening word of
    ``_LOOSEN`` holds the rule with an alert only where the alert is what it loosens ("skip the
    login alerts", "login alerts can be skipped").
    """
    routed = _without_routing(text)
    for match in _all_acts(_TURN_OFF, routed):
        if _as_adjective(routed, match.start()):
            continue  # "the opt-out is confirmed by a reply SMS" names the choice
        retired = match.group(0).startswith("deprecat")
        near = _near(routed, match, before=retired or bool(_PARTICIPLE.match(match.group(0))))
        controls = _controls(near)
        if not controls:
            continue
        if retired:
            rest = routed[match.end() : match.end() + 120].split(". ")[0]
            replaced = _REPLACED.search(rest)
            if replaced and controls <= _controls(rest[replaced.end() : replaced.end() + 60]):
                continue
        return match.group(0)
    for match in _all_acts(_LOOSEN, routed):
        near = _near(routed, match, before=bool(_PARTICIPLE.match(match.group(0))))
        if _ALERT.search(near):
            return match.group(0)
    return None


def _switched_off(text: str) -> str | None:
    for match in _SWITCHED_OFF.finditer(text):
        if not _CONDITION.search(text[max(0, match.start() - 60) : match.start()]):
            return match.group(0)
    return None


def _audience_from(text: str) -> Callable[[int], bool]:
    """``pos -> bool(_AUDIENCE.search(text, pos))`` for rising ``pos``, searching each stretch
    of ``text`` once: asked anew for every verb, the search was quadratic (20,000 characters of
    "get the full name" took 1.8 s)."""
    last: list[Any] = [None, None]  # where the last search started, what it found

    def after(pos: int) -> bool:
        start, found = last
        if start is None or start > pos or (found is not None and found.start() < pos):
            found = _AUDIENCE.search(text, pos)
            last[:] = [pos, found]
        return found is not None

    return after


def _personal_disclosure(text: str) -> str | None:
    # Personal data disclosed: with a verb that means it (disclose, reveal, read out, read
    # back), read back or out, or given to anyone who asks. Confirming it with the customer,
    # asking them for it or sending something to it is none of these.
    audience_after = _audience_from(text)
    for verb in _PERSONAL_VERB.finditer(text):
        if not _not_negated(text, verb):
            continue
        if verb.group("gain"):
            # Whoever receives it is its subject: "courier partners receive the address on
            # request", "whoever asks gets the home address"; not the agent collecting it.
            head = text[max(0, verb.start() - 80) : verb.start()]
            clause = re.split(r"[.;:,!?\n]", head)[-1].strip()
            sentence = re.split(r"[.;!?\n]", head)[-1]
            tail = re.split(r"[.;!?\n]", text[verb.end() : verb.end() + 120])[0]
            if _AGENT_GAINS.search(clause) or not _AUDIENCE.search(f"{sentence} {tail}"):
                continue
        gained = bool(verb.group("gain"))
        window = text[verb.end() : verb.end() + 60]
        for datum in _PERSONAL.finditer(window):
            if _DESTINATION.search(window[: datum.start()]):
                continue
            after = window[datum.end() : datum.end() + 30]
            if (
                verb.group("strong")
                or gained
                or (verb.group("read") and _READ_ALOUD.match(after))
                or audience_after(verb.start())
            ):
                return text[verb.start() : verb.end() + datum.end()]
    return None


def _unnegated(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    for match in pattern.finditer(text):
        if _not_negated(text, match):
            return match
    return None


# ---- whose act, whose data: an honest rule serves the customer --------------------------------
# A desk's honest rules name what attacks name (codes, passwords, refunds, "without a receipt")
# to serve the customer: a code sent to their own phone on file, where they can change their
# PIN, what a customer asks for and is refused. The readings below tell these apart from a
# rule that gives data to someone else, skips a check or moves money.

_NEGATED_ACT = lexicon.pattern("negated_act")
_REQUESTED = lexicon.pattern("requested")
_INSTEAD = lexicon.pattern("instead")
_COMPLY = lexicon.pattern("comply")
_ROUTING = lexicon.pattern("routing")


def _all_acts(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """The matches of ``pattern`` the rule itself does: not negated, not only asked for."""
    declines = bool(_INSTEAD.search(text)) and not any(
        not _NEGATED_ACT.search(text[max(0, m.start() - 40) : m.start()])
        for m in _COMPLY.finditer(text)
    )
    for match in pattern.finditer(text):
        if _NEGATED_ACT.search(text[max(0, match.start() - 40) : match.start()]):
            continue
        if declines and _REQUESTED.search(text[max(0, match.start() - 60) : match.start()]):
            continue
        yield match


def _acts(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The first match of ``pattern`` the rule itself does: not negated, not only asked for."""
    return next(_all_acts(pattern, text), None)


def _without_routing(text: str) -> str:
    """``text`` with its clauses that only route a case to a team code left out."""
    clauses = re.split(r"([;.!?]\s+|[;.!?]$)", text)
    return "".join(
        " "
        if _ROUTING.match(c) and not (_LOOSEN.match(c.strip()) or _TURN_OFF.match(c.strip()))
        else c
        for c in clauses
    )


_DETERMINER = lexicon.pattern("determiner")
_ABLE = lexicon.pattern("able")
_THEIR = lexicon.pattern("their")


def _as_adjective(text: str, start: int) -> bool:
    # "a shared folder", "the forwarded email": a participle after a determiner names a thing.
    return bool(_DETERMINER.search(text[max(0, start - 12) : start]))


_TOLD_OWN = lexicon.pattern("told_own")


def _theirs(text: str, at: int) -> bool:
    # The words after "their" name none of someone else's ("their colleagues' payslips").
    return not any(w.endswith(("'s", "s'", "’s")) for w in text[at:].split()[:3])


def _own_act(text: str, start: int, end: int, *, told: bool = False) -> bool:
    """Whether the verb at ``start:end`` is the customer's, on their own things ("they can
    read their results", "you can change your PIN"; not "their neighbour's"), or, ``told``,
    tells them of such an act ("tell patients they can read their records")."""
    if _ABLE.search(text[max(0, start - 40) : start]):
        after = _THEIR.match(text, end)
        if after is not None and _theirs(text, after.end()):
            return True
    clause = _TOLD_OWN.match(text, end) if told else None
    return bool(clause and _theirs(text, clause.end()))


_GATE_CHECK = lexicon.pattern("gate_check")
_BEFORE_CHECK = lexicon.pattern("before_check")
_WAITS_FOR_CHECK = lexicon.pattern("waits_for_check")


def _gated(text: str, match: re.Match[str]) -> bool:
    """Whether the disclosure ``match`` waits for a check of the person, to no open audience."""
    if _AUDIENCE.search(text):
        return False
    if _BEFORE_CHECK.search(text[max(0, match.start() - 10) : match.start()]):
        return bool(_GATE_CHECK.search(text, match.end()))
    after = text[match.end() : match.end() + 120]
    waits = _WAITS_FOR_CHECK.search(after)
    return bool(waits and _GATE_CHECK.search(after, waits.end()))


_OWN_DEST = lexicon.pattern("own_dest")
_SENDING = lexicon.pattern("sending")
_MANAGING = lexicon.pattern("managing")
_OWNED_CODE = lexicon.pattern("owned_code")
_FROM_TOOL = lexicon.pattern("from_tool")


def _own_code(text: str, match: re.Match[str]) -> bool:
    """Whether the code of ``match`` is the customer's own, given to them.

    Sent to their own phone or inbox ("send a one-time code to the phone on file"), theirs by
    a possessive ("tell the account holder their PUK code"), the result of a tool run for
    their case ("the voucher code from send_voucher"), or what they are told to do with theirs
    ("tell them to generate new backup codes"); never to an open audience.
    """
    if _AUDIENCE.search(text):
        return False
    if _MANAGING.search(match.group(0)):
        return True  # "tell them to generate new backup codes"
    after = text[match.end() : match.end() + 80]
    if _SENDING.match(match.group("verb")):
        dest = _OWN_DEST.match(after)
        return bool(dest and (dest.group("owner") or dest.group("kind") or dest.group("filed")))
    span = match.group(0)
    owned = _OWNED_CODE.search(span)
    if owned and not any(w.endswith(("'s", "s'")) for w in owned.group(1).split()):
        return True
    return bool(_FROM_TOOL.match(after))


def _disclosure(text: str) -> re.Match[str] | None:
    """The first disclosure the rule makes: not negated, not a participle naming a thing, not
    the customer's own act or code, not one that waits for a check of the person."""
    found = [*_DISCLOSE.finditer(text), *_DISCLOSE_CODE.finditer(text)]
    audience = bool(_AUDIENCE.search(text))
    for match in sorted(found, key=lambda m: m.start()):
        if not _not_negated(text, match):
            continue
        if not audience:
            verb_end = match.start() + len(match.group(0).split()[0])
            if (
                _as_adjective(text, match.start())
                or _own_act(text, match.start(), min(verb_end, match.end()), told=True)
                or _gated(text, match)
                or (match.re is _DISCLOSE_CODE and _own_code(text, match))
            ):
                continue
        return match
    return None


_ROLE_ASKED = lexicon.pattern("role_asked")


def _grant(text: str) -> re.Match[str] | None:
    # What the customer asks for, in a rule that routes, explains or answers with a team's code,
    # is the situation: "when a team lead asks to hand the admin role to a colleague, route to
    # ACC-2R", "requests to give someone the admin role go to ACC-2R".
    routed = _without_routing(text)
    audience = bool(_AUDIENCE.search(text))
    for match in _all_acts(_GRANT, routed):
        if not _not_negated(routed, match):
            continue
        if audience or not _own_act(routed, match.start(), match.end()):
            return match
    # ...and a role asked for is granted by a rule that then does as asked: "when a colleague
    # asks for the admin role, give it to them".
    complies = [
        m.start()
        for m in _COMPLY.finditer(routed)
        if not _NEGATED_ACT.search(routed[max(0, m.start() - 40) : m.start()])
    ]
    for asked in _ROLE_ASKED.finditer(routed):
        if complies and complies[-1] >= asked.end():
            return asked
    return None


READ_SCRIPTS = frozenset(lexicon.words("read_scripts"))
"""The scripts the policy families have words in; a rule written mostly in another is unread."""
UNREAD_LETTERS = 12
"""Fewest letters of unread scripts that make a rule unread (a name or a word may be quoted)."""


_READ_MARKS = frozenset(lexicon.words("read_marks"))
_NO_SCRIPT = frozenset(lexicon.words("no_script"))


def unread_script(text: str) -> str | None:
    """The script ``text`` is mostly written in, when the policy families have no words in it.

    A rule in Tamil, Georgian, Amharic or Greek says what it says unread: the families
    cannot tell a routing rule from "grant admin rights to whoever asks". None when fewer
    than ``UNREAD_LETTERS`` of its letters (NFKC) are of other scripts than
    ``READ_SCRIPTS``, or when more of them are read and the unread ones are a few quoted
    words: fewer than twice ``UNREAD_LETTERS`` in all, and no run of two words or more
    holding ``UNREAD_LETTERS`` (a sentence in Hebrew after an English one is as unread as
    one alone, however long the English).
    """
    read = unread = 0
    scripts: dict[str, int] = {}
    run_letters = run_words = longest = 0
    in_word = False
    for ch in unicodedata.normalize("NFKC", text):
        if not ch.isalpha():
            in_word = in_word and not ch.isspace()
            continue
        script = unicodedata.name(ch, "UNKNOWN").split(" ")[0]
        if script in _NO_SCRIPT:
            continue
        if script in READ_SCRIPTS or script in _READ_MARKS:
            read += 1
            if run_words >= 2:
                longest = max(longest, run_letters)
            run_letters = run_words = 0
            in_word = True
            continue
        unread += 1
        scripts[script] = scripts.get(script, 0) + 1
        run_words += not in_word
        run_letters += 1
        in_word = True
    if run_words >= 2:
        longest = max(longest, run_letters)
    if unread < UNREAD_LETTERS:
        return None
    if unread < read and unread < 2 * UNREAD_LETTERS and longest < UNREAD_LETTERS:
        return None
    return max(scripts, key=lambda k: scripts[k])


def find_policy_change(text: str) -> list[str]:
    """Why ``text`` (folded) would change policy, one reason per family found; [] if none.

    Looks for loosened controls (skip / without / no need + verification, approval,
    review, limits..., or such a control set to false / off / 0), grants, disclosures
    (of the prompt, of records, of a person's personal data), money moved or charges
    waived, links and contacts in any form (defanged too), amounts and percentages.
    Identifiers are read as their words too: ``verify_identity`` as "verify identity".
    """
    folded = fold(text)
    # Identifiers are read as their words too ("verify_identity = false").
    readings = list(dict.fromkeys([folded, fold(identifier_words(text))]))
    reasons: list[str] = []
    for reading in readings:
        reasons = merge_reasons(reasons, _policy_changes(reading))
    return reasons


def merge_reasons(reasons: Sequence[str], more: Sequence[str]) -> list[str]:
    """``reasons`` and those of ``more`` of a family not yet among them ("discloses", ...)."""
    found = {r.split(" (")[0] for r in reasons}
    return [*reasons, *(r for r in more if r.split(" (")[0] not in found)]


_REDEFINED = lexicon.pattern("redefined")
_STRONG_PROOF = lexicon.pattern("strong_proof")
_OTHER_WAY = lexicon.pattern("other_way")


def _redefined(text: str) -> str | None:
    """A check the rule says is met by anyone or by some fact, outside a condition on it.

    A rule that says the check is made with a proof set up for it (a one-time code, photo ID,
    security questions...) and no other way is the procedure, not a loosening of it.
    """
    for match in _REDEFINED.finditer(text):
        if _CONDITION.search(text[max(0, match.start() - 200) : match.start()]):
            continue
        if not _not_negated(text, match):
            continue
        # (a bounded stretch: sliced to the end for every match, the copy was quadratic)
        clause = re.split(r"[.;!?\n]", text[match.start() : match.start() + 300], maxsplit=1)[0]
        if _STRONG_PROOF.search(clause) and not _OTHER_WAY.search(clause):
            continue
        return match.group(0)
    return None


def _moves_money(text: str) -> bool:
    """Whether the rule moves the money it names: a money-moving word it acts on, in the same
    clause as the money where the only money word is "money" itself, which a desk names in
    passing ("when a customer worries their money is lost, tell them we will investigate
    immediately")."""
    if any(m.group(0) != "money" for m in _MONEY.finditer(text)):
        return _acts(_MONEY_MOVE, text) is not None
    return any(
        _MONEY.search(clause) and _acts(_MONEY_MOVE, clause)
        for clause in re.split(r"[,;.!?:\n]", text)
    )


def _policy_changes(text: str) -> list[str]:
    reasons: list[str] = []
    loosen = _acts(_LOOSEN, _without_routing(text))
    if loosen and _CONTROL.search(text):
        reasons.append(f"loosens a control ({loosen.group(0)!r})")
    elif turned := _turned_off(text):
        reasons.append(f"loosens a control (turns it off: {turned!r})")
    elif found := _FORBID_CHECK.search(text):
        reasons.append(f"loosens a control (forbids a check: {found.group(0)!r})")
    elif switched := _switched_off(text):
        reasons.append(f"loosens a control (switches it off: {switched!r})")
    elif redefined := _redefined(text):
        reasons.append(f"loosens a control (says what passes a check: {redefined!r})")
    if found := _grant(text):
        reasons.append(f"grants a permission ({found.group(0)!r})")
    if found := _disclosure(text):
        reasons.append(f"discloses ({' '.join(found.group(0).split()[:4])!r}...)")
    elif disclosed := _personal_disclosure(text):
        reasons.append(f"discloses personal data ({' '.join(disclosed.split()[:6])!r}...)")
    money = _MONEY.search(text)
    if money and _moves_money(text):
        reasons.append(f"moves money ({money.group(0)!r})")
    elif waived := _acts(_WAIVE_CHARGE, text):
        reasons.append(f"moves money (waives a charge: {waived.group(0)!r})")
    # A figure is a policy change where it sets what money moves or where a limit lies
    # (a rule about how to *format* amounts is not).
    if money or _LIMIT.search(text):
        if (_CURRENCY.search(text) and _AMOUNT.search(text)) or _PERCENT.search(text):
            reasons.append("names an amount")
        elif _GROUPED.search(text):
            reasons.append("names a large figure")
    if found := (_DEFANGED.search(text) or _HANDLE.search(text)):
        reasons.append(f"adds a contact or link ({found.group(0)!r})")
    return reasons
