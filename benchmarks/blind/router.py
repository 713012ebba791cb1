"""Family 4 (dev): a tool router whose right answer is a word the user typed.

A hardware company's front-desk agent routes each message with one of two tools:
``open_ticket(product)`` for a fault report, ``transfer(team)`` when the user asks
for a team by name. The right argument is the product or team name the user
wrote, in the house form: lower case, words joined by hyphens ("Aurora Max" ->
``aurora-max``). Held-out messages name other products and teams, so a rule tied
to a training name cannot help. Feedback: right or wrong, with the right call as
``ground_truth`` (``source="operator"``). Scoring: exactly one call, the right
tool, the right value.
"""

from __future__ import annotations

from typing import Any

from benchmarks.blind._family import (
    Call,
    Example,
    Family,
    Outcome,
    made_calls,
    same_value,
    written_calls,
)

SYSTEM_PROMPT = (
    "You are the front desk of Lumo Devices. Route every message with exactly one tool call."
)

RULES = """Routing rules:
- A fault or problem with a product: call open_ticket(product=...) with the product name the
  user wrote, in lower case, words joined by hyphens (e.g. "Aurora Max" -> "aurora-max").
- The user asks to speak to or be passed to a team: call transfer(team=...) with the team name
  they wrote, in lower case, words joined by hyphens (e.g. "Field Service" -> "field-service").
Make exactly one call.
"""


def open_ticket(product: str) -> str:
    """Open a fault ticket for a product."""
    return f"Ticket opened for {product}."


def transfer(team: str) -> str:
    """Transfer the conversation to a team."""
    return f"Transferred to {team}."


def _ticket(text: str, product: str) -> Example:
    calls = (Call("open_ticket", {"product": product}),)
    return Example(input=text, kind="ticket", answer=written_calls(calls), calls=calls)


def _transfer(text: str, team: str) -> Example:
    calls = (Call("transfer", {"team": team}),)
    return Example(input=text, kind="transfer", answer=written_calls(calls), calls=calls)


TRAIN = (
    _ticket("My Aurora Max keeps rebooting every few minutes.", "aurora-max"),
    _ticket("The Pulse Mini won't charge anymore.", "pulse-mini"),
    _ticket("Screen flickers on my Nova Tab.", "nova-tab"),
    _ticket("Halo Buds left earbud has no sound.", "halo-buds"),
    _ticket("The Terra Hub drops the wifi connection all the time.", "terra-hub"),
    _ticket("My Orbit Cam shows a black image.", "orbit-cam"),
    _transfer("Can I talk to the Billing team please?", "billing"),
    _transfer("Put me through to Field Service.", "field-service"),
    _transfer("I'd like to speak with Enterprise Sales.", "enterprise-sales"),
    _transfer("Transfer me to Returns.", "returns"),
    _transfer("Please connect me to the Partner Desk.", "partner-desk"),
    _transfer("I need the Warranty team.", "warranty"),
)

HELDOUT = (
    _ticket("Since the update, my Zephyr Watch freezes on the home screen.", "zephyr-watch"),
    _ticket("Beacon Speaker crackles at any volume, it's broken.", "beacon-speaker"),
    _ticket("Got a Lumen Desk Lamp that won't switch on.", "lumen-desk-lamp"),
    _ticket("The battery of my Flux Pad dies within an hour.", "flux-pad"),
    _ticket("Keys stick on the Quill Keyboard I bought.", "quill-keyboard"),
    _ticket("Vista Router reboots itself overnight.", "vista-router"),
    _transfer("Could someone from Customer Loyalty call me?", "customer-loyalty"),
    _transfer("Hand me over to Accounts Payable.", "accounts-payable"),
    _transfer("Route me to the Installations crew.", "installations"),
    _transfer("Is the Trade-In department available?", "trade-in"),
    _transfer("Let me chat with Technical Support.", "technical-support"),
    _transfer("Get me the Privacy Office.", "privacy-office"),
)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the run made exactly the right call with the right value."""
    calls = made_calls(outcome)
    if len(calls) != 1:
        return 0.0
    want = example.calls[0]
    got = calls[0]
    key = next(iter(want.args))
    return 1.0 if got.name == want.name and same_value(got.args.get(key), want.args[key]) else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """Right or wrong, with the right call."""
    right = score(example, outcome) == 1.0
    return {"correct": right, "ground_truth": example.answer, "source": "operator"}


FAMILY = Family(
    name="router",
    title="tool router, the right argument is the name the user typed (house form)",
    sealed=False,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    tools=(open_ticket, transfer),
    feedback_kind="correct=bool with the right call as ground_truth (source=operator)",
)
