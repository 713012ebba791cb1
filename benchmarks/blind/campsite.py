"""Family 27 (SEALED: not run during development): holiday-park replies, reviewers' notes.

A holiday park's (touring pitches, tents, lodges) guest assistant (no tools)
answers guests' messages. Five kinds of message each have a house convention a
deterministic check scores:

* changing or cancelling a booking: the booking reference in the message
  quoted back (``PW-31874``);
* something urgent on the park after the office has closed (someone hurt,
  flooding, a fire, a gas smell): the night warden's number,
  ``01768 775 019``, given;
* bringing a dog or another pet: the pets page, ``pinewoodpark.co.uk/pets``,
  given;
* a group or club booking several pitches (a rally, a wedding party, a
  school camp): the reply ends with the closing line
  ``Our rallies team will confirm your pitches within two working days.``,
  kept for that kind alone;
* arrival and departure times: every time written in the 24-hour clock
  (``14:00``), never ``2pm``.

Feedback is what production gives a review tool, with no labels: on a wrong
run a reviewer's comment stating the convention in that reviewer's own words
(``correct=False``, ``source="reviewer"``, no ``ground_truth``); on a right run
a reviewer's bare ``correct=True`` (``source="reviewer"``); three runs get
nothing at all (``feedback`` returns ``{}``). Every kind has two commented
runs. Held-out: the same kinds in other words. Scoring checks the kind's
convention (the reference, number or page present and the closing line at the
end, case and spaces aside; a time written ``HH:MM`` and none with am or pm).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

import re
from typing import Any

from benchmarks.blind._family import Example, Family, Outcome, keeps_convention

SYSTEM_PROMPT = (
    "You are the guest assistant of Pinewood Holiday Park, a park with touring pitches, tent "
    "fields and lodges in the Lake District. Reply to the guest's message in a friendly "
    "paragraph."
)

RULES = """House conventions for replies to guests:
- Changing or cancelling a booking: quote the guest's booking reference back,
  e.g. "Booking PW-31874 now runs from 12 to 15 August."
- Something urgent on the park after the office has closed (someone hurt, flooding, a fire,
  a gas smell): give the night warden's number, 01768 775 019.
- Bringing a dog or another pet: give the pets page, pinewoodpark.co.uk/pets.
- A group or club booking several pitches (a rally, a wedding party, a school camp): end the
  reply with "Our rallies team will confirm your pitches within two working days."
  Do not use that line for anything else.
- Arrival and departure times: write every time in the 24-hour clock (14:00, 11:00),
  never 2pm or 11am.
