"""The playbook and requests of ``python -m benchmarks.overhead --focus``.

30 "When <situation>, <action>." rules (the form both role profiles write),
and requests of about 500 characters, each naming one to three of the rules'
situations among sentences that name none: what the focus
(``ServingSettings.focus_rules``) matches on every model call.
"""

from __future__ import annotations

import random

from langgraph_combee import Combee, ServingSettings
from langgraph_combee.types import Add, Decision, Playbook, PromptVersion

__all__ = ["FOCUS_RULES", "focus_combee", "focus_requests"]

_TOPICS = [
    ("refund", "money back"),
    ("desk lamp repair", "broken lamp"),
    ("password reset", "forgot password"),
    ("authenticator", "two factor code"),
    ("invoice copy", "receipt"),
    ("shipping delay", "late delivery"),
    ("parcel lost", "missing parcel"),
    ("account locked", "locked out"),
    ("cancel subscription", "stop renewal"),
    ("billing address", "change address"),
    ("card declined", "payment failed"),
    ("warranty claim", "guarantee"),
    ("return label", "send it back"),
    ("gift card", "voucher"),
    ("promo code", "discount code"),
    ("order status", "where is my order"),
    ("damaged item", "arrived broken"),
    ("wrong size", "too small"),
    ("exchange item", "swap"),
    ("price match", "cheaper elsewhere"),
    ("loyalty points", "reward points"),
    ("unsubscribe", "too many emails"),
    ("data export", "download my data"),
    ("delete account", "erase my data"),
    ("api key", "token expired"),
    ("webhook failure", "callback error"),
    ("login error", "cannot sign in"),
    ("bulk order", "wholesale"),
    ("tax exemption", "vat number"),
    ("accessibility", "screen reader"),
]
FOCUS_RULES = [
    f"When {first} or {second}, answer {chr(65 + i % 26)}{i:02d}-{(7 * i) % 10}Q."
    for i, (first, second) in enumerate(_TOPICS)
]
"""30 rules in the form both role profiles write."""

_FILLER = [
    "Hello team, I hope you are all doing well this week.",
    "I have been a customer for many years and usually everything works fine.",
    "Yesterday evening I tried again from my laptop and from my phone as well.",
    "My neighbour had something similar last month, so maybe it is a known thing.",
    "I would appreciate a quick answer because I am travelling on Friday.",
    "Please let me know what information you need from me to sort this out.",
    "Thanks a lot in advance, and sorry for the long message.",
    "Kind regards from a slightly frustrated but still loyal customer.",
]


def focus_requests(count: int = 16, *, seed: int = 7, chars: int = 540) -> list[str]:
    """``count`` requests of at most ``chars`` characters (about 500), naming one to three rules."""
    rng = random.Random(seed)
    requests = []
    for _ in range(count):
        named = [rng.choice(pair) for pair in rng.sample(_TOPICS, rng.randint(1, 3))]
        parts = [f"I need help with the {topic}." for topic in named]
        # Filler until the next sentence would pass ``chars`` (the named ones are never cut).
        while True:
            filler = rng.choice(_FILLER)
            if sum(len(p) + 1 for p in parts) + len(filler) > chars:
                break
            parts.insert(rng.randrange(len(parts) + 1), filler)
        requests.append(" ".join(parts))
    return requests


def focus_combee(focus_rules: int) -> Combee:
    """A ``Combee`` serving ``FOCUS_RULES`` (accepted directly), with ``focus_rules`` set."""
    combee = Combee(
        prompt_id=f"focus-{focus_rules}", serving=ServingSettings(focus_rules=focus_rules)
    )
    registry = combee.registry()
    playbook = Playbook().apply([Add(section="others", content=r) for r in FOCUS_RULES]).playbook
    candidate = registry.add_candidate(PromptVersion(prompt_id=combee.prompt_id, playbook=playbook))
    registry.accept(
        candidate.version, Decision(accepted=True, policy="manual", reason="benchmark playbook")
    )
    return combee
