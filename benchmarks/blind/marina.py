"""Family 34 (SEALED: not run during development): marina requests, the boat's name and a yard.

A marina's berth-holder agent books every request with one call,
``book_job(vessel, yard, note)``. ``note`` is free text; ``vessel`` is the name
of the owner's boat as they wrote it (``Sea Sprite``), never the owner's own
name or another boat the message names (a neighbour on the pontoon); ``yard``
takes the marina's own value for the kind of request, which the model cannot
guess:

* lifting a boat out of the water or back in, or storage ashore: ``crane-2``;
* the engine (won't start, overheating, a service, the outboard): ``eng-5``;
* the mast, sails or rigging (a halyard, the furler, the shrouds): ``rig-7``;
* electrics and electronics (batteries, shore power, the VHF, instruments):
  ``elec-3``;
* a berth: moving to another one, a longer one, a visitor's berth: ``pont-4``.

Feedback is an operator's on most training runs, as the docs say tool-call
ground truth is given: right or wrong with the right call written as Python
(``book_job(vessel='Sea Sprite', yard='eng-5', note='...')``,
``source="operator"``); three runs get nothing (``feedback`` returns ``{}``).
Held-out: two or three requests per kind in other words, about other boats than
the training ones; three of them name another boat or another person beside the owner's.
Scoring: exactly one ``book_job`` call with the right vessel and the right yard
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
    "You are the berth-holder agent of Saltmarsh Quay Marina. Book every berth-holder's "
    "request as a job with one book_job call, then tell them in one sentence that it is booked."
)

RULES = """book_job values:
- vessel: the name of the berth-holder's own boat as they wrote it (e.g. "Sea Sprite"),
  never the owner's name or another boat the message mentions (a neighbour's boat).
