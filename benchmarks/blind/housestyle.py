"""Family 21 (SEALED: not run during development): theatre box-office replies, reviewers' notes.

A theatre's box-office assistant (no tools) answers customers' messages. Five
kinds of message each have a house convention a deterministic check scores:

* changing or refunding tickets: the booking reference in the message quoted
  back (``MP-48213``);
* wheelchair spaces, hearing loops and other access needs: the access line's
  number, ``0161 496 0732``, given;
* something left behind at a show: the lost-property page,
  ``marlowe.org.uk/lost``, given;
* group and school bookings: the reply ends with the sign-off
  ``Group Sales, The Marlowe``, kept for that kind alone;
* start times, running times and intervals: one short reply of at most 20 words.

Feedback is what production gives a review tool, with no labels: on most wrong
runs a reviewer's comment stating the convention in that reviewer's own words
(``correct=False``, ``source="reviewer"``, no ``ground_truth``); on a right run
a reviewer's bare ``correct=True`` (``source="reviewer"``); three runs get
nothing at all (``feedback`` returns ``{}``). Held-out: the same kinds in other
words. Scoring checks the kind's convention (the reference, number or address
present, the sign-off at the end, case and spaces aside; the word count).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from typing import Any

from benchmarks.blind._family import Example, Family, Outcome, keeps_convention

SYSTEM_PROMPT = (
    "You are the box-office assistant of The Marlowe, a theatre. Reply to the customer's "
    "message in a friendly paragraph."
)

RULES = """House conventions for replies to customers:
- Changing, exchanging or refunding tickets: quote the customer's booking reference back,
  e.g. "Booking MP-48213 has been moved to Friday."
- Access needs (wheelchair spaces, hearing loops, assistance dogs, step-free routes):
  give the access line, 0161 496 0732.
- Something left behind at a show: give the lost-property page, marlowe.org.uk/lost.
- Group or school bookings: end the reply with the sign-off "Group Sales, The Marlowe".
  Do not use that sign-off for anything else.
