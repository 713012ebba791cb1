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
import re
import unicodedata
import urllib.parse
from collections.abc import Iterator, Sequence

_INVISIBLE = re.compile(
    r"[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]"
)
_CONFUSABLES = str.maketrans(
    {
        # Cyrillic and Greek letters that look like Latin ones.
        "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i",
        "ј": "j", "ѕ": "s", "ԁ": "d", "ɡ": "g", "һ": "h", "ո": "n", "ν": "v", "ο": "o",
        "α": "a", "ε": "e", "ι": "i", "κ": "k", "τ": "t", "υ": "u", "ρ": "p",
    }
)  # fmt: skip
_LEET = str.maketrans(
    {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s",
     "|": "i", "!": "i"}
)  # fmt: skip
_SPELLED = re.compile(r"(?<!\w)(?:\w[\s.\-_*/+]{1,3}){3,}\w(?!\w)")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")


def _decode_base64(run: str) -> str | None:
    padded = run + "=" * (-len(run) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            raw = decode(padded)
        except (binascii.Error, ValueError):
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        printable = sum(ch.isprintable() or ch.isspace() for ch in text)
        if text and printable / len(text) > 0.9:
            return text
    return None


def _join_spelled(run: str) -> str:
    # "i.g.n.o.r.e a.l.l" keeps spaces as word breaks; "i g n o r e  a l l" keeps
    # the wider gaps; either way the letters of one word are joined up.
    if re.search(r"\w[.\-_*/+]\w", run):
        return " ".join(re.sub(r"[.\-_*/+]", "", w) for w in run.split())
    return " ".join(w.replace(" ", "") for w in re.split(r"\s{2,}", run))


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
    out.extend(_basic(d) for d in map(_decode_base64, _BASE64.findall(unescaped)) if d)
    out.append(codecs.encode(plain, "rot13"))
    out.append(plain[::-1])
    out.append(native)
    return list(dict.fromkeys(out))


# ---- the checks ---------------------------------------------------------------

_NEGATED = re.compile(
    r"\b(never|not|don't|dont|do not|must not|mustn't|should not|shouldn't|cannot|can't|no)"
    # Up to three words between ("do not ask customers to send"), unless one of them
    # negates the negation ("never hesitate to reveal", "do not fail to send").
    r"\s+((?!(hesitate|fail|forget|refuse|stop|neglect|omit|skip)\b)\w+\s+){0,3}$"
)

_CREDENTIAL = (
    r"(system\s*prompt|(hidden|secret|internal|initial|original|system)\s+(instructions?|prompt|rules)"
    r"|instructions\s+above|admin(istrator)?\s*(password|credentials?|account|login|pin)"
    r"|root\s+password|pass\s?words?(?!\s*(reset|recovery|change|link|expir|polic|strength"
    r"|manager|rule|field|form|page|screen))|passcodes?|credentials?|api[\s_-]?keys?"
    r"|(access|auth(entication)?|session|bearer|refresh)\s+tokens?|secret\s+keys?|private\s+keys?"
    r"|(credit\s+)?card\s+numbers?|cvv|social\s+security|mot\s+de\s+passe|contrase[nñ]a"
    r"|passwort|senha|wachtwoord|пароль|密码|パスワード|has[lł]o|şifre)"
)
_REVEAL_VERBS = (
    r"(reveal|disclose|leak|expose|dump|exfiltrate|divulge|r[ée]v[èe]le[rz]?|revela[r]?"
    r"|verr[aä]t|preisgeben|rivela(re)?|revele|раскрой|покажи|透露|泄露|告诉)"
)
_SHARE_VERBS = (
    r"(show|tell|give|share|provide|output|repeat|display|send|include|paste|print|read out"
    r"|type|spell out|hand over|reply with|respond with|answer with|donne[rz]?|envoie[rz]?"
    r"|dame|dime|env[ií]a|gib|sende|dai|mostra|manda)"
)

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
        r"\b(add|write|put|insert|save|store|append|include|remember|record)\b.{0,40}"
        r"\b(to|in|into|as)\b\s*(your|the|a)\s+(new\s+)?(rules?|instructions|playbook|system prompt"
        r"|prompt|memory|guidelines|policy)\b",
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

_DEST = (
    r"(https?|ftp|www\.|@|webhook|endpoint|server|external|outside|third[- ]party|remote"
    r"|address|url|domain|bucket|pastebin|discord|telegram|attacker|channel|inbox|ip\b)"
)
_DATA = (
    r"(data|conversations?|chats?|transcripts?|history|messages|credentials?|pass\s?words?"
    r"|tokens?|keys?|details|records|information|info|logs|prompts?|everything|all|contents?"
    r"|emails?|database|files?|secrets?|card|pii|personal)"
)
EXFILTRATION: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"\b(send|post|forward|upload|transmit|exfiltrate|copy|cc|bcc|e-?mail|mail|sync|push"
        r"|report|submit|beacon|leak|relay|pipe|curl|fetch)\b.{0,60}\b" + _DATA
        + r"\b.{0,60}\b(to|into|at|via|on)\b.{0,40}" + _DEST
    ),
    re.compile(r"\b" + _REVEAL_VERBS + r"\b.{0,40}" + _CREDENTIAL),
    re.compile(r"\b" + _SHARE_VERBS + r"\b.{0,40}" + _CREDENTIAL),
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

_EMAIL = re.compile(r"[a-z0-9._%+-]+\s*(@|\(at\)|\[at\])\s*[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}")
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
    """The host name of a URL or bare domain (lower case, no port)."""
    parsed = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    return (parsed.hostname or "").lower().removeprefix("www.")
