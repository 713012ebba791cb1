"""Family 10 (SEALED: not run during development): residents' reports to council request codes.

A town council's intake assistant files each report a resident sends with one of
seven service request codes. The codes are the council's own numbering
(``SR-214`` for the road surface, ``SR-219`` for pavements, ...), so the words
of a report cannot give them away, and two pairs of neighbouring topics go to
different codes (roads and pavements; fly-tipping and a missed bin collection).
Two labelled runs per code are given for training. Feedback is an operator's
correction, sent as the docs say an operator's labels are: right or wrong with
the right code as ``ground_truth`` and ``source="operator"``. Scoring: the reply
must be the code alone (case, spaces, quotes and a final full stop aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from benchmarks.blind._family import Example, Family, label_feedback, label_score

SYSTEM_PROMPT = (
    "You are the intake assistant of Elmbridge Vale Council. File each resident's report "
    "under its service request code. Reply with the code only."
)

CODES = {
    "road": "SR-214",
    "pavement": "SR-219",
    "lighting": "SR-305",
    "bins": "SR-117",
    "flytip": "SR-442",
    "vehicle": "SR-508",
    "noise": "SR-630",
}

RULES = """Service request codes (reply with the code only):
- SR-214: the road surface: potholes, sunken or broken carriageway, worn road markings.
- SR-219: pavements, footpaths and kerbs: cracked or loose paving, trip hazards on a path.
- SR-305: street lights: out, flickering, on in the daytime, a damaged lamp post.
- SR-117: household bin collections: a missed collection, a lost or broken wheelie bin.
- SR-442: fly-tipping: rubbish, furniture or waste dumped in a public place.
- SR-508: abandoned or untaxed vehicles left on the street.
- SR-630: noise from neighbours, parties, alarms or dogs.
"""


def _ex(kind: str, text: str) -> Example:
    return Example(input=text, kind=kind, answer=CODES[kind])


TRAIN = (
    _ex("road", "There's a huge pothole outside 14 Station Road, my tyre burst on it."),
    _ex("pavement", "The paving slabs on the footpath by the library are loose and rocking."),
    _ex("lighting", "The street light on Cedar Close has been out for a week."),
    _ex("bins", "Our bins on Mill Street weren't emptied on Tuesday."),
    _ex("flytip", "Someone dumped a mattress and bin bags in the lay-by on Hollow Lane."),
    _ex("vehicle", "A car with flat tyres has been parked on Birch Avenue for two months."),
    _ex("noise", "My neighbour's house alarm has been going off all night."),
    _ex("road", "The road surface on the High Street is breaking up near the junction."),
    _ex("pavement", "A kerb stone on Queens Walk is broken and sticking out, I tripped on it."),
    _ex("lighting", "The lamp post at the end of my road flickers on and off all night."),
    _ex("bins", "The collection crew skipped our recycling again this week."),
    _ex("flytip", "Old tyres and a fridge have been left in the field by the canal path."),
    _ex("vehicle", "There's a van with no plates abandoned in the car park on Elm Row."),
    _ex("noise", "The flat next door has loud parties every weekend until 4am."),
)

HELDOUT = (
    _ex("road", "Deep hole in the middle of Park Lane, cars are swerving around it."),
    _ex("road", "The white lines at the Kings Road crossing have worn away completely."),
    _ex("pavement", "The footway on Orchard Street is cracked and uneven, dangerous for prams."),
    _ex("pavement", "Tree roots have lifted the paving outside number 3 Willow Way."),
    _ex("lighting", "Lamp on Fern Drive stays lit all day and goes dark at night."),
    _ex("lighting", "The lamppost near the school gates was knocked over by a lorry."),
    _ex("bins", "Nobody came to empty the green bin at 22 Ash Grove on collection day."),
    _ex("bins", "My wheelie bin went missing after the last pickup."),
    _ex("flytip", "A pile of builders' rubble has appeared on the verge of Mill Lane."),
    _ex("flytip", "Somebody left a sofa and boxes of junk behind the community hall."),
    _ex("vehicle", "A burnt-out motorbike has sat on Rowan Crescent for weeks."),
    _ex("vehicle", "An untaxed hatchback hasn't moved from outside my house since March."),
    _ex("noise", "A dog two doors down barks non-stop from morning till evening."),
    _ex("noise", "Music blasting from the house opposite every night, can't sleep."),
)


FAMILY = Family(
    name="labels",
    title="residents' reports to seven council request codes, two labelled runs per code",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=label_feedback,
    feedback_kind="correct=bool with the right code as ground_truth (source=operator)",
)
