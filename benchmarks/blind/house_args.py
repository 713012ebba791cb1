"""Family 7 (SEALED: not run during development): a tool agent with house argument values.

An ISP's support agent files every request with one call,
``create_case(queue, severity, channel)``, whose values are house codes the
model cannot guess: the queue by topic (``Q-BIL`` billing, ``Q-TEC`` technical,
``Q-ACC`` account), severity ``S1`` when the service is completely down else
``S3``, and channel always ``web``. Feedback is a reviewer's: right, or wrong
with a comment naming the values that were off (no ``ground_truth``;
``source="reviewer"``). Scoring:
exactly one ``create_case`` call with all three values right.

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from typing import Any

from benchmarks.blind._family import (
    Call,
    Example,
    Family,
    Outcome,
    written_calls,
    wrong_fields,
)

SYSTEM_PROMPT = (
    "You are the support agent of Kestrel Broadband. File every customer request as a case "
    "with one create_case call."
)

RULES = """create_case values:
- queue: Q-BIL for bills, charges and payments; Q-TEC for connection, speed and equipment
  problems; Q-ACC for logins, passwords, contact details and account changes.
- severity: S1 when the customer has no service at all, otherwise S3.
- channel: always "web".
"""


def create_case(queue: str, severity: str, channel: str) -> str:
    """File a support case."""
    return f"Case filed in {queue} ({severity}, {channel})."


def _ex(text: str, queue: str, severity: str) -> Example:
    calls = (Call("create_case", {"queue": queue, "severity": severity, "channel": "web"}),)
    return Example(input=text, kind=queue, answer=written_calls(calls), calls=calls)


TRAIN = (
    _ex("I was charged twice this month.", "Q-BIL", "S3"),
    _ex("Why is my bill higher than usual?", "Q-BIL", "S3"),
    _ex("My direct debit failed, what do I do?", "Q-BIL", "S3"),
    _ex("Internet is completely dead since this morning.", "Q-TEC", "S1"),
    _ex("The wifi is really slow in the evenings.", "Q-TEC", "S3"),
    _ex("My router's light is blinking red and nothing works at all.", "Q-TEC", "S1"),
    _ex("The new modem you sent drops the connection sometimes.", "Q-TEC", "S3"),
    _ex("I forgot my account password.", "Q-ACC", "S3"),
    _ex("Please change the email on my account.", "Q-ACC", "S3"),
    _ex("I want to add my partner as an account holder.", "Q-ACC", "S3"),
    _ex("There is a charge on my invoice I don't recognise.", "Q-BIL", "S3"),
    _ex("Total outage here, no broadband and no phone line.", "Q-TEC", "S1"),
)

HELDOUT = (
    _ex("You took the payment two times from my card.", "Q-BIL", "S3"),
    _ex("Can I get a breakdown of this month's invoice amount?", "Q-BIL", "S3"),
    _ex("Refund the late fee please, I paid on time.", "Q-BIL", "S3"),
    _ex("Nothing connects, the line has been down for hours.", "Q-TEC", "S1"),
    _ex("Streaming keeps buffering, speeds are poor.", "Q-TEC", "S3"),
    _ex("No service whatsoever since the storm.", "Q-TEC", "S1"),
    _ex("The TV box you supplied restarts randomly.", "Q-TEC", "S3"),
    _ex("I'm locked out of my online account.", "Q-ACC", "S3"),
    _ex("Update the phone number you have for me.", "Q-ACC", "S3"),
    _ex("Remove my ex-flatmate from the account please.", "Q-ACC", "S3"),
    _ex("What's this extra fee on my statement?", "Q-BIL", "S3"),
    _ex("My whole connection is gone, can't get online at all.", "Q-TEC", "S1"),
)

_FIELDS = ("queue", "severity", "channel")


def _wrong_fields(example: Example, outcome: Outcome) -> list[str] | None:
    """The fields with a wrong value, or None when the run made no single create_case call."""
    return wrong_fields(example, outcome, "create_case", _FIELDS)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the run made one create_case call with the three right values."""
    return 1.0 if _wrong_fields(example, outcome) == [] else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """A reviewer's verdict, wrong values named in a comment."""
    wrong = _wrong_fields(example, outcome)
    if wrong == []:
        return {"correct": True, "source": "reviewer"}
    want = example.calls[0].args
    if wrong is None:
        comment = (
            "Every request must be filed with exactly one create_case call: here it should "
            f"have been queue {want['queue']}, severity {want['severity']}, channel web."
        )
    else:
        comment = "Wrong case values: " + ", ".join(f"{key} must be {want[key]}" for key in wrong)
    return {"correct": False, "comment": comment, "source": "reviewer"}


FAMILY = Family(
    name="house_args",
    title="tool agent with house argument values (queue codes, severity, channel)",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    tools=(create_case,),
    feedback_kind="correct=True, or correct=False with a reviewer comment (source=reviewer)",
)
