"""Family 22 (SEALED: not run during development): removal bookings, the tool's own errors.

A removals company's booking agent books every customer request with one call,
``book_job(service, crew, vehicle, notes)``. ``service`` is one of five words
the app's prompt explains; ``notes`` is free text; ``crew`` and ``vehicle``
take the company's house values for the service, which the model cannot
guess:

* ``home`` (a household move): crew ``crew-2``, vehicle ``luton``;
* ``piano`` (a piano or another single very heavy item): ``crew-4``, ``tail-lift``;
* ``office`` (a business relocation): ``crew-6``, ``rigid-18``;
* ``storage`` (belongings collected into the company's store): ``crew-2``, ``container``;
* ``packing`` (packing only, nothing moved): ``pack-team``, vehicle ``none``.

The feedback is what production gives a tool app. The booking system checks
the fleet: a call with an unknown service or the wrong vehicle for its service
is refused with the tool's own error text ("Fleet check failed: a 'piano' job
goes out with vehicle 'tail-lift', not 'van'."), raised as LangChain's
``ToolException``, so the run's trace holds it as a tool error (the model sees
it too and may call again). Crews are not checked by the tool. One run per
service gets an operator's ground truth, the right call written as Python as
the docs say tool-call ground truth is given (``correct=``,
``source="operator"``); the other runs get nothing sent (``feedback`` returns
``{}``): what they teach is in their trace, a tool error when the call broke
the fleet rule. Held-out: two or three requests per service in other words.
Scoring: exactly one ``book_job`` call (a refused call counts) with the right
service, crew and vehicle (case and spaces aside); ``notes`` is not scored.

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import ToolException

from benchmarks.blind._family import (
    Call,
    Example,
    Family,
    Outcome,
    written_calls,
    wrong_fields,
)

SYSTEM_PROMPT = (
    "You are the booking agent of Fairhaven Removals. Book every customer request as a job "
    "with one book_job call, then tell the customer in one sentence that it is booked.\n"
    "Services: home (moving a household), piano (a piano or another single very heavy item), "
    "office (moving a business), storage (collecting belongings into our store), packing "
    "(packing only, nothing moved)."
)

RULES = """book_job values by service:
- home: crew "crew-2", vehicle "luton"
- piano (also safes, pool tables and other single very heavy items): crew "crew-4",
  vehicle "tail-lift"