- yard by kind of request:
  - lifting the boat out or back into the water, or storing it ashore: crane-2
  - the engine or outboard (won't start, overheating, servicing): eng-5
  - the mast, sails or rigging (halyards, furler, shrouds, boom): rig-7
  - electrics and electronics (batteries, shore power, VHF radio, instruments): elec-3
  - a berth (moving to another or a longer one, a visitor's berth): pont-4
- note: a short summary of the request.
Make exactly one call.
"""

YARDS = {
    "crane": "crane-2",
    "engine": "eng-5",
    "rigging": "rig-7",
    "electrics": "elec-3",
    "berth": "pont-4",
}

_HOW: dict[str, str] = {}


def book_job(vessel: str, yard: str, note: str) -> str:
    """Book a job on a berth-holder's boat with one of the marina's yards."""
    return f"Job for {vessel} booked with {yard}: {note}"


def _ex(kind: str, text: str, vessel: str, note: str, *, label: bool = True) -> Example:
    if vessel.lower() not in text.lower():
        raise ValueError(f"vessel={vessel!r} is not in the message {text!r}")
    _HOW[text] = "label" if label else "none"
    calls = (Call("book_job", {"vessel": vessel, "yard": YARDS[kind], "note": note}),)
    return Example(input=text, kind=kind, answer=written_calls(calls), calls=calls)


TRAIN = (
    _ex(
        "engine",
        "The diesel on Sea Sprite won't turn over this morning; can someone look at it?",
        "Sea Sprite",
        "diesel won't start",
    ),
    _ex(
        "crane",
        "Please can Kittiwake come out of the water at the end of October for the winter?",
        "Kittiwake",
        "lift out end of October, winter ashore",
        label=False,
    ),
    _ex(
        "rigging",
        "A halyard has jumped the sheave at the top of Morning Tide's mast.",
        "Morning Tide",
        "halyard off the masthead sheave",
    ),
    _ex(
        "electrics",
        "Curlew's batteries are flat every weekend even with the shore power on.",
        "Curlew",
        "batteries flat on shore power",
    ),
    _ex(
        "berth",
        "I've bought a bigger boat, Wild Thyme, 11 metres; can she have a longer berth than my "
        "old one?",
        "Wild Thyme",
        "longer berth for 11 m boat",
    ),
    _ex(
        "engine",
        "The outboard on Puffin keeps overheating after ten minutes.",
        "Puffin",
        "outboard overheating",
    ),
    _ex(
        "crane",
        "Jenny Wren has been ashore all winter; we'd like her craned back in on 2 April.",
        "Jenny Wren",
        "relaunch 2 April",
    ),
    _ex(
        "rigging",
        "The furler on Blue Moon is jammed and the genoa won't roll away.",
        "Blue Moon",
        "furler jammed",
        label=False,
    ),
    _ex(
        "electrics",
        "The VHF on Seraphina stopped transmitting; the other boats can't hear us.",
        "Seraphina",
        "VHF not transmitting",
    ),
    _ex(
        "berth",
        "Could Lady Grace move to C pontoon? Our neighbour's boat Osprey keeps bumping her.",
        "Lady Grace",
        "move to C pontoon",
    ),
    _ex(
        "engine",
        "Tern is due her annual engine service before the season starts.",
        "Tern",
        "annual engine service",
    ),
    _ex(
        "rigging",
        "One of the shrouds on Mistral looks frayed near the deck; I'd like it checked.",
        "Mistral",
        "frayed shroud",
    ),
    _ex(
        "electrics",
        "The depth sounder and the log on Halcyon both went blank yesterday.",
        "Halcyon",
        "instruments blank",
        label=False,
    ),
    _ex(
        "berth",
        "Merlin needs a berth on the outside pontoon while her usual one is dredged next month.",
        "Merlin",
        "temporary berth while hers is dredged",
    ),
)

HELDOUT = (
    _ex(
        "crane",
        "We're selling Gannet and the surveyor needs to see her hull out of the water next "
        "Tuesday.",
        "Gannet",
        "lift for a survey next Tuesday",
    ),
    _ex(
        "crane",
        "Please put Dawn Treader back afloat once her new antifouling is dry.",
        "Dawn Treader",
        "relaunch after antifouling",
    ),
    _ex(
        "engine",
        "There's black smoke from Spindrift's exhaust and she's losing revs.",
        "Spindrift",
        "black smoke, losing revs",
    ),
    _ex(
        "engine",
        "The little Yamaha on Cormorant's tender has stopped starting on the first pull.",
        "Cormorant",
        "tender outboard hard to start",
    ),
    _ex(
        "engine",
        "Water is dripping from the raw-water pump on Firecrest, next to Albatross on D pontoon.",
        "Firecrest",
        "raw-water pump leaking",
    ),
    _ex(
        "rigging",
        "The mainsail on Moonraker has a tear along the leech and a batten has gone.",
        "Moonraker",
        "torn mainsail, lost batten",
    ),
    _ex(
        "rigging",
        "Before we cross to France, could the standing rig on Avocet be inspected?",
        "Avocet",
        "rig inspection before Channel crossing",
    ),
    _ex(
        "electrics",
        "The chartplotter on Silver Dart won't switch on and a fuse keeps blowing.",
        "Silver Dart",
        "chartplotter dead, fuse blowing",
    ),
    _ex(
        "electrics",
        "Since Tuesday the bilge pump on Whimbrel only runs when I jiggle the wiring.",
        "Whimbrel",
        "bilge pump wiring fault",
    ),
    _ex(
        "berth",
        "Kestrel has outgrown her finger; is there a bigger space nearer the fuel dock?",
        "Kestrel",
        "bigger berth near the fuel dock",
    ),
    _ex(
        "berth",
        "We'd like Redwing to go on the hammerhead instead of between Petrel and Sandpiper.",
        "Redwing",
        "move to the hammerhead",
    ),
    _ex(
        "crane",
        "My brother-in-law Colin will sail Marigold round from Falmouth in May; can she go "
        "straight onto the hard for the summer?",
        "Marigold",
        "lift out onto the hard for the summer",
    ),
)

_FIELDS = ("vessel", "yard")


def _wrong_fields(example: Example, outcome: Outcome) -> list[str] | None:
    """The fields with a wrong value, or None when the run made no single book_job call."""
    return wrong_fields(example, outcome, "book_job", _FIELDS)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the run made one book_job call with the right vessel and yard."""
    return 1.0 if _wrong_fields(example, outcome) == [] else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """An operator's right call, or nothing on the runs nobody labelled."""
    if _HOW[example.input] == "none":
        return {}
    right = score(example, outcome) == 1.0
    return {"correct": right, "ground_truth": example.answer, "source": "operator"}


FAMILY = Family(
    name="marina",
    title="marina requests, one tool whose vessel is the boat's name the owner typed and whose "
    "yard is a house value by kind",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    tools=(book_job,),
    feedback_kind="correct=bool with the right call as ground_truth (source=operator) on 11 "
    "runs; nothing on 3",
)
