"""Family 8 (SEALED: not run during development): escalation triage with thumbs-only feedback.

A marketplace's trust desk decides for each customer message whether it goes to
the escalations team (``ESCALATE``) or the standard queue (``STANDARD``). House
policy: escalate legal threats, press or media enquiries, and anything about a
safety hazard or injury; everything else is standard. Feedback is a thumbs up or
down alone (``correct=`` only: no label, no comment; an end user's, so the
default source). Scoring: the reply must be the decision word alone.

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from typing import Any

from benchmarks.blind._family import Example, Family, Outcome, label_score

SYSTEM_PROMPT = (
    "You are the trust desk of Quayside Market. Decide where each customer message goes. "
    "Reply ESCALATE or STANDARD only."
)

RULES = """Escalation policy:
- ESCALATE: legal threats (lawyers, suing, court), press or media enquiries (journalists,
  newspapers, TV), and safety hazards or injuries (fire, burns, electric shocks, choking).
- STANDARD: everything else, however angry the customer is.
"""


def _ex(text: str, decision: str) -> Example:
    return Example(input=text, kind=decision.lower(), answer=decision)


TRAIN = (
    _ex("My lawyer will be in touch if this isn't sorted by Friday.", "ESCALATE"),
    _ex("I'm a reporter at the Daily Courier writing about late deliveries.", "ESCALATE"),
    _ex("The heater I bought caught fire in my living room.", "ESCALATE"),
    _ex("I will take you to small claims court over this.", "ESCALATE"),
    _ex("My son got a shock from the phone charger you sold.", "ESCALATE"),
    _ex("A TV station asked me about my experience with your shop.", "ESCALATE"),
    _ex("This is the worst service ever, I'm furious!!!", "STANDARD"),
    _ex("My parcel is three days late.", "STANDARD"),
    _ex("The seller sent the wrong size shoes.", "STANDARD"),
    _ex("Why was my account suspended?", "STANDARD"),
    _ex("I want to leave a one-star review, how do I do it?", "STANDARD"),
    _ex("The toy's paint is peeling, very disappointing quality.", "STANDARD"),
    _ex("The blender blade came loose and cut my hand.", "ESCALATE"),
    _ex("I've been waiting a week for a refund, this is ridiculous.", "STANDARD"),
    _ex("I'm preparing legal action against the seller.", "ESCALATE"),
    _ex("Can I change the colour of the lamp I ordered?", "STANDARD"),
)

HELDOUT = (
    _ex("Expect to hear from my solicitor about this fraud.", "ESCALATE"),
    _ex("Hello, I'm writing a story for a consumer magazine about your refunds.", "ESCALATE"),
    _ex("The toaster sparked and burned my kitchen counter.", "ESCALATE"),
    _ex("My baby nearly choked on a loose part of the rattle.", "ESCALATE"),
    _ex("I'm going to sue unless I get my money back.", "ESCALATE"),
    _ex("A journalist from the local radio wants your comment.", "ESCALATE"),
    _ex("Absolutely livid, the item is useless and support ignores me!", "STANDARD"),
    _ex("Where's my order? Tracking says delayed.", "STANDARD"),
    _ex("Received a blue mug instead of the green one.", "STANDARD"),
    _ex("How do I reset the password of my seller account?", "STANDARD"),
    _ex("The sofa cushions look cheaper than the photos.", "STANDARD"),
    _ex("Please cancel my order, I changed my mind.", "STANDARD"),
)


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """A thumbs up or down, nothing else."""
    return {"correct": label_score(example, outcome) == 1.0}


FAMILY = Family(
    name="thumbs",
    title="escalation triage (ESCALATE / STANDARD) with thumbs-only feedback",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=feedback,
    feedback_kind="correct=bool only (a thumbs up or down): no label, no comment",
)
