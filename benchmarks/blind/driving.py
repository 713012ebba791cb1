"""Family 31 (SEALED: not run during development): driving-school replies, reviewers' notes.

A driving school's pupil assistant (no tools) answers pupils' and parents'
messages. Five kinds of message each have a house convention a deterministic
check scores:

* moving or cancelling a lesson: the lesson's booking reference in the message
  quoted back (``FS-58213``);
* a complaint about an instructor: the head of training's direct line,
  ``01632 960 418``, given;
* the practical driving test (booking one, what to bring, the test day): the
  test-day page, ``fellsidedriving.co.uk/test-day``, given;
* an intensive (crash) course: the reply ends with the closing line
  ``Our course planner will call you within one working day to fix your
  dates.``, kept for that kind alone;
* prices: every price written with the pound sign and pence (``£38.00``),
  never ``38 pounds`` or ``£38``. The app's prompt gives the prices in words
  (``38 pounds``), so the model has them but not the house way to write them.

Feedback is what production gives a review tool, with no labels: on a wrong
run a reviewer's comment stating the convention in that reviewer's own words
(``correct=False``, ``source="reviewer"``, no ``ground_truth``); on a right run
a reviewer's bare ``correct=True`` (``source="reviewer"``); three runs get
nothing at all (``feedback`` returns ``{}``). Every kind has at least two
commented runs. Held-out: the same kinds in other words. Scoring checks the
kind's convention (the reference, number or page present and the closing line
at the end, case and spaces aside; a price written ``£`` with pence and none
without them).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

import re
from typing import Any

from benchmarks.blind._family import Example, Family, Outcome, keeps_convention

SYSTEM_PROMPT = (
    "You are the pupil assistant of Fellside School of Motoring, a driving school. Reply to "
    "the pupil's or parent's message in a friendly paragraph. Prices: an hour's lesson costs 38 "
    "pounds (manual or automatic), a block of ten hours costs 350 pounds, and a two-hour "
    "motorway lesson costs 80 pounds."
)

RULES = """House conventions for replies:
- Moving or cancelling a lesson: quote the booking reference back,
  e.g. "Lesson FS-58213 is now on Wednesday at 15:00."
- A complaint about an instructor: give the head of training's direct line, 01632 960 418.
- The practical driving test (booking one, what to bring, the car, the test day): give the
  test-day page, fellsidedriving.co.uk/test-day.
- An intensive or crash course: end the reply with "Our course planner will call you within
  one working day to fix your dates." Do not use that line for anything else.
- Prices: write every price with the pound sign and pence (£38.00, £350.00, £80.00),
  never "38 pounds" or "£38".