- office (shops, studios, any business premises): crew "crew-6", vehicle "rigid-18"
- storage: crew "crew-2", vehicle "container"
- packing (packing up or unpacking, nothing moved): crew "pack-team", vehicle "none"
- notes: a short summary of the request.
"""

HOUSE = {
    "home": ("crew-2", "luton"),
    "piano": ("crew-4", "tail-lift"),
    "office": ("crew-6", "rigid-18"),
    "storage": ("crew-2", "container"),
    "packing": ("pack-team", "none"),
}


def book_job(service: str, crew: str, vehicle: str, notes: str) -> str:
    """Book a removals job.

    Raises:
        ToolException: The booking system refused it (an unknown service, or a vehicle
            the fleet rules do not allow for the service).
    """
    key = service.strip().lower()
    if key not in HOUSE:
        raise ToolException(
            f"Unknown service {service!r}: use one of home, piano, office, storage, packing."
        )
    want = HOUSE[key][1]
    if vehicle.strip().lower() != want:
        raise ToolException(
            f"Fleet check failed: a {key!r} job goes out with vehicle {want!r}, not {vehicle!r}."
        )
    return f"Job booked: {key}, {crew}, {vehicle}. {notes}"


# How a run's feedback arrives: "label" an operator's right call, "none" nothing sent
# (the run's trace holds the tool's error when the call broke the fleet rule).
_HOWS = ("label", "none")
_HOW: dict[str, str] = {}


def _ex(kind: str, text: str, notes: str, how: str = "none") -> Example:
    if how not in _HOWS:
        raise ValueError(f"how={how!r} is not one of {_HOWS}")
    _HOW[text] = how
    crew, vehicle = HOUSE[kind]
    args = {"service": kind, "crew": crew, "vehicle": vehicle, "notes": notes}
    calls = (Call("book_job", args),)
    return Example(input=text, kind=kind, answer=written_calls(calls), calls=calls)


TRAIN = (
    _ex("piano", "We need our upright piano moved to the flat across town.", "upright piano"),
    _ex("home", "We're moving out of our two-bed flat on the 14th.", "two-bed flat", "label"),
    _ex("office", "Our accountancy firm is relocating to a new floor in May.", "firm relocation"),
    _ex("storage", "Can you collect ten boxes and a sofa and keep them for us?", "boxes, sofa"),
    _ex("packing", "Could someone pack up our kitchen before we move ourselves?", "pack kitchen"),
    _ex("piano", "Please move my grand piano down two floors.", "grand piano", "label"),
    _ex("home", "Our family of four is moving to a house in Leeds.", "house move to Leeds"),
    _ex("office", "Our dental surgery needs moving to the next street.", "dental surgery", "label"),
    _ex("storage", "We need our furniture stored for three months.", "furniture storage", "label"),
    _ex("packing", "I'd like help wrapping all my china and glassware.", "wrap china", "label"),
    _ex("home", "I'm moving from a studio flat into my partner's place.", "studio flat"),
    _ex("piano", "Can you shift a cast-iron safe from the basement?", "cast-iron safe"),
    _ex("office", "The shop is moving premises, 20 desks and the stock.", "shop, desks, stock"),
    _ex("storage", "Keep my bike and boxes somewhere while I'm abroad.", "bike and boxes"),
)

HELDOUT = (
    _ex("piano", "There's a full-size snooker table that has to go to my new address.", "snooker"),
    _ex("piano", "Our baby grand needs taking from the lounge to the church hall.", "baby grand"),
    _ex("home", "My three-bedroom semi is sold and we go on the 2nd of June.", "3-bed semi"),
    _ex("home", "Just me and a one-bed's worth of stuff heading to Bristol.", "one-bed"),
    _ex("home", "Our household is relocating from Hull to York next month.", "Hull to York"),
    _ex("office", "The practice and its twelve staff move to a new building.", "practice move"),
    _ex("office", "Our start-up's workspace is moving into a bigger unit.", "workspace move"),
    _ex("storage", "Our new home isn't ready yet, can you hold our things for six weeks?", "hold"),
    _ex("storage", "I need the contents of my late mother's flat kept somewhere safe.", "contents"),
    _ex("packing", "We're doing the move ourselves but want the wardrobes boxed up.", "box up"),
    _ex("packing", "Can your team unpack and set up the boxes at my new place?", "unpack"),
    _ex("office", "The restaurant's tables and kitchen kit need shifting across town.", "kit"),
)

_FIELDS = ("service", "crew", "vehicle")


def _wrong_fields(example: Example, outcome: Outcome) -> list[str] | None:
    """The fields with a wrong value, or None when the run made no single book_job call."""
    return wrong_fields(example, outcome, "book_job", _FIELDS)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the run made one book_job call with the right service, crew and vehicle."""
    return 1.0 if _wrong_fields(example, outcome) == [] else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """An operator's right call on that run, or nothing (the tool's errors are in the trace)."""
    if _HOW[example.input] == "none":
        return {}
    right = score(example, outcome) == 1.0
    return {"correct": right, "ground_truth": written_calls(example.calls), "source": "operator"}


FAMILY = Family(
    name="toolerrors",
    title="removal bookings, crew and vehicle take house values; the tool refuses a wrong vehicle",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    tools=(book_job,),
    feedback_kind="the tool's own error (a ToolException, in the trace) when the vehicle breaks "
    "the fleet rule; the right call as ground_truth (source=operator) on one run per service; "
    "nothing sent on the others",
)
