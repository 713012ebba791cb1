"""The deterministic checks of ``BulletGuard``: text variants and the patterns run on them.

Every check reads several variants of the text so that simple obfuscation does
not hide a payload: Unicode-normalised and case-folded, with zero-width and
control characters removed and look-alike letters mapped to Latin; with
"l33t" digits read as letters; with letters spelt out one by one joined up;
HTML entities and %-escapes decoded; base64 runs decoded; ROT13; reversed.
Pure functions, no I/O.
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

# Characters that render as nothing: zero-width and bidi controls, fillers, interlinear
# annotation marks, invisible musical formatting, the "tag" block (which spells ASCII
# invisibly, one character per letter) and the supplementary variation selectors.
_INVISIBLE = re.compile(
    r"[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    r"\u3164\ufeff\uffa0\ufff9-\ufffb\U0001d173-\U0001d17a\U000e0000-\U000e007f"
    r"\U000e0100-\U000e01ef]"
)
_TAG_RUN = re.compile(r"[\U000e0020-\U000e007e]+")


def _tag_text(text: str) -> list[str]:
    # Tag characters mirror printable ASCII (U+E0020 is a space): what they spell is
    # hidden from a reader but not from a model, so it is read out and screened.
    return ["".join(chr(ord(c) - 0xE0000) for c in run.group(0)) for run in _TAG_RUN.finditer(text)]


_CONFUSABLES = str.maketrans(
    {
        # Cyrillic and Greek letters that look like Latin ones.
        "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i",
        "ј": "j", "ѕ": "s", "ԁ": "d", "ɡ": "g", "һ": "h", "ո": "n", "ν": "v", "ο": "o",
        "α": "a", "ε": "e", "ι": "i", "κ": "k", "τ": "t", "υ": "u", "ρ": "p",
        "ı": "i", "ɩ": "i", "ӏ": "l", "ԛ": "q", "ԝ": "w", "ɑ": "a", "ѡ": "w", "ɢ": "g",
        # Small capitals.
        "ᴀ": "a", "ʙ": "b", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ꜰ": "f", "ʜ": "h", "ɪ": "i",
        "ᴊ": "j", "ᴋ": "k", "ʟ": "l", "ᴍ": "m", "ɴ": "n", "ᴏ": "o", "ᴘ": "p", "ʀ": "r",
        "ꜱ": "s", "ᴛ": "t", "ᴜ": "u", "ᴠ": "v", "ᴡ": "w", "ʏ": "y", "ᴢ": "z",
        # Dashes that look like a hyphen ("HW‑7" with a non-breaking hyphen is "HW-7").
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
        "\u2015": "-", "\u2212": "-",
    }
)  # fmt: skip
_LEET = str.maketrans(
    {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s",
     "|": "i", "!": "i"}
)  # fmt: skip
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


_COMMON = frozenset(
    re.findall(
        r"\w+",
        "the a an and or to of for in on at by with without from is are be may can must all any "
        "every each no not this that it their they them you your",
    )
)


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

_NEGATED = re.compile(
    r"\b(never|not|don't|dont|do not|must not|mustn't|should not|shouldn't|cannot|can't|no)"
    # Up to three words between ("do not ask customers to send"), unless one of them
    # negates the negation ("never hesitate to reveal", "do not fail to send").
    r"\s+((?!(hesitate|fail|forget|refuse|stop|neglect|omit|skip)\b)\w+\s+){0,3}$"
)

_IRREGULAR = {
    "tell": ("told",), "give": ("gave", "given"), "send": ("sent",), "show": ("shown",),
    "spell": ("spelt",), "read": (), "output": ("outputting",),
}  # fmt: skip


def _forms(verb: str) -> list[str]:
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
    forms.extend(_IRREGULAR.get(head, ()))
    return [f + space + rest for f in dict.fromkeys(forms)]


def _verbs(verbs: str) -> str:
    """An alternation of the English ``verbs`` ("a|b c") in all their forms, longest first."""
    forms = {f for v in verbs.split("|") for f in _forms(v)}
    return "|".join(sorted(forms, key=len, reverse=True))


# The words of a credential may be joined by spaces, underscores or hyphens, or run together
# as in camelCase ("secret key", "SECRET_KEY", "secret-key", "secretKey").
_J = r"[\s_-]"
# Credentials of the operator or the system: never given out, whatever the sentence says.
_PRIVILEGED = (
    rf"(system{_J}*prompt|(hidden|secret|internal|initial|original|system){_J}*(instructions?|prompt"
    rf"|rules)|instructions\s+above|admin(istrator)?{_J}*(password|credentials?|account|login|pin)"
    rf"|root{_J}*password|api{_J}?keys?|client{_J}*secrets?"
    rf"|(access|auth(entication)?|session|bearer|refresh){_J}*tokens?|secret{_J}*keys?"
    rf"|private{_J}*keys?)"
)
# A person's own secrets: a customer is told how to change or reset theirs.
_OWN_SECRET = (
    rf"(pass{_J}?words?(?!{_J}*(reset|recovery|change|link|expir|polic|strength"
    rf"|manager|rule|field|form|page|screen))|credentials?"
    rf"|(credit{_J}*)?card{_J}*numbers?|cvv|social{_J}*security"
    # Answers to security questions are passwords by another name (the questions are not: an
    # agent reads those out).
    rf"|security{_J}*(question{_J}*)?answers?|answers?\s+to\s+((the|their|his|her|your|a)\s+)?"
    rf"(security|secret){_J}+questions?|(secret|memorable){_J}*(answers?|words?)"
    rf"|mother'?s{_J}+maiden{_J}+name"
    r"|mot\s+de\s+passe|contrase[nñ]a|passwort|senha|wachtwoord|пароль|密码|パスワード|has[lł]o"
    r"|şifre)"
)
_CREDENTIAL = f"({_PRIVILEGED}|{_OWN_SECRET})"
# Codes that open an account or a door. Sending one to the customer's own phone or inbox is how
# they work, so "send" alone does not make their mention a leak; telling, giving or reading one
# out does. "Tell the customer a reset code was sent" talks about a code, it does not give it.
_CODES = (
    rf"(\bpins?({_J}*(codes?|numbers?))?\b(?!{_J}*(reset|recovery|change|expir|polic|pad|entry))"
    rf"|passcodes?|\b(one{_J}?time|verification|reset|door|alarm|access|gate|entry|safe|lock|key"
    rf"|login|log{_J}?in|sign{_J}?in|2fa|mfa|otp|backup|recovery|unlock|security"
    # The house's own codes, which no customer is given.
    rf"|override|master|admin|supervisor|manager|staff){_J}*(pass)?codes?"
    r"|\botps?\b)"
    r"(?!\s+(was|were|has|have|had|will|would|is|are|gets?|got|expires?|expired|arrives?"
    r"|arrived|never|did|does|doesn't|didn't)\b)"
)
_REVEAL_VERBS = (
    "("
    + _verbs("reveal|disclose|leak|expose|dump|exfiltrate|divulge")
    + r"|r[ée]v[èe]le[rz]?|revela[r]?|verr[aä]t|preisgeben|rivela(re)?|revele|раскрой|покажи"
    r"|透露|泄露|告诉)"
)
_SHARE = (
    "show|tell|give|share|provide|output|repeat|display|include|paste|print|read out|read back|"
    "type|spell out|hand over|reply with|respond with|answer with"
)
_SHARE_FOREIGN = r"|donne[rz]?|envoie[rz]?|dame|dime|env[ií]a|gib|sende|dai|mostra|manda)"
_SHARE_VERBS = "(" + _verbs(_SHARE + "|send") + _SHARE_FOREIGN
_SHARE_VERBS_BUT_SEND = "(" + _verbs(_SHARE) + _SHARE_FOREIGN

OVERRIDE: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        r"\b(ignore|disregard|forget|override|bypass|skip|drop|abandon|neglect)\b.{0,40}"
        r"\b(previous|prior|above|earlier|all|any|other|preceding|system|original|your|the)\b"
        r".{0,40}\b(instructions?|rules?|prompts?|guidelines|directions|polic(y|ies)|guardrails"
        r"|constraints|directives|programming|training)\b",
        r"\b(disregard|ignore|forget|override|replace|rewrite)\b.{0,20}\bsystem\s*(prompt|message)",
        r"\byou are now\b|\byou are no longer\b|\bfrom now on,? you (are|will|must|act)\b",
        r"\b(pretend|act|behave|roleplay|role-play)\s+(to be|as if|as|like)\s+(an?\s+)?"
        r"(unrestricted|unfiltered|jailbroken|evil|different|new|admin|developer|dan)\b",
        r"\b(developer|god|admin|debug|dan|jailbreak)\s+mode\b|\bjailbreak",
        r"\bnew\s+(system\s+)?(instructions|persona|role|prompt)\b",
        r"(^|[\[<{(#*\s])(system|admin|administrator|developer|root)\s*(\]|>|:|note\b|message\b"
        r"|override\b|notice\b|instruction\b|update\b|directive\b)",
        # "Store the key in the vault, never in the prompt" keeps it out of the prompt.
        r"\b(add|write|put|insert|save|store|append|include|remember|record)\b.{0,40}"
        r"(?<!never )(?<!not )(?<!n't )(?<!no )"
        r"\b(to|in|into|as)\b\s*(your|the|a)\s+(new\s+)?(rules?|instructions|playbook|system prompt"
        r"|prompt|memory|guidelines|policy)\b",
        # "Keep this as your standing instructions", "adopt as a permanent house rule": the
        # message itself (or nothing) is what becomes the rule.
        r"\b(keep|adopt|treat|take|use|save|store|remember|record|file|memori[sz]e)\s+"
        r"((this|that|these|it|the following|the above|what follows|my (message|note|words)"
        r"|this (message|note|text|ticket|rule|line))\s+)?as\s+((your|the|a|an|our|my)\s+)?"
        r"((new|standing|permanent|official|house|main|core|updated|revised|internal|own|default"
        r"|current|first|only|real|top|golden|overriding|binding)\s+){0,2}(rules?|instructions?"
        r"|playbook|prompt|guidelines|polic(y|ies)|directives?|brief|orders|guidance)\b",
        r"\balways\s+" + _REVEAL_VERBS + r"\b",
        r"\b(ignore[zs]?|oublie[zs]?)\b.{0,30}\b(instructions|consignes|r[èe]gles)\b",
        r"\b(ignora|olvida|omite)\b.{0,30}\b(instrucciones|reglas|istruzioni|regole|instru[çc][õo]es)\b",
        r"\b(ignoriere|vergiss|missachte)\b.{0,30}\b(anweisungen|regeln|vorgaben)\b",
        r"\b(negeer|vergeet)\b.{0,30}\b(instructies|regels)\b",
        r"(игнорируй|забудь|проигнорируй).{0,30}(инструкции|правила)",
        r"(忽略|无视|忘记).{0,10}(指令|指示|说明|规则|提示)",
        r"(指示|命令|ルール).{0,6}(を)?無視",
    )
)

_DATA = (
    r"(data|conversations?|chats?|transcripts?|history|messages|credentials?|pass\s?words?"
    r"|tokens?|keys?|details|records|information|info|logs|prompts?|everything|all|contents?"
    r"|emails?|database|files?|secrets?|card|pii|personal)"
)
# Up to 40 characters between a verb and a credential, none of them a word that says the
# credential is a failed attempt: "if the caller gives the wrong security answer" gives nothing.
_GAP = r"((?!\b(wrong|incorrect|invalid|mistyped|misspelt|misspelled)\b).){0,40}"
# A secret a customer is told how to manage is not given to them: "tell them to generate new
# backup codes", "tell customers they can change their card PIN", "tell users the password can be
# changed under Settings". The verb's object is then an action on the secret (to / can / how to
# change, reset...), or the secret is the subject of one (can be changed, must be reset).
_MANAGE = (
    r"(change|reset|update|generate|regenerate|create|choose|pick|set up|set|renew|recover|replace"
    r"|unblock|unlock|request|order)"
)
_GAP_SHARE = (
    r"((?!\b(wrong|incorrect|invalid|mistyped|misspelt|misspelled)\b"
    r"|\b(to|can|could|may|might|should|must|will|how to)\s+(\w+\s+)?" + _MANAGE + r"\b).){0,40}"
)
_MANAGED = (
    r"(?![a-z])(?!\s+(can|could|may|must|should|will|would|needs?\s+to|has\s+to|have\s+to)\s+"
    r"((only|now|also|then|easily|always)\s+)?be\s+"
    r"(changed|reset|updated|set|chosen|created|renewed|replaced|unblocked|unlocked|regenerated"
    r"|generated|recovered|requested|ordered)\b"
    # ...unless anyone may do it: "can be reset by anyone who calls".
    r"(?!\s+(by|for)\s+(anyone|anybody|whoever|everyone|everybody|any|every|other|all)\b))"
)
# "Send X to <a destination>": the customer's own address, email or inbox on file is where
# their letters go, not a leak ("send replacement cards only to the address on file").
_ON_FILE = r"(?!\s+(on\s+file|on\s+record|on\s+the\s+account|we\s+hold|registered))"
_DEST = (
    r"(https?|ftp|www\.|@|webhook|endpoint|server|external|outside|third[- ]party|remote"
    rf"|(e-?mail\s+)?address{_ON_FILE}|url|domain|bucket|pastebin|discord|telegram|attacker|channel"
    rf"|inbox{_ON_FILE}|ip\b)"
)
# The destination follows "to" in the same clause, and a "to" that is negated ("never to a new
# address") sends nothing there.
_TO_DEST = (
    r"(?<!never )(?<!not )(?<!n't )(?<!no )\b(to|into|at|via|on)\b"
    r"((?![,;.](\s|$)).){0,40}" + _DEST
)
EXFILTRATION: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"\b(send|post|forward|upload|transmit|exfiltrate|copy|cc|bcc|e-?mail|mail|sync|push"
        r"|report|submit|beacon|leak|relay|pipe|curl|fetch)\b.{0,60}\b" + _DATA
        + r"\b.{0,60}" + _TO_DEST
    ),
    re.compile(r"\b" + _REVEAL_VERBS + r"\b" + _GAP + f"({_CREDENTIAL}|{_CODES})"),
    re.compile(
        r"\b" + _SHARE_VERBS + r"\b" + _GAP_SHARE + f"({_PRIVILEGED}|{_OWN_SECRET}{_MANAGED})"
    ),
    re.compile(r"\b" + _SHARE_VERBS_BUT_SEND + r"\b" + _GAP_SHARE + _CODES + _MANAGED),
    # "Read the card number on file back to the caller."
    re.compile(
        r"\bread(s|ing)?\b" + _GAP + f"({_CREDENTIAL}|{_CODES})" + r".{0,30}\b(back|out|aloud)\b"
    ),
)  # fmt: skip

SECRETS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("api key",
     re.compile(r"\b(sk|pk|rk)[-_](live[-_]|test[-_]|proj[-_]|ant[-_])?[a-z0-9_-]{16,}")),
    ("aws key", re.compile(r"\b(akia|asia)[0-9a-z]{16}\b")),
    ("github token", re.compile(r"\bgh[opsur]_[a-z0-9]{30,}|\bgithub_pat_[a-z0-9_]{30,}")),
    ("slack token", re.compile(r"\bxox[abprs]-[a-z0-9-]{10,}")),
    ("google key", re.compile(r"\baiza[0-9a-z_-]{30,}")),
    ("jwt", re.compile(r"\beyj[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}\.[a-z0-9_-]{4,}")),
    ("private key",
     re.compile(r"-----begin [a-z ]*private key-----|\bssh-(rsa|ed25519) [a-z0-9+/]{20,}")),
    (
        "password value",
        re.compile(
            r"\b(pass\s?words?|passwd|pwd|passcodes?|pin|secret|api[\s_-]?key|token|mot de passe"
            r"|contrase[nñ]a|passwort|senha|пароль)\b\s*(for \S+\s*)?(=|:|is|was|ist|est|es|это)\s*"
            r"(['\"`«“][^'\"`»”]{3,}['\"`»”]|(?=\S*[\d_#$%&*!?^~])\S{4,}|\S{4,}(?=\s*$))"
        ),
    ),
    ("connection string", re.compile(r"\b[a-z][a-z0-9+]*://[^\s/:@]+:[^\s/@]+@")),
)  # fmt: skip
_TOKEN_LIKE = re.compile(r"(?<![\w/.-])[A-Za-z0-9_\-+/=]{28,}(?![\w/.-])")

# The local part starts where a run of its characters starts: tried from every
# position of a long run, the search took seconds on 20,000 letters (quadratic).
_EMAIL = re.compile(
    r"(?<![a-z0-9._%+-])[a-z0-9._%+-]+\s*(@|\(at\)|\[at\])\s*[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}"
)
_PHONE = re.compile(r"(?<![\w-])\+?\(?\d[\d\s().-]{7,}\d(?![\w-])")
_SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")
_UK_NINO = re.compile(r"\b[a-ceghj-pr-tw-z]{2}\s?\d{2}\s?\d{2}\s?\d{2}\s?[a-d]\b")
_IBAN = re.compile(r"\b[a-z]{2}\d{2}\s?(?:[a-z0-9]{4}\s?){2,7}[a-z0-9]{1,4}\b")
_URL = re.compile(
    r"\b(?:(?:https?|ftp|wss?|file)://|www\.)[^\s<>\"'`)]+"
    r"|\b(?:[a-z0-9-]+\.)+(?:com|net|org|io|ru|cn|xyz|info|biz|co|me|app|dev|ai|ly|gl|to|sh"
    r"|tk|top|site|online|link|click|zip|mov)\b(?:/[^\s<>\"'`)]*)?"
)


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
_CHAT_TOKENS = re.compile(
    r"<\|[a-z_]*\|?>|\[/?inst\]|<</?sys>>|<\|?(?:im_start|im_end|system|user|assistant)\|?>",
    re.IGNORECASE,
)
_TAG = re.compile(r"</?[a-z][a-z0-9_-]*(?:\s[^<>]*)?/?>", re.IGNORECASE)
# A fenced code block labelled as a role or as instructions ("```system"): a chat
# transcript or a prompt pasted in, which a model reading the rule may obey.
_ROLE_FENCE = re.compile(
    r"(?:`{3,}|~{3,})[ \t]*(?:system|developer|assistant|admin(?:istrator)?|operator|root|sys"
    r"|instructions?|prompt|policy|rules?|override)\b",
    re.IGNORECASE,
)
_ROLE_KEY = re.compile(r"[\"']?\brole\b[\"']?\s*[:=]\s*[\"']?(system|developer|assistant|tool"
                       r"|user|operator|admin)\b", re.IGNORECASE)  # fmt: skip
_MARKS = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u20d0-\u20ff]")


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


_LOOKALIKE_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE")


def _scripts(word: str) -> set[str]:
    # A word that mixes Latin with Cyrillic or Greek letters is a spoof: honest text in
    # those languages writes whole words in one script.
    found: set[str] = set()
    for ch in word:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            found.update(s for s in _LOOKALIKE_SCRIPTS if name.startswith(s))
    return found


def _unaccented(text: str) -> str:
    return unicodedata.normalize("NFKC", _MARKS.sub("", unicodedata.normalize("NFKD", text)))


def fold(text: str) -> str:
    """Normalise for comparison: NFKC, no invisibles or combining marks, case-folded, look-alikes
    mapped to Latin, whitespace collapsed. Works on any script (others pass unchanged)."""
    text = _unaccented(_INVISIBLE.sub("", unicodedata.normalize("NFKC", text)))
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
# ``_guard/guard.py``.


def _family(pattern: str) -> re.Pattern[str]:
    # The families read folded text, accents taken off (see ``fold``); their stems are
    # folded the same way, or a stem written with its accents ("nötig") never matches.
    return re.compile(_unaccented(pattern))


_NOT = r"(?<!never )(?<!not )(?<!n't )(?<!no )"
_LOOSEN = _family(
    r"\b(?:skip\w*|bypass\w*|waiv\w*|exempt\w*|disabl\w*|suspend\w*|relax\w*|lift\w*"
    r"|overrid\w*|ignor\w*)\b"
    r"|\bwithout\b|\bno (?:need|longer)\b|\b(?:do|does|did|don't|doesn't|need) ?n[o']t need\b"
    r"|\bnot (?:needed|required|necessary|mandatory)\b|\bunnecessary\b|\boptional\b"
    r"|\bneed(?:s)? not\b|\bno (?:\w+ )?(?:check|verification|review|approval|limit|cap"
    r"|sign[- ]?off)s?\b"
    r"|\bnever (?:need|require)s?\b"
    r"|\bunlimited\b|\b(?:auto|pre)[- ]?(?:approv|verif|authori[sz])\w*"
    r"|\b(?:automatic(?:ally)?|immediately|in full|directly)\b"
    r"|\b(?:count|counts|counted|considered|treated|deemed|already|is|are|as) (?:as )?verified\b"
    r"|\bverified (?:vip|customer|user|caller)s?\b|\braise[sd]?\b|\bincrease[sd]?\b"
    # fr es it pt de nl pl tr sv ru ja zh ko ar
    r"|\bsans\b|\bsin\b|\bsenza\b|\bsem\b|\bohne\b|\bzonder\b|\bbez\b|\bolmadan\b|\butan\b"
    r"|\btrust(?:ed|worthy)?\b|no necesit|no hace falta|no requier|pas besoin"
    r"|n'est pas n[ée]cessaire"
    r"|nicht (?:nötig|erforderlich|notwendig)|non (?:serve|è necessari)|não (?:precisa|é necessári)"
    r"|geen \w+ nodig|nie (?:trzeba|jest potrzebn)|gerek yok|не нужн|не требу|behövs inte"
    r"|\bбез\b|省略|不要|不需|无需|無需|免除|없이|생략|بدون|بغیر|بغير|\bignor|\bomit|\bsalt"
    r"|\b(?:plus|jamais) besoin"
    # nl vi hi (Devanagari and romanised)
    r"|\bhoef(?:t|den)?\b|\bhoeven\b|\boverslaan\b|\bovergeslagen\b|\bniet (?:nodig|vereist)\b"
    r"|không cần|không phải|bỏ qua|\bmiễn\b"
    r"|\bbina\b|\bbag(?:h)?air\b|\bzar(?:oo|u)r(?:i|at|y) nah(?:i|in)\b|\bnahi chahiye\b"
    r"|\bmat (?:maang|mang|puch|pooch|check)\w*|बिना|बगैर|बग़ैर|ज़रूरी नहीं|जरूरी नहीं|ज़रूरत नहीं"
    r"|जरूरत नहीं|मत पूछ|मत मांग|मत माँग"
)
# Forbidding a check loosens it as much as skipping it: "never ask for a receipt".
# Forbidding the collection of a secret ("never ask for the password") is not one.
_FORBID_CHECK = _family(
    r"\b(?:never|not|no longer|stop|quit|cease|don'?t|doesn'?t|do not|does not|must not"
    r"|mustn'?t|should not|shouldn'?t|need not|needn'?t)\s+(?:\w+\s+){0,2}?"
    r"(?:ask\w*|request\w*|requir\w*|demand\w*|insist\w*|collect\w*|check\w*)\b.{0,40}?"
    r"\b(?:ids?|identification|identity|proof|receipts?|documents?|documentation|photos?"
    r"|pictures?|passports?|licen[cs]es?|verification|security questions?|signatures?)\b"
)
_CONTROL = _family(
    r"verif|identi|\bid\b|\bids\b|authentic|\b2fa\b|two[- ]?(?:step|factor)|\bmfa\b|\botp\b"
    r"|\bpin\b|\bkyc\b|security question|passw|passcode|approv|review|sign[- ]?off|manager"
    r"|supervisor|limit|\bcap\b|threshold|permission|access|privilege|admin|polic|\bcheck"
    r"|revis|r[ée]vis|control|kontrol|sprawdz|проверк|審査|审核|검토|مراجعة|granskning"
    r"|confirm|fraud|consent|receipt|proof|document|\brules?\b|restriction|guideline"
    r"|vérif|verific|überprüf|prüf|weryfik|doğrula|kimlik|провер|личност|ausweis|identit"
    r"|aprob|aprov|genehm|zatwierdz|onay|одобр|godkänn|autoriz|autoris|berechtig|uprawnien"
    r"|yetki|права|behörighet|permiso|permiss|本人|確認|身份|验证|驗證|承認|批准|権限|权限"
    r"|신원|확인|승인|권한|هوية|تحقق|موافقة|صلاحي|مدير|管理|관리자|yönetici|администр"
    r"|justificati|\bre[çc]u\b"
    r"|\boveren[iíy]\w*|\bověřen\w*|\bověřit\b|\boverit\b|تصدیق|تایید|تأیید|هویت"
    r"|legitimati|goedkeur|bewijs|\bbon\b|kassabon|toestemming"
    r"|kiểm tra|xác minh|xác thực|danh tính|hóa đơn|phê duyệt|giấy tờ|biên lai|chứng từ"
    r"|\bjaa?nch|\bpeh?cha+n|\bpahcha+n|\bsab(?:oo|u)t\b|\bras(?:ee|i)d\b|\bsatyapan"
    r"|\bman(?:z|j)oori\b|\banumati\b|जांच|जाँच|पहचान|सत्यापन|रसीद|मंज़ूरी|मंजूरी|अनुमति|प्रमाण"
)
# Opting out of, turning off, muting or retiring a thing loosens a control only when the thing
# is one ("let people opt out of the login alerts", "the old 2FA flow is deprecated"): these
# words are everyday words of a desk ("opt out of marketing emails", "the field 'sku' is
# deprecated; pass 'item_id' to check_stock"), so the control is looked for in what is turned
# off (see ``_turned_off``), not anywhere in the rule.
_TURN_OFF = _family(
    r"\bopt(?:s|ed|ing)?(?: \w+){0,2}?[- ]out\b"
    r"|\b(?:turn(?:s|ed|ing)?|switch(?:es|ed|ing)?|shut(?:s|ting)?)(?: \S+){0,4}? off\b"
    r"|\bset(?:s|ting)?(?: \S+){0,4}? to (?:off|false|disabled|none|no)\b"
    r"|\b(?:mut(?:e|es|ed|ing)|silenc(?:e|es|ed|ing)|suppress\w*|snooz\w*|deactivat\w*)\b"
    r"|\bdeprecat\w*|\bstop(?:s|ped|ping)? (?:send|show|issu|trigger|display)\w*"
)
# Alerts that guard an account: a control where they are what is turned off or skipped, not
# where the rule only talks of them ("login alerts without a location are normal for VPNs").
_ALERT = _family(
    r"(?:login|log-in|sign[- ]?in|security|account|fraud|activity|password) (?:alert|notif|warn)"
)
# A role that rules others: named as a role, not as a queue or a page ("the admin queue") or
# as whose a thing is ("the owner's address").
_ROLE = (
    r"(?:admin\w*|owners?|superusers?|root|moderators?)\b(?!['’]| (?:queue|team|desk|inbox"
    r"|channel|panel|console|page|portal|settings|dashboard|view|log|mailbox)s?\b)"
)
_GRANT = _family(
    r"\b(?:give|gives|gave|giving|assign\w*|hand|hands|handed|add|adds|added)\b(?: \S+){0,4}?"
    r" (?:admin\w*|owner|superuser|root|moderator)(?: \w+)? (?:role|rights|access|permissions?"
    r"|privileges?)\b"
    # "Make the caller an admin", "set their role to owner", "upgrade the requester to admin",
    # "add them as a moderator".
    r"|\b(?:make|makes|making|made) (?!sure\b|certain\b)\S+(?: \S+)?(?: (?:an?|the))? (?:\w+ )?"
    + _ROLE
    + r"|\b(?:set|sets|setting|chang\w*|switch\w*|upgrad\w*|mov(?:e|es|ed|ing)|turn\w*)\b"
    r"(?: [\w'’]+){0,2}? (?:roles?|access|permissions?|rights|privileges?|them|him|her|callers?"
    r"|users?|requesters?|members?|colleagues?|employees?|accounts?|customers?)(?: \S+){0,2}?"
    r" (?:to|into) (?:an? |the )?(?:\w+ )?"
    + _ROLE
    + r"|\badd(?:s|ed|ing)?\b(?: \S+){0,3}? (?:as|to) (?:an? |the )?(?:\w+ )?"
    + _ROLE
    + r"|"
    r"\b(?:grant\w*|elevat\w*|promot\w* to|authori[sz]\w*|entitle\w*|unlock\w*|permitted"
    r"|allowed to|may (?:now )?(?:see|read|view|access|change|edit|reset|approve|share|update|"
    r"close|delete|issue|refund|skip|waive|give)|can (?:now )?(?:see|read|view|access|change"
    r"|edit|reset|approve|share|update|close|delete|issue|skip|waive))\b"
    r"|\bit'?s (?:fine|ok|okay|allowed) to\b|\bfeel free to\b|\bis (?:fine|ok|okay|allowed)\b"
    r"|\bpermis\b|permitid|erlaubt|consentit|dozwolon|izin ver|разреш|tillåt"
    r"|부여|付与|授予|授权|verleih|conced|otorg|przyzna|предостав|منح"
    r"|\b(?:mag|mogen)\b(?:\s+\w+){0,4}?\s+(?:delen|zien|inzien|bekijken|wijzigen|aanpassen"
    r"|geven|tonen|goedkeuren|overslaan|terugbetalen|annuleren|verwijderen|doorsturen|openen)\b"
    r"|\btoegestaan\b|được phép|được quyền|có thể (?:xem|đổi|thay|hủy|chia sẻ|cấp|bỏ qua|hoàn)"
    r"|\b(?:dekh|badal|share kar|cancel kar|refund kar|de) sakt(?:e|a|i)\b"
    r"|देख सकते|बदल सकते|दे सकते|अनुमति है"
)
_DISCLOSE_VERBS = _verbs(
    "print|reveal|show|tell|repeat|output|display|share|read out|read back|read|"
    "disclose|recite|dump|echo|paste|send|forward|give out|hand out|expose"
)
_DISCLOSE = _family(
    r"\b(?:"
    + _DISCLOSE_VERBS
    + r"|mostra\w*|mostrar|zeig\w*|montre\w*|visa|pokaż\w*|göster\w*|покаж\w*|показ\w*)\b.{0,60}"
    r"(?:prompt|instruction|configuration|config\b|setup|system|rules|above|everything"
    r"|verbatim|word for word|history|internal|notes?\b|records?|details|data"
    r"|anyone|anybody|whoever|any (?:customer|user|caller)|other (?:customer|user)s?"
    r"|memory"
    r"|istruzion|instru[çc]|anweisung|consigne|talimat|инструкц|systemprompt)"
    r"|指示|指令|提示词|プロンプト|システム|지시|프롬프트|تعليمات|التعليمات"
    # nl vi hi: Dutch and Hindi put the object before the verb as often as after it.
    r"|\b(?:deel\w*|delen|toon\w*|tonen|laten zien|doorsturen|stuur\w* door|geef\w*|geven"
    r"|vertel\w*)\b.{0,60}(?:gegevens|iedereen|instructies|notities|geschiedenis|configuratie"
    r"|wachtwoord)"
    r"|(?:gegevens|instructies|notities|geschiedenis|configuratie|wachtwoord)\w*\b.{0,40}"
    r"\b(?:delen|tonen|laten zien|doorsturen|geven|vertellen)\b"
    r"|(?:chia sẻ|tiết lộ|hiển thị|cho xem|gửi|cung cấp).{0,60}(?:thông tin|dữ liệu|bất kỳ ai"
    r"|mọi người|hướng dẫn|mật khẩu)"
    r"|(?:\b(?:bata|dikha|bhej)\w*|\bshare kar\w*|\bde (?:do|dena|dijiye|dete)\b).{0,60}"
    r"\b(?:kisi ko bhi|sabko|sab ko|details|jaa?nkari|password)"
    r"|\b(?:kisi ko bhi|sabko|sab ko|details|jaa?nkari|password)\b.{0,60}"
    r"(?:\b(?:bata|dikha|bhej)\w*|\bshare kar\w*|\bde (?:do|dena|dijiye|dete)\b)"
    r"|(?:बता|दिखा|भेज|शेयर).{0,60}(?:किसी को भी|सबको|सब को|जानकारी|पासवर्ड|विवरण)"
    r"|(?:किसी को भी|सबको|सब को|जानकारी|पासवर्ड|विवरण).{0,60}(?:बता|दिखा|भेज|शेयर)"
)
# A code given out (codes the refusal patterns do not know: a voucher, PUK or PAC code, a
# discount code). Held unless it is the customer's own (see ``_own_code``).
_DISCLOSE_CODE = _family(r"\b(?P<verb>" + _DISCLOSE_VERBS + r")\b.{0,60}?\b(?:reset )?codes?\b")
_MONEY = _family(
    r"\b(?:refund\w*|credit\w*|compensat\w*|discount\w*|voucher\w*|payout\w*|transfer\w*"
    r"|chargeback\w*|reimburs\w*|cashback|gift card|store credit|money|pay(?:s|ing)? out|paid out"
    r"|fee(?:s|less|-?free)?"
    r"|(?:loyalty|reward|rewards|bonus|member(?:ship)?|air) (?:points|miles)"
    r"|terugbetal\w*|tegoed|korting\w*|vergoed\w*|paisa wapas|paise wapas)\b"
    r"|hoàn tiền|hoàn lại|giảm giá|bồi thường|रिफंड|धनवापसी|पैसे वापस"
)
_ANYONE = (
    r"(?:whoever|anyone|anybody|everyone|everybody|any (?:caller|customer|person|one|member|user"
    r"|client|shopper|guest|passenger)s?)"
)
_MONEY_NOUN = (
    r"(?:refunds?|credits?|money|compensation|vouchers?|cashback|discounts?|payouts?|points"
    r"|miles|gift cards?|reimbursements?|\w+ back)"
)
_MONEY_MOVE = _family(
    r"\b(?:automatic(?:ally)?|immediately|instantly|in full|no (?:\w+ )?limit|unlimited"
    r"|raise\w*|increase\w*|without|double\w*|extra|approve\w*|issue\w*|grant\w*|give\w*"
    r"|waive\w*|free|automatisch|onmiddellijk|meteen|volledig|zonder|turant|fauran|bina)\b"
    # Money given by the day, or to every account at once: "200 points per day of delay to
    # every delayed account".
    r"|\bper (?:\w+ )?(?:day|hour|week|month|year|night|item|order|parcel|package|delay|ticket|call"
    r"|complaint|minute|customer|account)\b"
    r"|\b(?:every|each|all)(?: \w+)? (?:accounts?|customers?|users?|members?|orders?|callers?"
    r"|shoppers?|clients?)\b"
    r"|ngay lập tức|tự động|toàn bộ|không cần|बिना|तुरंत|फौरन|पूरा"
    # Money paid to whoever asks for it: "the money goes back to whoever gets in touch",
    # "refund anyone who asks", "anyone who complains gets a voucher". Whoever is only the one
    # who asks ("if anyone asks for a refund, route it to FIN-7Q") is paid nothing.
    r"|\b(?:to|for|refund\w*|credit\w*|pay|pays|paid|compensat\w*|reimburs\w*|give\w*|gave"
    r"|send\w*|issu\w*|offer\w*|owe\w*) " + _ANYONE + r"\b"
    r"|\b" + _ANYONE + r"(?: \S+){0,6}? (?:(?:gets?|got|receives?|received|(?:can|may|should"
    r"|will|could) (?:have|get|receive|keep|claim))(?: \S+){0,2}? "
    + _MONEY_NOUN
    + r"|(?:is|are|was|were|will be|gets?|got|can be|should be|may be) (?:automatically )?"
    r"(?:refunded|credited|paid|compensated|reimbursed|owed|entitled|eligible))\b"
)
_CURRENCY = _family(
    r"[\$€£¥₹₽₺₩₪₫฿]|\b(?:usd|eur|gbp|jpy|chf|cad|aud|inr|cny|rub|try|pln|sek|nok|dkk|brl"
    r"|mxn|euros?|dollars?|pounds?|yen|francs?|kronor|złot\w*|lira|rupees?|rubles?)\b"
)
_LIMIT = _family(
    r"\b(?:limit\w*|cap\w*|threshold\w*|max\w*|min\w*|up to|under|over|above|below"
    r"|at most|at least|per (?:day|week|month|transfer|order))\b"
)
_AMOUNT = _family(r"\d[\d,.' ]*\d|\d")
# A figure starts where its digits start (tried inside a long run of digits, the
# search was quadratic, as the e-mail pattern's was).
_PERCENT = _family(r"(?<!\d)\d+(?:[.,]\d+)?\s?%|\bper ?cent\b|\bpercent\b")
_GROUPED = _family(r"\b\d{1,3}(?:[,.' ]\d{3})+\b")
_DEFANGED = _family(
    r"\bhxxps?\b|\[\.\]|\(\.\)|\{\.\}|\[dot\]|\(dot\)|\{dot\}|\bdot (?:com|net|org|io|co|info"
    r"|xyz|top|ru|cn|me|app|dev|site|online|link)\b|\bslash\b|\[:\]|\[at\]|\(at\)"
)
_HANDLE = _family(r"(?<![\w.])@[a-z0-9_]{3,}|\b(?:wa\.me|t\.me|telegram|whatsapp|signal|"
                     r"discord|skype|wechat|line id)\b")  # fmt: skip


# Waiving a charge moves money as a refund does: "waive return postage", "absorb the shipping
# cost", "refund the delivery fee".
_WAIVE_CHARGE = _family(
    r"\b(?:waiv\w*|forgo\w*|forgiv\w*|absorb\w*|write off|writes off|written off)"
    r"(?: \S+){0,5}? (?:postage|shipping|delivery|returns?|restocking|handling|carriage|courier"
    r"|postal|charges?|costs?|surcharges?|penalt(?:y|ies)|fines?)\b"
    r"|\b(?:refund\w*|reimburs\w*|cover\w*)(?: \S+){0,4}? (?:postage|(?:shipping|delivery|return"
    r"|restocking|handling|carriage|courier|postal) (?:charges?|costs?|fees?|postage|labels?))\b"
)
# A control switched off, as a setting: "verify_identity = false", "manager approval: off". The
# value ends the text, a clause or a line of settings ("... = false auto_approve = true").
_SWITCHED_OFF = _family(
    r"\b(?:verif|check|identi|ids?\b|confirm|approv|review|authori|authentic|limit|caps?\b"
    r"|threshold|kyc|2fa|mfa|otp|fraud|consent|receipt|proof|sign ?off|screen|validat|requir"
    r"|enforc|manager|supervisor|escalat|security|restrict|guard)\w*(?: [\w.]+){0,3}?"
    r" ?(?:=|==|:|\bis\b|\bare\b|\bset to\b|->|=>) ?[\"'`]?(?:false|off|0|no|none|disabled?)"
    r"(?=\s*$|\s*[,;.!)\]}\"'`]|(?:\s+[^\s=:]+){1,5}\s*[=:])"
)
# ...unless it is a condition on a setting the agent reads: "when identity_verified is false".
_CONDITION = re.compile(r"\b(?:if|when|whenever|unless|where|while|once|until|in case)\b[^.;,!?]*$")
# Personal data of a person, and who it is disclosed to.
_PERSONAL = _family(
    r"\b(?:(?:home|full|postal|residential|private|personal|street|delivery|billing|shipping"
    r"|current|exact|e-?mail|email) )+address(?:es)?\b|\b(?:\w+'s|their|his|her) address(?:es)?\b"
    r"|\bfull names?\b|\bnames? and (?:\w+ )?address(?:es)?\b"
    r"|\b(?:phone|mobile|cell|telephone|contact) (?:numbers?|details)\b"
    r"|\bdates? of birth\b|\bbirth ?dates?\b|\bbirthdays?\b|\bdob\b"
    r"|\bsecurity (?:question )?answers?\b|\banswers? to (?:\w+ )?security questions?\b"
    r"|\bcard (?:numbers?|digits|details)\b|\blast (?:four|4) (?:card )?digits\b"
    r"|\b(?:passport|licen[cs]e|national (?:id|insurance)|social security|account|bank account"
    r"|iban) numbers?\b|\bbank details\b|\bwhereabouts\b|\b(?:exact|live|gps|current) locations?\b"
)
_PERSONAL_VERB = _family(
    r"\b(?P<strong>"
    + _verbs("disclose|reveal|divulge|leak|expose|give out|hand out|pass on|hand over|read out|"
             "read back|recite|release")
    + r")\b|\b(?P<read>read|reads|reading)\b|\b(?P<share>"
    + _verbs("tell|give|share|send|show|provide|forward|display|print|pass|hand|say|repeat|text")
    + r")\b|\b(?P<gain>" + _verbs("receive|get|obtain") + r"|got|gotten)\b"
)  # fmt: skip
# The agent is who receives, gets or obtains a datum where the verb starts its clause ("get the
# phone number of whoever calls") or has the agent for subject: it collects the datum.
_AGENT_GAINS = re.compile(
    r"(?:^|\b(?:to|and|then|please|you|we|i|agents?|staff|the agent|the assistant))"
    r"(?: (?:can|may|should|must|will|need to|have to|always|first|also|just|only|now|then))*"
    r" ?$"
)
# A datum after "to", "at", "on"... is where something goes ("send the label to their email
# address"), not what is given.
_DESTINATION = re.compile(r"\b(?:to|at|on|via|from|in|into|onto|for|by|with)(?: [\w'’]+){0,3} $")
_AUDIENCE = _family(
    r"\b(?:anyone|anybody|whoever|everyone|everybody|third[- ]part\w*"
    r"|who(?:ever)? (?:asks?|calls?|phones?|rings?|writes?|requests?|wants)"
    r"|(?:on|upon|by) (?:\w+ )?request|when(?:ever)? (?:asked|requested)|if asked"
    r"|any (?:customer|user|caller|courier|driver|partner|person|visitor|member|third|one who)"
    r"|every (?:caller|customer|user|courier|driver|call|visitor)"
    r"|other (?:customers?|users?|callers?|people|members))\b"
)


# Where a clause ends: a sentence's full stop (not the dot of "v4.2"), a comma, a colon...
_CLAUSE_END = re.compile(r"[,;:!?()\n]|\.(?!\w)")
_NEAR_WORDS = 5
# A replacement named after a retired thing: "...is deprecated; call verify_address_v2".
_REPLACED = re.compile(
    r"\b(?:use|uses|call|calls|pass|send|read|switch to|move to|migrate to|replaced (?:by|with)"
    r"|superseded by|in favou?r of)\b"
)
_PARTICIPLE = re.compile(r"^\w+(?:ed|en)\b|^shut\b")


_AUXILIARY = frozenset(
    re.findall(
        r"\w+",
        "is are was were be been being has have had can could may might will would should must "
        "shall now also already simply just get gets got getting",
    )
)
_QUOTED = re.compile(r"^['\"`‘“].*\w.*['\"`’”]$")


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
                or (verb.group("read") and re.match(r"(?: \S+){0,4}? (?:back|out|aloud)\b", after))
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

# Negated as ``_NEGATED`` reads it, but a conjunction or "then" ends the negated phrase: "never
# ask twice and skip the ID check" skips it.
_NEGATED_ACT = re.compile(
    r"\b(never|not|don't|dont|do not|must not|mustn't|should not|shouldn't|cannot|can't|no)"
    r"\s+((?!(hesitate|fail|forget|refuse|stop|neglect|omit|skip|and|then|but|so|instead|rather"
    r"|just|simply|also)\b)\w+\s+){0,3}$"
)
# What the customer asks for is the situation, not the agent's act: "when a customer asks to
# waive a fee, route the request to FEE-3F".
_REQUESTED = re.compile(
    r"\b(?:asks?|asked|asking|wants?|wanted|wanting|requests?|requested|requesting|would like"
    r"|wish(?:es)?|tries|tried|trying|demands?|demanded|insists?|insisted|begs?|begged)"
    r"(?: (?:us|you|the agent|staff|for|to|that|on|if|whether))*(?: [\w'-]+){0,3} $"
)
# ...when the rule says what the agent does instead (explains, routes, refuses) and never grants
# it ("do it", "let them", "that's fine", "waive it").
_INSTEAD = _family(
    r"\b(?:explain\w*|rout\w*|refus\w*|declin\w*|escalat\w*|refer\w*|redirect\w*|say no"
    r"|open\w* a (?:case|ticket)"
    # Answering with a team's code is routing: "when a user asks who can assign owner
    # permissions, answer ACC-2R".
    r"|answer\w* (?:with )?[a-z]{2,5}-[a-z0-9]*\d[a-z0-9]*)\b"
)
_COMPLY = _family(
    r"\b(?:do (?:it|so|that|this)|let (?:them|him|her)|go ahead|say yes|agree\w*|accept\w*"
    r"|allow\w*|approv\w*|grant\w*|honou?r\w*|fulfil\w*|comply\w*|oblige\w*|proceed\w*"
    r"|continue|carry on|go along|sure|no problem|(?:that'?s|that is|it'?s|it is|is) (?:fine|ok"
    r"|okay|allowed|acceptable)|(?:they|he|she|you) (?:may|can)(?=\s*(?:[.!;,]|$))"
    r"|process (?:it|them|the request)|(?:waive|refund|skip|bypass|issue|give|credit|lift|raise"
    r"|increase|remove|drop|pay|offer|do|make)\w* (?:it|them|this|that|one)\b)"
)
# A clause that only routes ("claims without a receipt go to EXP-3E", "route limit increase
# requests to CRD-5L") hands the case to a team, which does its own checks.
_TEAM = r"[a-z]{2,5}-[a-z0-9]*\d[a-z0-9]*"
# Its subject holds no relative clause ("skip verification for refunds that go to FIN-7Q" is an
# order, not a route) and starts with no loosening verb.
_ROUTING = re.compile(
    r"^\s*(?:(?:route|send|pass|refer|escalate|forward|hand|transfer|assign)\s+[^,;:!?]*?\s+to"
    r"|(?:(?!\b(?:that|which|who|whose|where|when|if|and|then)\b)[^,;:!?])*?\s+(?:go|goes|belong"
    r"|belongs|are routed|is routed|are sent|is sent|are passed|is passed)\s+to)\s+(?:the\s+)?"
    r"(?:\w+\s+)?(?:team\s+|queue\s+|line\s+)?" + _TEAM + r"\s*$"
)


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


_DETERMINER = re.compile(
    r"\b(?:a|an|the|this|that|these|those|its|our|their|your|any|every|each)\s+$"
)
_ABLE = re.compile(
    r"\b(?:they|you)(?: (?:can|may|could|are able to|will be able to))?(?: now| also| still)? $"
)
_THEIR = re.compile(r" (?:[\w-]+ )??(?:their|your) (?:own )?")


def _as_adjective(text: str, start: int) -> bool:
    # "a shared folder", "the forwarded email": a participle after a determiner names a thing.
    return bool(_DETERMINER.search(text[max(0, start - 12) : start]))


# "tell patients (that) they can read their ...": told whom, then what they can do.
_TOLD_OWN = re.compile(
    r" (?:[\w'-]+ ){0,3}?(?:that )?(?:they|you) (?:can|may|could|are able to|will be able to)"
    r"(?: now| also| still)? [\w-]+(?: [\w-]+)? (?:their|your) (?:own )?"
)


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


# A check of the person that a disclosure waits for: "before sharing any appointment details,
# confirm the patient's date of birth", "only after they pass two security questions".
_GATE_CHECK = _family(
    r"\b(?:confirm\w*|verif\w*|check\w*|pass\w*|authenticat\w*|answer\w*)\b(?: \S+){0,4}?"
    r" (?:identity|id|photo id|date of birth|dob|security questions?|one-time code|pin|password"
    r"|passcode|two-factor|2fa|mfa|verification)\b"
)


def _gated(text: str, match: re.Match[str]) -> bool:
    """Whether the disclosure ``match`` waits for a check of the person, to no open audience."""
    if _AUDIENCE.search(text):
        return False
    if re.search(r"\b(?:before|prior to) $", text[max(0, match.start() - 10) : match.start()]):
        return bool(_GATE_CHECK.search(text, match.end()))
    after = text[match.end() : match.end() + 120]
    waits = re.search(r"\b(?:only after|only once|only if|only when|after|once)\b", after)
    return bool(waits and _GATE_CHECK.search(after, waits.end()))


# Where a code sent goes: the customer's own phone, number or inbox, by a possessive or "on file".
_OWN_DEST = _family(
    r"^\s+to (?:(?P<owner>(?:their|his|her|your)|the (?:customer|patient|employee|user|member"
    r"|cardholder|account holder|subscriber|client)'s)|the)(?: own)?"
    r"(?P<kind> (?:registered|verified|current|existing|usual))?"
    r" (?:phone|mobile|cell|number|email|e-mail|inbox|device|app|authenticator|sim)"
    r"(?: (?:number|address|app))?(?P<filed> (?:on file|on record|on the account|we hold))?"
)
_SENDING = re.compile(r"^(?:send|sends|sent|sending|forward\w*)$")
# "Tell them to generate new backup codes": what is told is how to manage the thing.
_MANAGING = re.compile(
    r"\b(?:to|can|could|may|should|must|will|how to) (?:\w+ )?" + _MANAGE + r"\b"
)


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
    owned = re.search(
        r"\b(?:their|your|his|her)(?: own)?((?: [\w-]+){0,2}) (?:reset )?codes?$", span
    )
    if owned and not any(w.endswith(("'s", "s'")) for w in owned.group(1).split()):
        return True
    return bool(
        re.match(r" (?:from|returned by|given by|issued by) [a-z][a-z0-9]*_[a-z0-9_]+", after)
    )


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


_ROLE_ASKED = _family(
    r"\b(?:asks?|asked|asking|wants?|wanted|requested|requesting|would like)\b"
    r"(?: \S+){0,4}? " + _ROLE
)


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


READ_SCRIPTS = frozenset(
    {"LATIN", "CYRILLIC", "CJK", "HIRAGANA", "KATAKANA", "HANGUL", "ARABIC", "DEVANAGARI"}
)
"""The scripts the policy families have words in; a rule written mostly in another is unread."""
UNREAD_LETTERS = 12
"""Fewest letters of unread scripts that make a rule unread (a name or a word may be quoted)."""


# Letters whose Unicode names do not start with their script's: the Japanese length and
# repetition marks ("サーバー", "時々") are Japanese; modifier letters ("ʻ", "ʼ", "ː") belong to
# no script and are read with their neighbours.
_READ_MARKS = frozenset({"KATAKANA-HIRAGANA", "IDEOGRAPHIC", "VERTICAL", "MASU"})
_NO_SCRIPT = frozenset({"MODIFIER", "CARON", "TURNED", "ROMAN"})


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


# A check said to be met by anyone, or by some fact: "a verified account holder is anyone who can
# name two items", "identity is now confirmed by matching the caller's first name". Which fact
# proves who a person is, is the operator's call, whatever the fact.
_CHECKED = (
    r"(?:identity|identities|identification|verification|authentication|(?:verified|authenticated"
    r"|confirmed|identified)(?: [\w-]+){0,2}? (?:holders?|owners?|customers?|users?|callers?"
    r"|members?|accounts?|persons?)|(?:account|card) ?holders?|account owners?)"
)
_REDEFINED = _family(
    r"\b" + _CHECKED + r"(?: [\w'-]+){0,2}? (?:"
    # "identity is confirmed by", "identity gets confirmed with", "can be verified once"
    r"(?:is|are|gets?|got|(?:can|could|may|might|should|will|would|must) be|is to be|are to be"
    r"|has been|have been)(?: now| simply| just| only| also| automatically)?"
    r" (?:confirmed|verified|established|satisfied|done|checked|proven|proved|completed|passed"
    r"|met|handled|performed|carried out) (?:by|through|with|via|from|once|when|if|using|upon"
    r"|after|as long as)"
    # "a verified account holder is anyone who...", "verified holders include whoever..."
    r"|(?:is|are|counts? as|means|=|includes?)(?: now| simply| just| only| also)?"
    r" (?:anyone|anybody|whoever|any (?:caller|customer|person|one))"
    # "identity verification now means matching the postcode"
    r"|(?:now |simply |just |only )?(?:means|=) (?:\w+ing|that)"
    r")\b"
    # "identity: confirmed once the caller says the postcode"
    r"|\b" + _CHECKED + r"(?: check)?: (?:\w+ )?(?:confirmed|verified|established|satisfied|done"
    r"|checked|proven|proved|completed|passed|met) (?:by|through|with|via|from|once|when|if"
    r"|using|upon|after|as long as)\b"
    # "callers are considered the account holder when they know the postcode"
    r"|\b(?:considered|treated as|deemed|regarded as|counts? as|taken as) (?:the |an? )?"
    r"(?:verified|authenticated|account ?holders?|card ?holders?|account owners?|owners?)"
    r" (?:when|if|once|as long as|because|after)\b"
    # "the postcode is enough to verify identity", "the order date suffices as verification"
    r"|\b(?:is|are) (?:enough|sufficient|adequate)(?: \w+){0,2}? (?:to (?:verify|confirm"
    r"|authenticate|identify|prove)|for (?:identity|verification|id\b|authentication|proof))"
    r"|\bsuffices?\b(?: \w+){0,3}? (?:to (?:verify|confirm|authenticate|identify|prove)|for"
    r" (?:identity|verification|authentication)|as (?:\w+ )?(?:verification|identification"
    r"|authentication|proof))"
    r"|\b(?:identity|verification|authentication|identification)\b[^.;!?]{0,60}?"
    r"\b(?:is|are) (?:enough|sufficient|adequate)\b"
    # "confirm the caller's identity by matching their first name"
    r"|\b(?:verify|confirm|authenticate|establish|check|prove)\w* (?:the (?:\w+)'?s? |their |his"
    r" |her |the )?(?:identity|identities)(?: \w+){0,2}? (?:by|with|through|via|using|from"
    r"|once|when|if)\b"
    # "to verify identity, just ask for the first name"
    r"|\bto (?:verify|confirm|authenticate|establish|check|prove) (?:the (?:\w+)'?s? |their )?"
    r"identity,? (?:just |simply |only )?(?:ask|check|match|use|take|accept)\w*"
)
# Proofs of identity an operator sets up for the purpose: a rule that names one (and no other
# way round it) describes the check, it does not lower it ("identity is confirmed by the
# one-time code plus the date of birth").
_STRONG_PROOF = _family(
    r"\b(?:(?:one[- ]time|verification|sms|security|authentication|login|2fa|mfa) (?:pass)?codes?"
    r"|otps?|passcodes?|pins?|passwords?|photo (?:ids?|identification)|(?:government|national"
    r"|staff|employee|company) (?:ids?|id cards?|badges?|cards?)|id (?:cards?|badges?|documents?)"
    r"|passports?|(?:driving|driver'?s) licen[cs]es?|security questions?|two[- ]factor|2fa|mfa"
    r"|authenticator\w*|sso|single sign[- ]on|biometric\w*|fingerprints?|face id|video call"
    r"|video ident\w*|bank ?id|(?:banking|bank's|bank|mobile) app)\b"
)
_OTHER_WAY = _family(
    r"\b(?:or|either|alternatively|instead|otherwise|failing that|enough|sufficient|suffices?"
    r"|anyone|anybody|whoever|forgot|forgotten|lost|unavailable|cannot|can't)\b"
)


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