"""

WARDEN = "01768 775 019"
PETS_PAGE = "pinewoodpark.co.uk/pets"
CLOSING = "our rallies team will confirm your pitches within two working days"
_CLOCK = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):[0-5]\d(?![\d:])")
# "2pm", "11 am", "2.30 p.m.": a twelve-hour time, which the convention rules out.
_TWELVE = re.compile(r"\d\s*(?:[ap]\.?m\b\.?)", re.I)

_GOLD = {
    "booking": "No problem: booking {ref} is cancelled and the refund goes back to your card "
    "within five days.",
    "night": f"Please ring the night warden straight away on {WARDEN}; they are on the park "
    "all night and will come to you.",
    "pets": f"Dogs are welcome on most pitches; everything you need to know is on {PETS_PAGE}.",
    "group": "How lovely to have your group with us. Send us the number of units and your dates "
    "and we'll set aside a field.\nOur rallies team will confirm your pitches within two "
    "working days.",
    "times": "You can arrive from 14:00 until 20:00, and pitches need to be free by 11:00 on "
    "your last morning.",
}

_REF: dict[str, str] = {}
_HOW: dict[str, str] = {}
_COMMENT: dict[str, str] = {}

# How a run's feedback arrives: "review" a reviewer's verdict with a comment when wrong,
# "none" nothing.
_HOWS = ("review", "none")


def _ex(kind: str, text: str, comment: str = "", *, ref: str = "", how: str = "review") -> Example:
    if how not in _HOWS:
        raise ValueError(f"how={how!r} is not one of {_HOWS}")
    _REF[text] = ref
    _HOW[text] = how
    _COMMENT[text] = comment.format(ref=ref)
    return Example(input=text, kind=kind, answer=_GOLD[kind].format(ref=ref))


TRAIN = (
    _ex(
        "booking",
        "We need to cancel our pitch for next weekend, booking PW-31874.",
        "Always repeat the booking reference ({ref}) when a booking changes, so the guest "
        "knows which one we mean.",
        ref="PW-31874",
    ),
    _ex(
        "night",
        "It's 11pm and the river has come up into the tent field, our awning is under water!",
        f"After hours the guest needs the night warden: {WARDEN}.",
    ),
    _ex("pets", "Can we bring our two spaniels to the lodge?", how="none"),
    _ex(
        "times",
        "What time can we arrive on Saturday, and when do we have to leave?",
        "We write times as 14:00, 20:00, 11:00 - 24-hour clock, no 'pm'.",
    ),
    _ex(
        "group",
        "Our caravan club would like 12 pitches together for a rally in May.",
        "group booking, so finish with: Our rallies team will confirm your pitches within two "
        "working days.",
    ),
    _ex(
        "pets",
        "Are dogs allowed on the tent field, and is there somewhere to walk them?",
        f"Pets question - send them to {PETS_PAGE}, it has the rules and the dog walk map.",
    ),
    _ex(
        "booking",
        "Could we move booking PW-29506 to the week after? Same lodge if possible.",
        "missing the booking ref ({ref})",
        ref="PW-29506",
    ),
    _ex(
        "night",
        "My husband has fallen over on the path by the shower block and can't stand up, the "
        "office is shut.",
        f"no warden number! Anything urgent at night: {WARDEN}, every time.",
    ),
    _ex(
        "times",
        "Is there a latest time we can check in? We're driving up after work.",
        "Arrival times in the 24-hour format please (20:00, not 8pm).",
    ),
    _ex(
        "group",
        "We're planning a wedding and want the whole top field for 30 tents.",
        "For parties and rallies the reply closes with the line about the rallies team "
        "confirming the pitches within two working days, and only those replies.",
    ),
    _ex(
        "pets",
        "Is there an extra charge for a cat in a static caravan?",
        f"Any animal question: give the pets page ({PETS_PAGE}).",
    ),
    _ex(
        "booking",
        "Please shorten PW-40127 by one night, we'll leave on Sunday instead.",
        "Quote their reference back: {ref}.",
        ref="PW-40127",
    ),
    _ex(
        "night", "There's a strong smell of gas near pitch 14 and nobody is answering.", how="none"
    ),
    _ex(
        "group",
        "Can our scout troop book six pitches next to each other for a long weekend?",
        how="none",
    ),
    _ex(
        "times",
        "How early on the last day do we need to be off the pitch?",
        "Use the 24-hour clock for times (11:00).",
    ),
)

HELDOUT = (
    _ex(
        "booking",
        "Something's come up - is it possible to drop PW-52290 altogether and get our deposit "
        "back?",
        ref="PW-52290",
    ),
    _ex("booking", "Can reservation PW-17763 be swapped to a hardstanding pitch?", ref="PW-17763"),
    _ex("booking", "We'd like to add two nights to the end of PW-60418.", ref="PW-60418"),
    _ex("night", "Smoke is coming out of the lodge next door and the reception is closed."),
    _ex("night", "My little girl has cut her foot badly on a rock by the lake, it's past 10."),
    _ex("pets", "Would our Labrador puppy be welcome, and can he stay in the tent with us?"),
    _ex("pets", "We travel with a rabbit in a hutch; is that OK on a touring pitch?"),
    _ex("group", "Twenty families from our church want to camp together in August."),
    _ex(
        "group",
        "Our motorhome owners' association is looking for a venue for 15 vans over a bank holiday.",
    ),
    _ex("times", "When does the barrier open for people getting in on Friday evening?"),
    _ex("times", "Our ferry leaves at lunchtime; how late can we stay on departure day?"),
    _ex("times", "What are the hours for turning up at the lodges?"),
)


def keeps_24h_clock(reply: str) -> float:
    """1 when the reply gives a time as ``HH:MM`` and none with am or pm, else 0."""
    return 1.0 if _CLOCK.search(reply) and not _TWELVE.search(reply) else 0.0


def score(example: Example, outcome: Outcome) -> float:
    """1 when the reply keeps its kind's convention."""
    text = outcome.text
    if example.kind == "booking":
        return keeps_convention("value", "", text, _REF[example.input])
    if example.kind == "night":
        return keeps_convention("contains", WARDEN, text)
    if example.kind == "pets":
        return keeps_convention("contains", PETS_PAGE, text)
    if example.kind == "group":
        return keeps_convention("ends", CLOSING, text)
    return keeps_24h_clock(text)


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """A reviewer's verdict (a comment in their own words when wrong), or nothing."""
    if _HOW[example.input] == "none":
        return {}
    if score(example, outcome) == 1.0:
        return {"correct": True, "source": "reviewer"}
    return {"correct": False, "comment": _COMMENT[example.input], "source": "reviewer"}


FAMILY = Family(
    name="campsite",
    title="holiday-park replies, five house conventions, reviewers' notes and no labels",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    feedback_kind="a reviewer's correct=True, or correct=False with a comment in their own "
    "words (source=reviewer); nothing on three runs; no labels",
)
