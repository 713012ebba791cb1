"""Where everything lives in the store: the namespace layout and key formats.

Everything for one prompt and tenant lives under one namespace prefix, one
namespace per kind of record::

    ("combee", <prompt_id>, <tenant or "_">, "versions")    "0000000007"  a PromptVersion
    ("combee", <prompt_id>, <tenant or "_">, "meta")        "head"        the HEAD pointer
                                                            "latest"      highest version (hint)
                                                            "canary"      candidate on trial
    ("combee", <prompt_id>, <tenant or "_">, "lease")       "writer"      the writer lease
    ("combee", <prompt_id>, <tenant or "_">, "queue")       "<ns>-<id>"   a queued trace
    ("combee", <prompt_id>, <tenant or "_">, "queue_index") <trace id>    its queue status
    ("combee", <prompt_id>, <tenant or "_">, "dead_letters") <trace id>   a parked trace
    ("combee", <prompt_id>, <tenant or "_">, "steps")       "<ns>-<rand>" a recent step's summary

Version keys are zero-padded to ten digits so they sort by number. LangGraph
namespace labels must be non-empty strings without periods or NUL characters,
so prompt ids and tenants are checked against that rule when a storage object
is built, and ``"_"`` is reserved for "no tenant".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from langgraph_combee._errors import ConfigurationError

ROOT = "combee"
NO_TENANT = "_"

Kind = Literal["versions", "meta", "lease", "queue", "queue_index", "dead_letters", "steps"]

HEAD_KEY = "head"
CANARY_KEY = "canary"
LATEST_KEY = "latest"
LEASE_KEY = "writer"
HANDOVER_KEY = "handover"

VERSION_DIGITS = 10
MAX_VERSION = 10**VERSION_DIGITS - 1

_LABEL_RULE = "a non-empty string without '.' or NUL characters (LangGraph namespace labels)"


def validate_label(name: str, value: object) -> str:
    """Check that ``value`` can be a LangGraph namespace label and return it.

    Args:
        name: The argument's name, used in the error message.
        value: The value to check.

    Returns:
        The value, unchanged.

    Raises:
        ConfigurationError: When the value is not a string, is blank, or contains
            a period or a NUL character.
    """
    if not isinstance(value, str) or not value.strip() or "." in value or "\x00" in value:
        raise ConfigurationError(name, value, _LABEL_RULE)
    return value


def version_key(version: int) -> str:
    """Return the store key of a version: its number zero-padded to ten digits."""
    if isinstance(version, bool) or not isinstance(version, int):
        raise ConfigurationError("version", version, "an int")
    if not 0 <= version <= MAX_VERSION:
        raise ConfigurationError("version", version, f"an int from 0 to {MAX_VERSION}")
    return f"{version:0{VERSION_DIGITS}d}"


def parse_version_key(key: str) -> int | None:
    """Return the version number a key encodes, or None for a key that is not a version key."""
    if len(key) != VERSION_DIGITS or not key.isdigit():
        return None
    return int(key)


@dataclass(frozen=True)
class PromptSpace:
    """The validated namespace prefix of one prompt and tenant.

    Attributes:
        prompt_id: The prompt's id (a valid namespace label).
        tenant: The tenant, or None for the single default tenant.
    """

    prompt_id: str
    tenant: str | None = None

    def __post_init__(self) -> None:
        validate_label("prompt_id", self.prompt_id)
        if self.tenant is not None:
            validate_label("tenant", self.tenant)
            if self.tenant == NO_TENANT:
                raise ConfigurationError(
                    "tenant", self.tenant, f"{NO_TENANT!r} is reserved for tenant=None"
                )

    @property
    def tenant_label(self) -> str:
        """The tenant's namespace label: the tenant, or ``"_"`` when there is none."""
        return self.tenant if self.tenant is not None else NO_TENANT

    def namespace(self, kind: Kind) -> tuple[str, str, str, str]:
        """Return the namespace holding records of ``kind`` for this prompt and tenant."""
        return (ROOT, self.prompt_id, self.tenant_label, kind)