- Start times, running times and intervals: reply in one sentence of at most 20 words.
"""

ACCESS_LINE = "0161 496 0732"
LOST_PAGE = "marlowe.org.uk/lost"
SIGN_OFF = "group sales, the marlowe"
MAX_WORDS = 20

_GOLD = {
    "exchange": "Done: booking {ref} now has the same seats on Friday's evening show.",
    "access": f"Of course. Please call our access line on {ACCESS_LINE} and the team will "
    "book the right space and help for you.",
    "lost": f"Sorry to hear that. Please report it on {LOST_PAGE} and we will email you if it "
    "is handed in.",
    "groups": "Lovely to hear from you. Groups of ten or more get 15% off, and we will hold the "
    "seats for two weeks while you confirm. Group Sales, The Marlowe",
    "times": "The show starts at 7.30pm and runs about two and a half hours with one interval.",
}

_REF: dict[str, str] = {}
_HOW: dict[str, str] = {}
_COMMENT: dict[str, str] = {}

# How a run's feedback arrives: "review" a reviewer's verdict (a comment when wrong),
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
        "exchange",
        "Can I swap my tickets for Thursday to Friday instead? Booking MP-48213.",
        "When tickets are changed, say the booking reference back ({ref}) so the customer "
        "knows which booking we touched.",
        ref="MP-48213",
    ),
    _ex(
        "access",
        "My husband uses a wheelchair, can we get a space for the Saturday matinee?",
        f"Access requests always get the access line number: {ACCESS_LINE}.",
    ),
    _ex(
        "groups",
        "I'd like 25 tickets for my school's year 9 drama class in March.",
        "group booking - needs our sign-off at the very end: 'Group Sales, The Marlowe'",
    ),
    _ex("times", "What time does Hamlet finish tonight?", how="none"),
    _ex(
        "lost",
        "I left my scarf under seat K14 at last night's show.",
        f"Lost property: point them to {LOST_PAGE}, that's where all found items are logged.",
    ),
    _ex(
        "times",
        "How long is the interval in The Seagull?",
        "Far too long. Questions about timings get one short sentence, twenty words or fewer.",
    ),
    _ex(
        "exchange",
        "I can't make it any more, can I get a refund? My reference is MP-51907.",
        "missing the booking ref ({ref})",
        ref="MP-51907",
    ),
    _ex(
        "access",
        "Do you have a hearing loop in the main auditorium?",
        f"Please always give the access team's number ({ACCESS_LINE}) for anything about access.",
    ),
    _ex("lost", "My son dropped his phone somewhere in the stalls on Sunday.", how="none"),
    _ex(
        "groups",
        "We're a walking club of 14, is there a discount if we all come together?",
        "Parties like this one are group bookings; end with Group Sales, The Marlowe.",
    ),
    _ex(
        "times",
        "When does the matinee of Blithe Spirit start on Saturday?",
        "Start-time questions: a single sentence, at most 20 words. This was a whole paragraph.",
    ),
    _ex(
        "exchange",
        "Please move booking MP-60344 to the 12th if there are seats.",
        ref="MP-60344",
        how="none",
    ),
    _ex(
        "lost",
        "I think I left my reading glasses in the bar after the show.",
        f"Customers who lost something must be sent to the lost-property page, {LOST_PAGE}.",
    ),
    _ex(
        "access",
        "Is there step-free access to the circle? My mother can't manage stairs.",
        "no access line number given - it has to be in every access reply",
    ),
    _ex(
        "groups",
        "Can a party of 30 from our office book the Friday night performance?",
        "Group bookings sign off with 'Group Sales, The Marlowe' as the last line.",
    ),
)

HELDOUT = (
    _ex(
        "exchange",
        "Something has come up on the 3rd, could we go on the 10th instead? Ref MP-73382.",
        ref="MP-73382",
    ),
    _ex(
        "exchange",
        "I'd like my money back for the seats on order MP-29055, we're ill.",
        ref="MP-29055",
    ),
    _ex(
        "exchange",
        "Put my two seats under MP-84410 onto a later date please.",
        ref="MP-84410",
    ),
    _ex("access", "I'm registered blind and will come with my guide dog, is that all right?"),
    _ex("access", "Can my carer sit next to me? I'll be in my chair."),
    _ex("lost", "We can't find my daughter's coat since we came to the panto yesterday."),
    _ex("lost", "Has anyone handed in a black umbrella from the Tuesday evening performance?"),
    _ex("groups", "Our choir is planning an outing for 40 members, how do we reserve?"),
    _ex("groups", "I'm a teacher bringing two classes to see Macbeth next term."),
    _ex("times", "Roughly what time will Blood Brothers be over on Wednesday?"),
    _ex("times", "Is there a break during the first half of the musical?"),
    _ex("times", "What time do the doors open and the curtain go up for tonight's play?"),
)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the reply keeps its kind's convention."""
    text = outcome.text
    if example.kind == "exchange":
        return keeps_convention("value", "", text, _REF[example.input])
    if example.kind == "access":
        return keeps_convention("contains", ACCESS_LINE, text)
    if example.kind == "lost":
        return keeps_convention("contains", LOST_PAGE, text)
    if example.kind == "groups":
        return keeps_convention("ends", SIGN_OFF, text)
    words = len(text.split())
    return 1.0 if 0 < words <= MAX_WORDS else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """A reviewer's verdict (a comment in their own words when wrong), or nothing."""
    if _HOW[example.input] == "none":
        return {}
    if score(example, outcome) == 1.0:
        return {"correct": True, "source": "reviewer"}
    return {"correct": False, "comment": _COMMENT[example.input], "source": "reviewer"}


FAMILY = Family(
    name="housestyle",
    title="theatre box-office replies, five house conventions, reviewers' notes and no labels",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    feedback_kind="a reviewer's correct=True, or correct=False with a comment in their own "
    "words (source=reviewer); nothing on three runs",
)
