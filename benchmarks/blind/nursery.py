"""Family 30 (SEALED: not run during development): nursery messages, the child's name and a board.

A day nursery's parent-messaging agent posts every parent's message to the
staff with one call, ``post_note(child, board, note)``. ``note`` is free text;
``child`` is the child's first name as the parent wrote it (``Maisie``), never
the name of the parent or of another adult the message names (a grandparent or
neighbour collecting); ``board`` takes the nursery's own value for the kind of
message, which the model cannot guess:

* the child will be absent (ill, on holiday, at an appointment): ``reg-2``;
* someone other than the usual adult is collecting the child: ``door-6``;
* medicine, an allergy or another health matter: ``med-3``;
* clothing or a belonging lost or missing: ``kit-8``;
* extra sessions, or changing or swapping the child's days: ``ses-1``.

Feedback is an operator's on most training runs, as the docs say tool-call
ground truth is given: right or wrong with the right call written as Python
(``post_note(child='Maisie', board='reg-2', note='...')``,
``source="operator"``); three runs get nothing (``feedback`` returns ``{}``).
Held-out: two or three messages per kind in other words, about other children
than the training ones; three of them name an adult beside the child. Scoring:
exactly one ``post_note`` call with the right child and the right board (case
and spaces aside); ``note`` is not scored.

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
    "You are the parent-messaging agent of Little Wrens Day Nursery. Post every message a "
    "parent sends to the nursery staff with one post_note call, then tell the parent in one "
    "sentence that the staff have it."
)

RULES = """post_note values:
- child: the child's first name as the parent wrote it (e.g. "Maisie"), never the name of
  the parent or of another adult in the message (a grandparent or friend collecting).
- board by kind of message:
  - the child will be absent (ill, on holiday, at an appointment): reg-2
  - someone other than the usual adult is collecting the child: door-6
  - medicine, an allergy or another health matter: med-3
  - clothing or a belonging lost or missing: kit-8
  - extra sessions, or changing or swapping the child's days: ses-1
- note: a short summary of the message.
Make exactly one call.
"""

BOARDS = {
    "absence": "reg-2",
    "collect": "door-6",
    "health": "med-3",
    "lost": "kit-8",
    "sessions": "ses-1",
}

_HOW: dict[str, str] = {}


def post_note(child: str, board: str, note: str) -> str:
    """Post a parent's message about a child to a nursery staff board."""
    return f"Note about {child} posted to {board}: {note}"


def _ex(kind: str, text: str, child: str, note: str, *, label: bool = True) -> Example:
    if child.lower() not in text.lower():
        raise ValueError(f"child={child!r} is not in the message {text!r}")
    _HOW[text] = "label" if label else "none"
    calls = (Call("post_note", {"child": child, "board": BOARDS[kind], "note": note}),)
    return Example(input=text, kind=kind, answer=written_calls(calls), calls=calls)


TRAIN = (
    _ex(
        "absence",
        "Maisie has a temperature this morning so she won't be in today.",
        "Maisie",
        "temperature, off today",
    ),
    _ex(
        "collect",
        "Just so you know, my mum Pat is picking Alfie up at five today instead of me.",
        "Alfie",
        "grandmother Pat collecting at 5",
    ),
    _ex(
        "health",
        "Noah's been prescribed an antibiotic twice a day with food; could staff give him the "
        "lunchtime dose?",
        "Noah",
        "antibiotic at lunch",
        label=False,
    ),
    _ex(
        "lost",
        "Isla came home without her yellow raincoat yesterday, has anyone seen it?",
        "Isla",
        "yellow raincoat missing",
    ),
    _ex(
        "sessions",
        "Could Freddie do an extra afternoon this Thursday? I've got a work meeting.",
        "Freddie",
        "extra afternoon Thursday",
    ),
    _ex(
        "absence",
        "We're off to Cornwall next week so Ava will miss Monday to Friday.",
        "Ava",
        "holiday all next week",
    ),
    _ex(
        "collect",
        "Oscar's dad will collect him today; his name is Tom Reid and he isn't on your list yet.",
        "Oscar",
        "father Tom Reid collecting",
    ),
    _ex(
        "health",
        "Poppy was diagnosed with a sesame allergy at the weekend, please update her records.",
        "Poppy",
        "sesame allergy",
    ),
    _ex(
        "sessions",
        "From September we'd like Theo to go from three days to four, adding Wednesdays.",
        "Theo",
        "add Wednesdays from September",
        label=False,
    ),
    _ex(
        "lost",
        "Ruby's comfort blanket, a grey one with a bunny on it, has gone missing from her bag.",
        "Ruby",
        "grey bunny blanket missing",
    ),
    _ex(
        "absence",
        "Arlo has chickenpox; the GP says to keep him home until the spots crust over.",
        "Arlo",
        "chickenpox, home until spots crust",
    ),
    _ex(
        "health",
        "Esme will bring her inhaler in from tomorrow: two puffs if she's wheezy.",
        "Esme",
        "inhaler, two puffs if wheezy",
    ),
    _ex(
        "collect",
        "Our neighbour Sandra Okafor will pick up Jude on Friday; she'll bring photo ID.",
        "Jude",
        "neighbour Sandra Okafor collecting Friday",
        label=False,
    ),
    _ex(
        "sessions",
        "Can we swap Nell's Tuesday session for a Friday this month?",
        "Nell",
        "swap Tuesday for Friday",
    ),
)

