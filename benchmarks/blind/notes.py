"""Family 9 (SEALED: not run during development): tenant replies judged by reviewers' comments.

A property manager's assistant answers residents' messages. Six kinds of
message each have a house convention a reviewer checks: a value from the
message quoted back (the flat number of a repair), an opening (noise
complaints), a closing (visitor parking), or a required sentence (keys, parcels,
moving out). Feedback is a review tool's: ``correct=True`` for a reply that
keeps its kind's convention, else ``correct=False`` with a reviewer's comment
and no reference reply (no ``ground_truth``), sent with ``source="reviewer"``.
Several reviewers wrote the comments, so their wording differs from one
training run to the next: some name the kind of message, some only say what
was missing. Scoring checks the convention deterministically (the phrase, the
opening or the closing, case and spaces aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from typing import Any

from benchmarks.blind._family import Example, Family, Outcome, keeps_convention

SYSTEM_PROMPT = (
    "You are the resident services assistant of Larchmont Property Services, which manages "
    "apartment buildings. Reply to the resident's message in a short, polite paragraph."
)

RULES = """House conventions for replies to residents:
- Repairs: quote the resident's flat number back, e.g. "Your repair for Flat 4B is logged."
- Noise complaints: start the reply with "Noise report logged."
- Lost, stolen or extra keys and fobs: include "Please bring photo ID to the site office."
- Parcels and deliveries: include "Parcels are kept at the concierge desk for 7 days."
- Moving out or ending the tenancy: include "Please send us your final meter readings on the
  day you leave."
