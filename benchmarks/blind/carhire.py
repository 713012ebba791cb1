"""Family 28 (SEALED: not run during development): car-hire requests, the user's city and a desk.

A car-hire company's customer agent files every request with one call,
``open_request(city, desk, summary)``. ``summary`` is free text; ``city`` is
the branch's city the customer names in their message, written as they wrote
it (``Bristol``); ``desk`` takes the company's own value for the kind of
request, which the model cannot guess:

* a new rental (a car wanted for some dates): ``res-1``;
* keeping a car longer than booked: ``res-4``;
* a breakdown, a flat battery or a warning light on the road: ``rsa-9``;
* damage to the car or an accident: ``clm-2``;
* something left behind in a returned car: ``lp-7``.

Feedback is an operator's on most training runs, as the docs say tool-call
ground truth is given: right or wrong with the right call written as Python
(``open_request(city='Bristol', desk='res-4', summary='...')``,
``source="operator"``); three runs get nothing (``feedback`` returns ``{}``).
Held-out: two or three requests per kind in other words, naming other cities than the
training ones. Scoring: exactly one ``open_request`` call with the right city
and the right desk (case and spaces aside); ``summary`` is not scored.

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
    "You are the customer agent of Roadstar Car Hire, which has branches in cities across the "
    "UK and Ireland. File every customer request with one open_request call, then tell the "
    "customer in one sentence that it is filed."
)

RULES = """open_request values:
- city: the city of the branch the customer names in their message, as they wrote it
  (e.g. "Bristol"), never a city from these instructions.