HELDOUT = (
    _ex(
        "absence",
        "Harriet was sick in the night, so we're keeping her at home today.",
        "Harriet",
        "sick, home today",
    ),
    _ex(
        "absence",
        "Leo has a hospital appointment on Wednesday morning and won't be coming that day.",
        "Leo",
        "hospital appointment Wednesday",
    ),
    _ex(
        "absence",
        "Mabel is staying with her grandparents in Wales until the 14th, so no nursery for her "
        "until then.",
        "Mabel",
        "away until the 14th",
    ),
    _ex(
        "collect",
        "Finn's auntie, Claire Dunn, is doing pick-up this evening; she hasn't been before.",
        "Finn",
        "aunt Claire Dunn collecting",
    ),
    _ex(
        "collect",
        "I'm stuck at work - my partner Sam will come for Orla at half four.",
        "Orla",
        "partner Sam collecting at 4:30",
    ),
    _ex(
        "collect",
        "Please let Reuben go home with his childminder, Mrs Haddad, on Tuesdays from now on.",
        "Reuben",
        "childminder Mrs Haddad on Tuesdays",
    ),
    _ex(
        "health",
        "Ivy needs a dose of Calpol at 1pm; I've signed the form in her bag.",
        "Ivy",
        "Calpol at 1pm",
    ),
    _ex(
        "health",
        "The doctor thinks Caleb may be lactose intolerant, so no cow's milk for him please.",
        "Caleb",
        "no cow's milk",
    ),
    _ex(
        "lost",
        "Rosie's left wellington boot didn't come home; it's pink with stars.",
        "Rosie",
        "pink welly missing",
    ),
    _ex(
        "lost",
        "Has anybody found Zain's water bottle? Blue, with a dinosaur on the lid.",
        "Zain",
        "blue water bottle missing",
    ),
    _ex(
        "sessions",
        "Would there be room for Elsie on Monday mornings as well as her usual days?",
        "Elsie",
        "add Monday mornings",
    ),
    _ex(
        "sessions",
        "Ezra starts school in January, so could he drop to two days a week from December?",
        "Ezra",
        "two days a week from December",
    ),
)

_FIELDS = ("child", "board")


def _wrong_fields(example: Example, outcome: Outcome) -> list[str] | None:
    """The fields with a wrong value, or None when the run made no single post_note call."""
    return wrong_fields(example, outcome, "post_note", _FIELDS)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the run made one post_note call with the right child and board."""
    return 1.0 if _wrong_fields(example, outcome) == [] else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """An operator's right call, or nothing on the runs nobody labelled."""
    if _HOW[example.input] == "none":
        return {}
    right = score(example, outcome) == 1.0
    return {"correct": right, "ground_truth": example.answer, "source": "operator"}


FAMILY = Family(
    name="nursery",
    title="day-nursery messages, one tool whose child is the name the parent typed and whose "
    "board is a house value by kind",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    tools=(post_note,),
    feedback_kind="correct=bool with the right call as ground_truth (source=operator) on 11 "
    "runs; nothing on 3",
)