"""

TRAINING_LINE = "01632 960 418"
TEST_PAGE = "fellsidedriving.co.uk/test-day"
CLOSING = "our course planner will call you within one working day to fix your dates"
# "£38", "£ 350.00", "£1,200.5": every pound amount; each must carry exactly two pence digits.
_POUNDS = re.compile(r"£\s*(\d[\d,]*(?:\.\d+)?)")
_WITH_PENCE = re.compile(r"\d[\d,]*\.\d\d")
# "38 pounds", "80 quid", "350 GBP", "GBP 38": a price written without the pound sign.
_IN_WORDS = re.compile(r"\d\s*(?:pounds?|quid|gbp)\b|\bgbp\s*\d", re.I)

_GOLD = {
    "lesson": "No problem: lesson {ref} is cancelled and there is no charge with more than 48 "
    "hours' notice.",
    "complaint": "I'm sorry to hear that. Please ring our head of training on "
    f"{TRAINING_LINE}; she looks into every complaint about an instructor herself.",
    "test": f"Everything about the day, from documents to using our car, is on {TEST_PAGE}.",
    "intensive": "Yes, we run intensive courses for beginners and for pupils close to test "
    "standard.\nOur course planner will call you within one working day to fix your dates.",
    "prices": "An hour's lesson is £38.00, a block of ten hours is £350.00 and a two-hour "
    "motorway lesson is £80.00.",
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
    if ref and ref not in text:
        raise ValueError(f"ref={ref!r} is not in the message {text!r}")
    _REF[text] = ref
    _HOW[text] = how
    _COMMENT[text] = comment.format(ref=ref)
    return Example(input=text, kind=kind, answer=_GOLD[kind].format(ref=ref))


TRAIN = (
    _ex(
        "lesson",
        "I need to cancel my lesson on Thursday, booking FS-58213, I've been given a work shift.",
        "Always say the booking reference back ({ref}) when a lesson is moved or cancelled, so "
        "the pupil knows which one we changed.",
        ref="FS-58213",
    ),
    _ex(
        "complaint",
        "My instructor was on his phone for most of my lesson today and I don't think that's "
        "acceptable.",
        "Complaints about an instructor go straight to our head of training - give the direct "
        f"line, {TRAINING_LINE}.",
    ),
    _ex(
        "test", "My practical test is next Tuesday, what do I need to bring on the day?", how="none"
    ),
    _ex(
        "prices",
        "How much is a single lesson, and is there a discount if I book a block?",
        "We write prices as £38.00 and £350.00 - pound sign and pence, never '38 pounds' or '£38'.",
    ),
    _ex(
        "intensive",
        "Do you do crash courses? I'd like to pass within a couple of weeks.",
        "intensive course enquiry, so finish with: Our course planner will call you within one "
        "working day to fix your dates.",
    ),
    _ex(
        "lesson",
        "Can lesson FS-61470 be moved from Monday to Wednesday afternoon?",
        "missing the booking ref ({ref})",
        ref="FS-61470",
    ),
    _ex(
        "complaint",
        "The instructor shouted at my daughter during her lesson and she came home in tears.",
        f"no number! Any complaint about one of our instructors needs {TRAINING_LINE} in the "
        "reply.",
    ),
    _ex(
        "test",
        "Can I use the school car for my driving test, and will my instructor come with me?",
        f"Test questions: link {TEST_PAGE}, it covers the car, the instructor and the documents.",
    ),
    _ex(
        "prices",
        "What does the motorway lesson cost?",
        "Prices with the £ sign and two decimals (£80.00), please.",
    ),
    _ex(
        "intensive",
        "I've got a week off in August - could I do an intensive course then?",
        how="none",
    ),
    _ex(
        "lesson",
        "Please cancel FS-47702, I'm ill.",
        "Quote their booking reference back: {ref}.",
        ref="FS-47702",
    ),
    _ex(
        "test",
        "I failed my test last month; how do I get another one booked with you?",
        f"Anything about the test gets our test-day page, {TEST_PAGE}.",
    ),
    _ex(
        "complaint",
        "I was charged for a lesson my instructor never turned up to, and nobody has called me.",
        f"Instructor complaint: the head of training's number ({TRAINING_LINE}) must be there.",
    ),
    _ex(
        "intensive",
        "Is a five-day intensive course possible for someone who has never driven?",
        "For intensive courses, and only those, the reply closes with the line about the "
        "course planner calling within one working day to fix the dates.",
    ),
    _ex("prices", "Are your prices different for automatic lessons?", how="none"),
)

HELDOUT = (
    _ex(
        "lesson",
        "Something's come up at work; is it possible to push FS-52904 to next week?",
        ref="FS-52904",
    ),
    _ex(
        "lesson",
        "Please could the start time of booking FS-33186 be changed to later in the day?",
        ref="FS-33186",
    ),
    _ex(
        "lesson",
        "I won't make FS-70251 tomorrow, sorry - can it be called off without a charge?",
        ref="FS-70251",
    ),
    _ex(
        "complaint",
        "My son says his instructor keeps turning up twenty minutes late and cutting lessons "
        "short.",
    ),
    _ex(
        "complaint",
        "I felt really uncomfortable with the remarks my instructor made today and want to "
        "report it.",
    ),
    _ex("test", "What happens if it's pouring with rain on the morning of my practical exam?"),
    _ex("test", "Do I need my provisional licence with me when I sit the practical?"),
    _ex("test", "How early should I get to the test centre, and can I warm up in your car first?"),
    _ex(
        "intensive", "Could I squeeze all my lessons into one fortnight before I go to university?"
    ),
    _ex("intensive", "My employer needs me driving by next month - is there a fast-track option?"),
    _ex("prices", "What would ten hours of lessons set me back?"),
    _ex("prices", "How much is a two-hour session on the motorway?"),
)


def keeps_pence(reply: str) -> float:
    """1 when the reply gives a price as ``£`` with pence and none without them, else 0."""
    amounts = _POUNDS.findall(reply)
    if not amounts or _IN_WORDS.search(reply):
        return 0.0
    return 1.0 if all(_WITH_PENCE.fullmatch(amount) for amount in amounts) else 0.0


def score(example: Example, outcome: Outcome) -> float:
    """1 when the reply keeps its kind's convention."""
    text = outcome.text
    if example.kind == "lesson":
        return keeps_convention("value", "", text, _REF[example.input])
    if example.kind == "complaint":
        return keeps_convention("contains", TRAINING_LINE, text)
    if example.kind == "test":
        return keeps_convention("contains", TEST_PAGE, text)
    if example.kind == "intensive":
        return keeps_convention("ends", CLOSING, text)
    return keeps_pence(text)


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """A reviewer's verdict (a comment in their own words when wrong), or nothing."""
    if _HOW[example.input] == "none":
        return {}
    if score(example, outcome) == 1.0:
        return {"correct": True, "source": "reviewer"}
    return {"correct": False, "comment": _COMMENT[example.input], "source": "reviewer"}


FAMILY = Family(
    name="driving",
    title="driving-school replies, five house conventions, reviewers' notes and no labels",
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