- desk by kind of request:
  - a new rental (a car wanted for some dates): res-1
  - keeping a car longer than booked (an extension): res-4
  - a breakdown on the road (won't start, flat battery, warning light, flat tyre): rsa-9
  - damage to the car or an accident (a scrape, a dent, a collision): clm-2
  - something left behind in a returned car: lp-7
- summary: a short summary of the request.
Make exactly one call.
"""

DESKS = {
    "rental": "res-1",
    "extend": "res-4",
    "breakdown": "rsa-9",
    "damage": "clm-2",
    "left": "lp-7",
}

_HOW: dict[str, str] = {}


def open_request(city: str, desk: str, summary: str) -> str:
    """Open a customer request at a branch's desk."""
    return f"Request opened at the {city} branch ({desk}): {summary}"


def _ex(kind: str, text: str, city: str, summary: str, *, label: bool = True) -> Example:
    if city.lower() not in text.lower():
        raise ValueError(f"city={city!r} is not in the message {text!r}")
    _HOW[text] = "label" if label else "none"
    calls = (Call("open_request", {"city": city, "desk": DESKS[kind], "summary": summary}),)
    return Example(input=text, kind=kind, answer=written_calls(calls), calls=calls)


TRAIN = (
    _ex(
        "rental",
        "I'd like to hire a small car from your Bristol branch from 3 to 7 June.",
        "Bristol",
        "small car 3-7 June",
    ),
    _ex(
        "extend",
        "Can I keep the car I picked up in Glasgow for two more days?",
        "Glasgow",
        "two more days",
    ),
    _ex(
        "breakdown",
        "The car I hired in Cardiff won't start, I'm stuck at a service station.",
        "Cardiff",
        "won't start",
        label=False,
    ),
    _ex(
        "damage",
        "I scraped the side of the hire car on a gate post; I got it in Norwich.",
        "Norwich",
        "scrape on side",
    ),
    _ex(
        "left",
        "I returned my car at the Leeds branch yesterday and left my sunglasses in it.",
        "Leeds",
        "sunglasses left in car",
    ),
    _ex(
        "rental",
        "Do you have a seven-seater available in Belfast for the bank holiday weekend?",
        "Belfast",
        "seven-seater bank holiday",
    ),
    _ex(
        "extend",
        "Our holiday's been extended, can we have the Exeter car until Sunday instead of Thursday?",
        "Exeter",
        "extend to Sunday",
    ),
    _ex(
        "breakdown",
        "A red warning light came on in the car from your Inverness office and it's lost power.",
        "Inverness",
        "warning light, lost power",
    ),
    _ex(
        "damage",
        "Someone reversed into my rental in a car park. The car's from Southampton.",
        "Southampton",
        "hit in car park",
    ),
    _ex(
        "left",
        "My son's tablet is still in the back seat of the car we dropped off in Cork.",
        "Cork",
        "tablet on back seat",
        label=False,
    ),
    _ex(
        "rental",
        "I need an automatic from Manchester airport next Friday for a week.",
        "Manchester",
        "automatic for a week",
    ),
    _ex(
        "breakdown",
        "The battery's completely flat on the car I collected in York this morning.",
        "York",
        "flat battery",
    ),
    _ex(
        "damage",
        "A stone cracked the bonnet paint and there's a dent; I hired it in Oxford.",
        "Oxford",
        "dent on bonnet",
        label=False,
    ),
    _ex(
        "extend",
        "Please add another week to my booking, I'm collecting from Dundee and staying longer.",
        "Dundee",
        "one more week",
    ),
)

HELDOUT = (
    _ex(
        "rental",
        "Is there an estate car I could take from Nottingham over Easter?",
        "Nottingham",
        "estate car Easter",
    ),
    _ex(
        "rental",
        "Looking for wheels for four days when I land in Galway on the 12th.",
        "Galway",
        "four days from the 12th",
    ),
    _ex(
        "rental",
        "We want a people carrier from Edinburgh for a family wedding on 18 July.",
        "Edinburgh",
        "people carrier 18 July",
    ),
    _ex(
        "extend",
        "Work has kept me here; I'll bring the Plymouth car back on Wednesday, not today.",
        "Plymouth",
        "return Wednesday",
    ),
    _ex(
        "extend",
        "Could my Aberdeen rental run to the end of the month?",
        "Aberdeen",
        "to end of month",
    ),
    _ex(
        "breakdown",
        "The engine cut out on the motorway in the car I got from Swansea and won't restart.",
        "Swansea",
        "engine cut out",
    ),
    _ex(
        "breakdown",
        "Steam is pouring from under the bonnet of my Limerick hire car.",
        "Limerick",
        "overheating",
    ),
    _ex(
        "breakdown",
        "One of the tyres on the car I collected in Kilkenny went down on a country lane.",
        "Kilkenny",
        "flat tyre",
    ),
    _ex(
        "damage",
        "I clipped a bollard and cracked the rear light; the car came from Brighton.",
        "Brighton",
        "cracked rear light",
    ),
    _ex(
        "damage",
        "We had a small collision at a roundabout in the car from Sheffield; nobody is hurt.",
        "Sheffield",
        "collision at roundabout",
    ),
    _ex(
        "left",
        "My passport might still be in the glovebox of the car I handed back in Derby.",
        "Derby",
        "passport in glovebox",
    ),
    _ex(
        "left",
        "I think my child's teddy bear got forgotten in the boot when we returned the car in "
        "Stirling.",
        "Stirling",
        "teddy bear in boot",
    ),
)

_FIELDS = ("city", "desk")


def _wrong_fields(example: Example, outcome: Outcome) -> list[str] | None:
    """The fields with a wrong value, or None when the run made no single open_request call."""
    return wrong_fields(example, outcome, "open_request", _FIELDS)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the run made one open_request call with the right city and desk."""
    return 1.0 if _wrong_fields(example, outcome) == [] else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """An operator's right call, or nothing on the runs nobody labelled."""
    if _HOW[example.input] == "none":
        return {}
    right = score(example, outcome) == 1.0
    return {"correct": right, "ground_truth": example.answer, "source": "operator"}


FAMILY = Family(
    name="carhire",
    title="car-hire requests, one tool whose city is the user's word and whose desk is a house "
    "value by kind",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    tools=(open_request,),
    feedback_kind="correct=bool with the right call as ground_truth (source=operator) on 11 "
    "runs; nothing on 3",
)
