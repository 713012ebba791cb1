"""Family 24 (SEALED: not run during development): dental-practice replies, reviewers' notes.

A dental practice's reception assistant (no tools) answers patients' messages.
Five kinds of message each have a house convention a deterministic check
scores:

* moving or cancelling an appointment: the appointment reference in the
  message quoted back (``KD-40721``);
* a dental emergency (severe toothache, swelling, a knocked-out or broken
  tooth, bleeding that will not stop): the urgent line's number,
  ``0113 496 0581``, given;
* prices of treatments and payment plans: the price-list page,
  ``kingsmeaddental.co.uk/prices``, given;
* joining the practice as a new patient: the reply ends with the sign-off
  ``New Patients Team, Kingsmead Dental``, kept for that kind alone;
* what to do after a treatment (an extraction, a filling, whitening, ...): the
  advice written as a numbered list, at least two numbered lines.

Feedback is what production gives a review tool, with no labels: on most wrong
runs a reviewer's comment stating the convention in that reviewer's own words
(``correct=False``, ``source="reviewer"``, no ``ground_truth``); on a right run
a reviewer's bare ``correct=True`` (``source="reviewer"``); on two runs the
reviewer gives a verdict alone, with no comment even when wrong; three runs get
nothing at all (``feedback`` returns ``{}``). Every kind has two commented
runs. Held-out: the same kinds in other words. Scoring checks the kind's
convention (the reference, number or page present, the sign-off at the end,
case and spaces aside; two lines opening ``1.`` and ``2.`` or ``1)`` and ``2)``).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

import re
from typing import Any

from benchmarks.blind._family import Example, Family, Outcome, keeps_convention

SYSTEM_PROMPT = (
    "You are the reception assistant of Kingsmead Dental, a dental practice. Reply to the "
    "patient's message in a friendly paragraph."
)

RULES = """House conventions for replies to patients:
- Moving or cancelling an appointment: quote the patient's appointment reference back,
  e.g. "Appointment KD-40721 is now on Thursday at 10:00."
- A dental emergency (severe toothache, swelling, a knocked-out or broken tooth, bleeding
  that will not stop): give the urgent line, 0113 496 0581.
- Prices of treatments, costs and payment plans: give the price-list page,
  kingsmeaddental.co.uk/prices.
- Joining the practice as a new patient: end the reply with the sign-off
  "New Patients Team, Kingsmead Dental". Do not use that sign-off for anything else.
- What to do after a treatment (an extraction, a filling, whitening, a crown): write the
  advice as a numbered list, one step per line ("1. ...", "2. ...").
