"""Family 19 (SEALED: not run during development): garage bookings to house bays, mixed feedback.

A car repair garage's service-desk agent books every customer request with one
call, ``book_job(bay, note)``. ``note`` is free text; ``bay`` takes the
garage's own value for the kind of work, which the model cannot guess: a
routine service, oil change or annual inspection (``south-1``), brakes
(``north-2``), tyres and wheels (``north-4``), bodywork dents and scratches
(``yard-b``) and windscreen or window glass (``mobile-1``). Feedback is mixed
from run to run, as production gives it: some runs get an operator's ground
truth, the right call written as Python as the docs say tool-call ground truth
is given (``book_job(bay='north-4', note='...')``, with ``correct=`` and
``source="operator"``); some a reviewer's verdict with a comment saying the
convention in the reviewer's own words and no right call
(``source="reviewer"``); some nothing at all (``feedback`` returns ``{}``).
Every kind has a labelled or commented training run. Held-out: two or three
requests per kind in other words. Scoring: exactly one ``book_job`` call with the right bay
(case and spaces aside); ``note`` is not scored.

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
    "You are the service-desk agent of Harcourt Motors, a car repair garage. Book every "
    "customer request as a job with one book_job call, then tell the customer in one sentence "
    "that it is booked."
)

RULES = """book_job values:
- bay by kind of work:
  - routine service, oil change, annual inspection or MOT: south-1
  - brakes (squealing or grinding, brake warning light, soft pedal): north-2
  - tyres and wheels (puncture, worn tread, pressure warning, wheel alignment): north-4
  - bodywork (dents, scratches, a damaged bumper or door panel): yard-b
  - windscreen or window glass (chips, cracks, a broken side window): mobile-1
- note: a short summary of the request.
"""

BAYS = {
    "service": "south-1",
    "brakes": "north-2",
    "tyres": "north-4",
    "body": "yard-b",
    "glass": "mobile-1",
}

# How a run's feedback arrives: "label" an operator's right call, "comment" a reviewer's
# comment, "none" nothing.
_HOWS = ("label", "comment", "none")
_HOW: dict[str, str] = {}
_COMMENT: dict[str, str] = {}


def book_job(bay: str, note: str) -> str:
    """Book a job in the garage's workshop."""
    return f"Job booked in {bay}: {note}"


def _ex(kind: str, text: str, note: str, how: str = "none", comment: str = "") -> Example:
    if how not in _HOWS:
        raise ValueError(f"how={how!r} is not one of {_HOWS}")
    if how == "comment" and not comment:
        raise ValueError(f"a commented run needs its comment: {text!r}")
    _HOW[text] = how
    _COMMENT[text] = comment
    calls = (Call("book_job", {"bay": BAYS[kind], "note": note}),)
    return Example(input=text, kind=kind, answer=written_calls(calls), calls=calls)


TRAIN = (
    _ex(
        "tyres",
        "I've got a puncture in my front left tyre, can you fix it this week?",
        "puncture front left tyre",
        "label",
    ),
    _ex(
        "brakes",
        "My brakes squeal every time I stop.",
        "squealing brakes",
        "comment",
        "Brake work is booked into bay north-2.",
    ),
    _ex("service", "The car is due its annual service, any time on Monday.", "annual service"),
    _ex(
        "glass",
        "A stone chipped my windscreen on the motorway.",
        "windscreen chip",
        "label",
    ),
    _ex(
        "body",
        "Someone dented my rear door in the car park, can you knock it out?",
        "dent rear door",
        "comment",
        "wrong bay - dents and scratches go to yard-b",
    ),
    _ex(
        "service",
        "I need an oil change and a general check before a long drive.",
        "oil change and check",
        "label",
    ),
    _ex(
        "tyres",
        "The tyre pressure warning keeps coming on.",
        "tyre pressure warning",
        "comment",
        "Anything to do with tyres or wheels has to be booked with bay north-4.",
    ),
    _ex("brakes", "The brake warning light came on this morning.", "brake warning light"),
    _ex(
        "body",
        "My bumper got scratched reversing into a post.",
        "scratched bumper",
        "label",
    ),
    _ex(
        "glass",
        "The passenger side window is smashed, someone broke in.",
        "smashed side window",
        "comment",
        "Glass jobs, windscreens and side windows alike, are for mobile-1.",
    ),
    _ex("tyres", "My tyres are nearly bald, I need two new ones.", "two new tyres"),
    _ex(
        "brakes",
        "There's a grinding noise from the brakes at the back.",
        "grinding rear brakes",
        "label",
    ),
    _ex(
        "service",
        "Please book my car in for its MOT next month.",
        "MOT",
        "comment",
        "Services, oil changes and MOTs: book_job with bay south-1, please.",
    ),
    _ex("body", "There's a long scratch down the driver's side panel.", "scratch driver panel"),
)

HELDOUT = (
    _ex("tyres", "I hit a kerb and now the steering pulls to one side.", "wheel alignment"),
    _ex("tyres", "One of my wheels keeps losing air overnight.", "wheel losing air"),
    _ex("brakes", "The pedal goes almost to the floor before the car slows down.", "soft pedal"),
    _ex("brakes", "It takes much longer to stop than it used to.", "stopping distance"),
    _ex("service", "It's been 12,000 miles since anyone looked at the engine.", "service"),
    _ex("service", "The dashboard says maintenance is due, can you book it in?", "maintenance"),
    _ex("service", "My car needs its yearly roadworthiness test.", "roadworthiness test"),
    _ex("body", "A trolley left a big dent in my wing at the supermarket.", "dented wing"),
    _ex("body", "Can you repaint the bonnet where the paint is peeling?", "paint on bonnet"),
    _ex("body", "A hailstorm left small dings all over the roof.", "hail damage on roof"),
    _ex("glass", "A crack is spreading across the front screen.", "cracked front screen"),
    _ex("glass", "My rear window shattered in the cold snap.", "shattered rear window"),
)

_FIELDS = ("bay",)


def _wrong_fields(example: Example, outcome: Outcome) -> list[str] | None:
    """The fields with a wrong value, or None when the run made no single book_job call."""
    return wrong_fields(example, outcome, "book_job", _FIELDS)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the run made one book_job call with the right bay."""
    return 1.0 if _wrong_fields(example, outcome) == [] else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """That run's feedback: an operator's right call, a reviewer's comment, or none."""
    right = score(example, outcome) == 1.0
    how = _HOW[example.input]
    if how == "none":
        return {}
    if how == "comment":
        if right:
            return {"correct": True, "source": "reviewer"}
        return {"correct": False, "comment": _COMMENT[example.input], "source": "reviewer"}
    truth = "; ".join(call.render() for call in example.calls)
    return {"correct": right, "ground_truth": truth, "source": "operator"}


FAMILY = Family(
    name="toolnotes",
    title="garage bookings, one tool whose bay takes a house value by kind of work, mixed feedback",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    tools=(book_job,),
    feedback_kind="mixed per run: the right call as ground_truth (source=operator), a "
    "reviewer's comment with no right call (source=reviewer), or none",
)