- Visitor parking: end the reply with "Reply CONFIRM to book."
"""

# kind: (how the reply is checked, the phrase; "{flat}" is the message's flat number)
CHECKS: dict[str, tuple[str, str]] = {
    "repair": ("value", "{flat}"),
    "noise": ("starts", "noise report logged"),
    "keys": ("contains", "photo id"),
    "parcel": ("contains", "7 days"),
    "moveout": ("contains", "final meter reading"),
    "parking": ("ends", "reply confirm to book"),
}

_GOLD = {
    "repair": "Thank you for reporting it. Your repair for Flat {flat} is logged and a "
    "technician will contact you to arrange a visit.",
    "noise": "Noise report logged. We are sorry for the disturbance and will contact the "
    "residents concerned.",
    "keys": "We can issue a replacement. Please bring photo ID to the site office.",
    "parcel": "Yes, the concierge can take your deliveries. Parcels are kept at the concierge "
    "desk for 7 days.",
    "moveout": "Thank you for letting us know. Please send us your final meter readings on the "
    "day you leave.",
    "parking": "Your visitors are welcome to use a visitor bay on that day. Reply CONFIRM to book.",
}

# A comment for a held-out input (never sent: the runner gives feedback on training runs only).
_DEFAULT_COMMENT = {
    "repair": "Repair replies must quote the resident's flat number ({flat}).",
    "noise": "Noise complaints open with 'Noise report logged.'",
    "keys": "Key and fob requests: ask them to bring photo ID to the site office.",
    "parcel": "Say that parcels are kept at the concierge desk for 7 days.",
    "moveout": "Ask for the final meter readings on the day they leave.",
    "parking": "Visitor parking replies end with 'Reply CONFIRM to book.'",
}

_FLAT: dict[str, str] = {}
_COMMENT: dict[str, str] = {}


def _ex(kind: str, text: str, *, flat: str = "", comment: str = "") -> Example:
    _FLAT[text] = flat
    _COMMENT[text] = (comment or _DEFAULT_COMMENT[kind]).format(flat=flat)
    return Example(input=text, kind=kind, answer=_GOLD[kind].format(flat=flat))


TRAIN = (
    _ex(
        "repair",
        "The kitchen tap in flat 4B has been dripping for a week, can someone fix it?",
        flat="4B",
        comment="Repair replies have to quote the flat number back to the resident (here "
        "Flat {flat}) so they can see we logged the right home.",
    ),
    _ex(
        "noise",
        "The people upstairs play loud music every night until 2am.",
        comment="Noise complaints always open with 'Noise report logged.' This one doesn't.",
    ),
    _ex(
        "keys",
        "I lost my door fob on the bus, how do I get a new one?",
        comment="For a lost fob the resident must be told to bring photo ID to the site office.",
    ),
    _ex(
        "parcel",
        "Was a parcel delivered for me today? The courier says it was left at reception.",
        comment="The reply should have said that parcels are kept at the concierge desk for "
        "7 days.",
    ),
    _ex(
        "moveout",
        "I'm giving notice, I'll be moving out at the end of next month.",
        comment="Move-out notices: we need to ask for the final meter readings. Missing.",
    ),
    _ex(
        "parking",
        "My parents are visiting on Saturday, can they park in the visitor bays?",
        comment="Visitor parking replies finish with 'Reply CONFIRM to book.' (the booking "
        "system picks that up).",
    ),
    _ex(
        "repair",
        "Hi, I'm in 12A and the bathroom extractor fan stopped working.",
        flat="12A",
        comment="The reply should have repeated the flat number, {flat}.",
    ),
    _ex(
        "noise",
        "There's been drilling next door since 7 this morning, and it's a Sunday!",
        comment="Wrong opening. The first words must be 'Noise report logged.'",
    ),
    _ex(
        "keys",
        "My keys were stolen along with my bag. I need replacements.",
        comment="Missing: ask them to bring photo ID to the site office, we don't cut keys "
        "without it.",
    ),
    _ex(
        "parcel",
        "I'm away until Friday, can the concierge hold my deliveries?",
        comment="Deliveries: we always tell residents the concierge desk keeps parcels for "
        "7 days. Not mentioned.",
    ),
    _ex(
        "moveout",
        "What do I need to do before I leave the flat on the 30th?",
        comment="You forgot to ask for final meter readings on the day they leave.",
    ),
    _ex(
        "parking",
        "Can I get a guest parking permit for a friend staying two nights?",
        comment="Should end with: Reply CONFIRM to book.",
    ),
)

HELDOUT = (
    _ex("repair", "Radiator in my bedroom is stone cold. I live at 7C.", flat="7C"),
    _ex("noise", "Someone in the building has a dog that barks all evening, it won't stop."),
    _ex("keys", "Can I order an extra key fob for my partner who is moving in?"),
    _ex("parcel", "Tracking says my package was signed for by the building. Where do I get it?"),
    _ex("moveout", "My lease ends in three weeks and I won't be renewing. What happens next?"),
    _ex("parking", "Is there somewhere my sister could leave her car when she visits on Sunday?"),
    _ex("repair", "Our front door lock is jammed (flat 21D), please send someone.", flat="21D"),
    _ex("noise", "Loud party in the apartment below me again, can you do something?"),
    _ex("keys", "I've misplaced my flat keys, is there a spare I can have?"),
    _ex("parcel", "Could you keep hold of a delivery for me while I'm on holiday next week?"),
    _ex("moveout", "We're relocating abroad, so we'll hand the apartment back in May."),
    _ex("parking", "A relative is driving down next weekend, please reserve a guest space."),
)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the reply keeps its kind's convention."""
    how, phrase = CHECKS[example.kind]
    return keeps_convention(how, phrase, outcome.text, _FLAT.get(example.input))


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """A reviewer's verdict: right, or wrong with that run's comment (no reference reply)."""
    if score(example, outcome) == 1.0:
        return {"correct": True, "source": "reviewer"}
    return {"correct": False, "comment": _COMMENT[example.input], "source": "reviewer"}


FAMILY = Family(
    name="notes",
    title="replies to residents, six house conventions, varied reviewer comments only",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    feedback_kind="correct=True, or correct=False with a reviewer comment (source=reviewer)",
)
