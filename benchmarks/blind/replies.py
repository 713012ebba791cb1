"""Family 1 (dev): free-text support replies judged by reviewer comments alone.

A homeware shop's support assistant answers six kinds of request; each kind has a
house convention a reviewer checks (a required sentence, an opening or a closing
line). Feedback is what a reviewer gives in a review tool: ``correct=True`` for a
reply that keeps its kind's convention, else ``correct=False`` with a comment
saying what was missing, never a reference reply (no ``ground_truth``), sent as
the docs say an app forwarding a reviewer's verdicts does (``source="reviewer"``:
a comment from the default source, ``"user"``, is end-user text). Scoring
checks the convention deterministically (the phrase, case and spaces aside).
"""

from __future__ import annotations

from typing import Any

from benchmarks.blind._family import Example, Family, Outcome, normalise

SYSTEM_PROMPT = (
    "You are the customer support assistant of Harbor Home, an online homeware shop. "
    "Reply to the customer's message in a short, friendly paragraph."
)

# kind: (what the reply must hold, how it is checked, the reviewer's comment when missing)
CONVENTIONS: dict[str, tuple[str, str, str]] = {
    "delay": (
        "contains",
        "orders > shipments",
        "Delivery questions: tell the customer they can follow the parcel under "
        "Orders > Shipments. That sentence is missing.",
    ),
    "refund": (
        "contains",
        "5-7 business days",
        "Refund replies must say the money arrives within 5-7 business days.",
    ),
    "login": (
        "starts",
        "security note:",
        "Anything about logging in or passwords has to open with 'Security note:'.",
    ),
    "cancel": (
        "contains",
        "free month",
        "When someone wants to cancel their subscription we always offer a free month first.",
    ),
    "address": (
        "contains",
        "confirm your postcode",
        "Address changes: ask the customer to confirm your postcode (use those words).",
    ),
    "product": (
        "ends",
        "reply yes or no",
        "Product questions end with: 'Did this answer your question? Reply YES or NO.'",
    ),
}

RULES = """House conventions for replies:
- Delivery or parcel questions: include the sentence "You can follow your parcel under Orders > Shipments."
- Refund requests: include "Refunds reach your account within 5-7 business days."
- Login or password trouble: start the reply with "Security note:".
- Subscription cancellations: offer a free month before anything else ("We'd like to offer you a free month").
- Address changes: include "Please confirm your postcode."
- Questions about a product: end the reply with "Did this answer your question? Reply YES or NO."
"""  # noqa: E501

_GOLD = {
    "delay": "Sorry your order is taking longer than expected. You can follow your parcel under "
    "Orders > Shipments.",
    "refund": "I have passed your refund request on. Refunds reach your account within 5-7 "
    "business days.",
    "login": "Security note: we will never ask for your password. Use 'Forgot password' on the "
    "sign-in page to set a new one.",
    "cancel": "Before you go, we'd like to offer you a free month. If you still want to cancel, "
    "just let me know.",
    "address": "Happy to change the delivery address. Please confirm your postcode.",
    "product": "Yes, it fits standard fittings. Did this answer your question? Reply YES or NO.",
}


def _ex(kind: str, text: str) -> Example:
    return Example(input=text, kind=kind, answer=_GOLD[kind])


TRAIN = (
    _ex(
        "delay", "My order was supposed to arrive on Monday and it still hasn't come. Where is it?"
    ),
    _ex("delay", "The parcel with my lamp is late, any news on the delivery?"),
    _ex("refund", "I returned the kettle last week, when do I get my money back?"),
    _ex("refund", "Please refund me for the broken mug set."),
    _ex("login", "I can't log in, it says my password is wrong."),
    _ex("login", "How do I reset my password?"),
    _ex("cancel", "I want to cancel my plant subscription."),
    _ex("cancel", "Please stop my monthly candle subscription, I don't need it anymore."),
    _ex("address", "I moved house, can you change my delivery address?"),
    _ex("address", "Please send my order to my new address instead."),
    _ex("product", "Is the oak side table solid wood or veneer?"),
    _ex("product", "Does the Nordic lamp work with LED bulbs?"),
)

HELDOUT = (
    _ex("delay", "Still waiting on the rug I bought ten days ago, has it even shipped?"),
    _ex("delay", "Tracking hasn't moved since Friday. What's going on with my package?"),
    _ex("refund", "The curtains came torn. I'd like my money returned please."),
    _ex("refund", "How long until the reimbursement for my cancelled order shows up?"),
    _ex("login", "Your site keeps rejecting my sign-in, I'm locked out of my account."),
    _ex("login", "Forgot my account password, what now?"),
    _ex("cancel", "End my coffee bean membership please, it's too expensive."),
    _ex("cancel", "How do I unsubscribe from the monthly flower box?"),
    _ex("address", "Wrong street on my order! It should go to 12 Mill Lane."),
    _ex("address", "I need to update where my parcels get delivered."),
    _ex("product", "What are the dimensions of the velvet armchair?"),
    _ex("product", "Can the ceramic bowls go in the dishwasher?"),
)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the reply keeps its kind's convention."""
    how, phrase, _ = CONVENTIONS[example.kind]
    text = normalise(outcome.text).strip("\"' ")
    if how == "starts":
        return 1.0 if text.startswith(phrase) else 0.0
    if how == "ends":
        # The closing line may carry final punctuation or a sign-off of a few characters.
        return 1.0 if phrase in text[-len(phrase) - 20 :] else 0.0
    return 1.0 if phrase in text else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """A reviewer's verdict: right, or wrong with a comment (no reference reply)."""
    if score(example, outcome) == 1.0:
        return {"correct": True, "source": "reviewer"}
    return {"correct": False, "comment": CONVENTIONS[example.kind][2], "source": "reviewer"}


FAMILY = Family(
    name="replies",
    title="free-text support replies, six house conventions, reviewer comments only",
    sealed=False,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    feedback_kind="correct=True, or correct=False with a reviewer comment (source=reviewer)",
)