"""

URGENT_LINE = "0113 496 0581"
PRICES_PAGE = "kingsmeaddental.co.uk/prices"
SIGN_OFF = "new patients team, kingsmead dental"
# A numbered line, markdown bold or italics around its number allowed ("**1.** Rest.").
_NUMBERED = tuple(re.compile(rf"^\s*[*_]*{n}[.)][*_]*\s", re.M) for n in (1, 2))

_GOLD = {
    "moving": "Of course: appointment {ref} is cancelled, and I have offered you the next free "
    "slot on Thursday at 10:00.",
    "urgent": f"I'm sorry you're in pain. Please call our urgent line on {URGENT_LINE} now and "
    "we will see you today.",
    "prices": f"You'll find every treatment and our payment plans on {PRICES_PAGE}, and the team "
    "can talk you through them.",
    "register": "We'd be glad to welcome you. Fill in the registration form we'll email you and "
    "bring photo ID to your first check-up.\nNew Patients Team, Kingsmead Dental",
    "aftercare": "Here is what to do now:\n1. Bite on the gauze for 30 minutes.\n2. Don't rinse "
    "or drink hot drinks today.\n3. Take paracetamol if it aches.",
}

_REF: dict[str, str] = {}
_HOW: dict[str, str] = {}
_COMMENT: dict[str, str] = {}

# How a run's feedback arrives: "review" a reviewer's verdict with a comment when wrong,
# "verdict" a reviewer's verdict alone, "none" nothing.
_HOWS = ("review", "verdict", "none")


def _ex(kind: str, text: str, comment: str = "", *, ref: str = "", how: str = "review") -> Example:
    if how not in _HOWS:
        raise ValueError(f"how={how!r} is not one of {_HOWS}")
    _REF[text] = ref
    _HOW[text] = how
    _COMMENT[text] = comment.format(ref=ref)
    return Example(input=text, kind=kind, answer=_GOLD[kind].format(ref=ref))


TRAIN = (
    _ex(
        "moving",
        "I need to cancel my check-up on the 14th, the reference is KD-40721.",
        "Say the appointment reference back ({ref}) whenever we move or cancel one, so the "
        "patient can check it's the right booking.",
        ref="KD-40721",
    ),
    _ex(
        "urgent",
        "My face has swollen up on one side and the tooth is throbbing, I can't sleep.",
        f"This is an emergency - the patient needs the urgent line, {URGENT_LINE}.",
    ),
    _ex("prices", "How much is a white filling compared to a silver one?", how="none"),
    _ex(
        "register",
        "We've just moved to the area, are you taking on new patients?",
        how="verdict",
    ),
    _ex(
        "aftercare",
        "I had a wisdom tooth taken out this morning, what should I do tonight?",
        "Aftercare advice goes out as numbered steps, 1. 2. 3., not a block of text.",
    ),
    _ex(
        "prices",
        "Do you offer a monthly payment plan for Invisalign?",
        f"Any question about cost: send them to the price list at {PRICES_PAGE}.",
    ),
    _ex(
        "register",
        "Can my two children and I register with the practice?",
        "new patient enquiry, so the last line has to be the sign-off 'New Patients Team, "
        "Kingsmead Dental'",
    ),
    _ex(
        "moving",
        "Can we push appointment KD-38854 back a week? I'm away.",
        "missing the appointment ref ({ref})",
        ref="KD-38854",
    ),
    _ex(
        "urgent",
        "My son fell off his bike and knocked out a front tooth!",
        f"no urgent number given. Knocked-out teeth, swelling, bad pain: always {URGENT_LINE}.",
    ),
    _ex(
        "aftercare",
        "What can I eat after getting a filling today?",
        "Please lay out the after-treatment steps as a numbered list.",
    ),
    _ex(
        "register",
        "I'd like to join your practice as an NHS patient.",
        "Registering with us: finish with New Patients Team, Kingsmead Dental, and keep that "
        "sign-off for new patients only.",
    ),
    _ex(
        "moving",
        "Please move my hygienist visit, KD-51290, to any afternoon next week.",
        ref="KD-51290",
        how="verdict",
    ),
    _ex(
        "prices",
        "What does teeth whitening cost at your practice?",
        f"Prices: always point to {PRICES_PAGE}, that page is kept up to date.",
    ),
    _ex("urgent", "A filling fell out and the gum won't stop bleeding.", how="none"),
    _ex(
        "aftercare", "Is it normal for my new crown to feel sore, and what should I do?", how="none"
    ),
)

HELDOUT = (
    _ex(
        "moving",
        "Something came up at work, is there a later slot than KD-62017 on Monday?",
        ref="KD-62017",
    ),
    _ex(
        "moving",
        "I won't make it on Friday, please drop booking KD-29463.",
        ref="KD-29463",
    ),
    _ex(
        "moving",
        "Could KD-70385 be switched to a morning instead?",
        ref="KD-70385",
    ),
    _ex("urgent", "A back tooth cracked in half on a nut and the pain is unbearable."),
    _ex("urgent", "My jaw is puffy and hot and I've got a temperature since yesterday."),
    _ex("prices", "Roughly what would a crown set me back?"),
    _ex("prices", "Can the cost of implants be spread over a year?"),
    _ex("register", "I'm new in town and looking for a dentist for the whole family."),
    _ex(
        "register",
        "Is there space on your list for a pensioner who hasn't seen a dentist in years?",
    ),
    _ex("aftercare", "My tooth was pulled an hour ago and it's still oozing, any tips?"),
    _ex(
        "aftercare",
        "I had my teeth whitened today, what should I avoid for the next couple of days?",
    ),
    _ex("aftercare", "The root canal was finished this afternoon; how do I look after it tonight?"),
)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the reply keeps its kind's convention."""
    text = outcome.text
    if example.kind == "moving":
        return keeps_convention("value", "", text, _REF[example.input])
    if example.kind == "urgent":
        return keeps_convention("contains", URGENT_LINE, text)
    if example.kind == "prices":
        return keeps_convention("contains", PRICES_PAGE, text)
    if example.kind == "register":
        return keeps_convention("ends", SIGN_OFF, text)
    return 1.0 if all(line.search(text) for line in _NUMBERED) else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """A reviewer's verdict (a comment in their own words when wrong), or nothing."""
    how = _HOW[example.input]
    if how == "none":
        return {}
    if score(example, outcome) == 1.0:
        return {"correct": True, "source": "reviewer"}
    if how == "verdict":
        return {"correct": False, "source": "reviewer"}
    return {"correct": False, "comment": _COMMENT[example.input], "source": "reviewer"}


FAMILY = Family(
    name="frontdesk",
    title="dental-practice replies, five house conventions, reviewers' notes and no labels",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    feedback_kind="a reviewer's correct=True, or correct=False with a comment in their own "
    "words (source=reviewer); a verdict alone on two runs; nothing on three",
)
