"""Family 15 (SEALED: not run during development): library replies with mixed feedback.

A public library's assistant (no tools) answers members' messages. Five kinds
of message each have a house convention a deterministic check scores: the
member's card number quoted back (renewals), an opening (a lost or damaged
item), a required sentence (fines; joining the library) and a closing (study
room bookings). Feedback is mixed from run to run, as production gives it:
some runs get an operator's label (``correct=`` and a right reply as
``ground_truth``, ``source="operator"``), some a reviewer's verdict with a
comment and no reference reply (``source="reviewer"``), some a bare thumbs up
or down (``correct=`` alone, an end user's, the default source), and some no
feedback at all (``feedback`` returns ``{}``: the runner sends nothing and the
run is learned from as it is). Every kind has at least one labelled or
commented training run. Scoring checks the convention (the card number, the
phrase, the opening or the closing, case and spaces aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from typing import Any

from benchmarks.blind._family import Example, Family, Outcome, keeps_convention

SYSTEM_PROMPT = (
    "You are the member assistant of Ashgrove Public Library. Reply to the member's message "
    "in a short, friendly paragraph."
)

RULES = """House conventions for replies to members:
- Renewing loans: quote the member's library card number back, e.g. "Loans on card
  AL-30418 are renewed."
- A lost or damaged item: start the reply with "Please fill in form LD-7."
- Fines, late fees or overdue charges: include "Fines are capped at £5 per item."
- Joining the library or a new card: include "Bring proof of address to any branch."
- Booking a study room or meeting room: end the reply with "Reply ROOM to confirm."
"""

# kind: (how the reply is checked, the phrase; "{card}" is the message's card number)
CHECKS: dict[str, tuple[str, str]] = {
    "renew": ("value", "{card}"),
    "lost": ("starts", "please fill in form ld-7"),
    "fines": ("contains", "capped at £5 per item"),
    "join": ("contains", "proof of address"),
    "room": ("ends", "reply room to confirm"),
}

_GOLD = {
    "renew": "Done: the loans on card {card} are renewed for another three weeks.",
    "lost": "Please fill in form LD-7. It is at every desk and online, and we will tell you "
    "the replacement cost once it is in.",
    "fines": "Sorry about that. Fines are capped at £5 per item, and you can pay at any desk "
    "or online.",
    "join": "Welcome! Joining is free. Bring proof of address to any branch and we will make "
    "your card on the spot.",
    "room": "Study room 2 is free at that time and I have held it for you. Reply ROOM to confirm.",
}

_CARD: dict[str, str] = {}
_HOW: dict[str, str] = {}
_COMMENT: dict[str, str] = {}

# How a run's feedback arrives: "label" an operator's right reply, "comment" a reviewer's
# comment, "bare" a thumbs up or down alone, "none" nothing.
_HOWS = ("label", "comment", "bare", "none")


def _ex(kind: str, text: str, how: str = "label", *, card: str = "", comment: str = "") -> Example:
    if how not in _HOWS:
        raise ValueError(f"how={how!r} is not one of {_HOWS}")
    _CARD[text] = card
    _HOW[text] = how
    _COMMENT[text] = comment.format(card=card)
    return Example(input=text, kind=kind, answer=_GOLD[kind].format(card=card))


TRAIN = (
    _ex(
        "renew",
        "Could you renew everything I have out? My card is AL-30418.",
        "label",
        card="AL-30418",
    ),
    _ex(
        "lost",
        "I spilled coffee all over the cookbook I borrowed, the pages are ruined.",
        "comment",
        comment="Damaged items: the reply has to open with 'Please fill in form LD-7.' so the "
        "member knows the first step.",
    ),
    _ex("fines", "Why do I owe £9 in late fees? That seems a lot.", "bare"),
    _ex("room", "Can I book a study room for Tuesday 3 to 5pm?", "none"),
    _ex(
        "join",
        "I've just moved to Ashgrove, how do I become a member?",
        "comment",
        comment="New members must be told to bring proof of address to any branch.",
    ),
    _ex(
        "fines",
        "I returned three books a month late, what will the charge be?",
        "comment",
        comment="missing the fines cap sentence (Fines are capped at £5 per item.)",
    ),
    _ex(
        "room",
        "Is the meeting room free on Saturday morning for our book club? We'd like it.",
        "label",
    ),
    _ex("lost", "I think I left a library DVD on the train, it's gone.", "bare"),
    _ex(
        "renew",
        "Please extend my loans, card AL-77102, I haven't finished them.",
        "comment",
        card="AL-77102",
        comment="When renewing, repeat the card number ({card}) so they know which account it was.",
    ),
    _ex("join", "Can my daughter get her own library card? She's 12.", "label"),
    _ex("fines", "There's an overdue charge on my account I don't understand.", "none"),
    _ex("lost", "My dog chewed the corner of a picture book, sorry!", "label"),
    _ex("renew", "Renew my two audiobooks please. Card AL-51266.", "none", card="AL-51266"),
    _ex("room", "I need a quiet room to study for exams on Friday afternoon.", "bare"),
)

HELDOUT = (
    _ex(
        "renew",
        "I need a few more weeks with the novels I borrowed, card number AL-48830.",
        card="AL-48830",
    ),
    _ex(
        "renew",
        "Can the due date on my items be pushed back? I'm AL-62907.",
        card="AL-62907",
    ),
    _ex(
        "renew",
        "Keep my loans going a bit longer please, account AL-19544.",
        card="AL-19544",
    ),
    _ex("lost", "The atlas I took out got soaked in the rain and the cover is peeling."),
    _ex("lost", "I can't find the graphic novel anywhere at home, I must have lost it."),
    _ex("fines", "What's the most I could be charged for a book that's very late?"),
    _ex("fines", "You're asking me to pay for returning things after the due date, why?"),
    _ex("join", "I'd like to sign up so I can borrow books, what do I need?"),
    _ex("join", "How does a newcomer to town get membership here?"),
    _ex("room", "Our group wants the seminar space on Wednesday evening, is it available?"),
    _ex("room", "Could you reserve a private desk room for me tomorrow at 10?"),
    _ex("fines", "My account shows a penalty for the late DVD, how much can it go up to?"),
)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the reply keeps its kind's convention."""
    how, phrase = CHECKS[example.kind]
    return keeps_convention(how, phrase, outcome.text, _CARD.get(example.input))


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """That run's feedback: an operator's label, a reviewer's comment, a thumbs, or none."""
    right = score(example, outcome) == 1.0
    how = _HOW[example.input]
    if how == "none":
        return {}
    if how == "bare":
        return {"correct": right}
    if how == "comment":
        if right:
            return {"correct": True, "source": "reviewer"}
        return {"correct": False, "comment": _COMMENT[example.input], "source": "reviewer"}
    return {"correct": right, "ground_truth": example.answer, "source": "operator"}


FAMILY = Family(
    name="mixedsignals",
    title="replies to library members, five house conventions, feedback mixed from run to run",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    feedback_kind="mixed per run: an operator's label (source=operator), a reviewer's comment "
    "(source=reviewer), a bare correct=bool, or none",
)
