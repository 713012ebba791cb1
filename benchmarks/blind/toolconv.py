"""Family 16 (SEALED: not run during development): hotel guest requests, house tool arguments.

A hotel's guest-messaging agent files every guest request with one call,
``log_request(team, template, details)``. ``details`` is free text; ``team``
and ``template`` take house values the model cannot guess, by kind of request:
extra towels, toiletries or cleaning (``HK-02``, ``amenity-drop``), something
broken or not working in the room (``ENG-07``, ``fault-visit``), a late
check-out (``FD-01``, ``late-co-1400``), a wake-up call (``FD-01``,
``wakeup-call``) and an item left behind or lost (``SEC-04``,
``lost-found-log``). Feedback is a reviewer's alone: ``correct=True``, or
``correct=False`` with a comment stating the convention in words, with no right
call (no ``ground_truth``), sent with ``source="reviewer"``. Several reviewers
wrote the comments, so the wording differs from run to run: some name the kind
of request, some only the values. Scoring: exactly one ``log_request`` call with
the right team and template (case and spaces aside); ``details`` is not scored.

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
    "You are the guest-messaging agent of the Marlowe Harbour Hotel. Log every guest request "
    "with one log_request call, then tell the guest it is in hand in one sentence."
)

RULES = """log_request values by kind of request:
- Extra towels, pillows, toiletries or room cleaning: team HK-02, template amenity-drop.
- Something broken or not working in the room (heating, shower, TV, lights, safe): team ENG-07,
  template fault-visit.
- Late check-out: team FD-01, template late-co-1400.
- Wake-up call: team FD-01, template wakeup-call.
- An item left behind or lost: team SEC-04, template lost-found-log.
Put a short summary of the request in details.
"""

VALUES = {
    "amenity": ("HK-02", "amenity-drop"),
    "fault": ("ENG-07", "fault-visit"),
    "checkout": ("FD-01", "late-co-1400"),
    "wakeup": ("FD-01", "wakeup-call"),
    "lost": ("SEC-04", "lost-found-log"),
}

# A comment for a held-out input (never sent: the runner gives feedback on training runs only).
_DEFAULT_COMMENT = {
    "amenity": "Amenity requests are logged with team HK-02 and template amenity-drop.",
    "fault": "Faults in a room go to team ENG-07 with the fault-visit template.",
    "checkout": "Late check-out: team FD-01, template late-co-1400.",
    "wakeup": "Wake-up calls: team FD-01, template wakeup-call.",
    "lost": "Lost property goes to team SEC-04 with template lost-found-log.",
}

_COMMENT: dict[str, str] = {}


def log_request(team: str, template: str, details: str) -> str:
    """Log a guest request for a hotel team."""
    return f"Request logged for {team} ({template}): {details}"


def _ex(kind: str, text: str, comment: str = "") -> Example:
    team, template = VALUES[kind]
    _COMMENT[text] = comment or _DEFAULT_COMMENT[kind]
    calls = (
        Call("log_request", {"team": team, "template": template, "details": text.rstrip(".")}),
    )
    return Example(input=text, kind=kind, answer=written_calls(calls), calls=calls)


TRAIN = (
    _ex(
        "amenity",
        "Could we get two more bath towels sent up to room 412?",
        "Towel and toiletry requests are housekeeping's: log them with team HK-02 and the "
        "amenity-drop template.",
    ),
    _ex(
        "fault",
        "The air conditioning in 208 isn't working, it's boiling in here.",
        "wrong team and template, should be ENG-07 / fault-visit",
    ),
    _ex(
        "checkout",
        "Is a late check-out possible tomorrow? Room 515.",
        "Late check-outs are logged for the front desk, team FD-01, using template late-co-1400.",
    ),
    _ex(
        "wakeup",
        "Please give me a wake-up call at 6:30 tomorrow, room 301.",
        "Use team FD-01 and template wakeup-call for these.",
    ),
    _ex(
        "lost",
        "I think I left my phone charger in room 117 when I checked out yesterday.",
        "Anything a guest has lost or left behind is logged for security (SEC-04) with the "
        "lost-found-log template, so it can be traced.",
    ),
    _ex(
        "amenity",
        "Room 620 hasn't been cleaned today, can someone come by?",
        "team must be HK-02, template amenity-drop",
    ),
    _ex(
        "fault",
        "The shower in room 233 only runs cold.",
        "When something in the room is broken the request goes to engineering: team ENG-07, "
        "template fault-visit.",
    ),
    _ex(
        "checkout",
        "We'd like to keep the room until 2pm on Sunday if we can, 402.",
        "Template is late-co-1400 and the team FD-01.",
    ),
    _ex(
        "amenity",
        "Can I have an extra pillow and some shampoo in 118?",
        "Not the right values: HK-02 and amenity-drop.",
    ),
    _ex(
        "fault",
        "TV remote in 509 doesn't do anything, even with new batteries.",
        "Broken equipment in a room: ENG-07 with fault-visit, always.",
    ),
    _ex(
        "lost",
        "My daughter lost her teddy bear somewhere in the restaurant last night.",
        "Lost items: team SEC-04, template lost-found-log.",
    ),
    _ex(
        "wakeup",
        "Ring my room at 5am please, I have an early flight. 714.",
        "An early call request is a wake-up call: log it with FD-01 and the wakeup-call template.",
    ),
)

HELDOUT = (
    _ex("amenity", "We've run out of toilet paper and soap in room 305."),
    _ex("amenity", "Could housekeeping bring a spare blanket to 221?"),
    _ex("amenity", "The bin in our room is full and the bed wasn't made, room 610."),
    _ex("fault", "The heater in 140 makes a loud banging noise and gives no warmth."),
    _ex("fault", "None of the lamps in room 322 switch on."),
    _ex("fault", "The safe in 417 won't open with my code."),
    _ex("checkout", "Our train is in the evening, may we stay in the room past noon? 206."),
    _ex("checkout", "Can I leave the room a few hours after the usual time on Friday? 531."),
    _ex("wakeup", "I need someone to phone me at 7 tomorrow morning so I don't oversleep, 118."),
    _ex("wakeup", "Set an alarm call for quarter to six for room 402, please."),
    _ex("lost", "My wife forgot her reading glasses by the pool this afternoon."),
    _ex("lost", "I checked out this morning and my laptop bag isn't in the car."),
)

_FIELDS = ("team", "template")


def _wrong_fields(example: Example, outcome: Outcome) -> list[str] | None:
    """The fields with a wrong value, or None when the run made no single log_request call."""
    return wrong_fields(example, outcome, "log_request", _FIELDS)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the run made one log_request call with the right team and template."""
    return 1.0 if _wrong_fields(example, outcome) == [] else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """A reviewer's verdict: right, or wrong with that run's comment (no right call)."""
    if score(example, outcome) == 1.0:
        return {"correct": True, "source": "reviewer"}
    return {"correct": False, "comment": _COMMENT[example.input], "source": "reviewer"}


FAMILY = Family(
    name="toolconv",
    title="hotel guest requests, one tool whose team and template take house values",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    tools=(log_request,),
    feedback_kind="correct=True, or correct=False with a varied reviewer comment stating the "
    "convention (source=reviewer)",
)
