"""Family 6 (SEALED: not run during development): callback requests to a house record format.

A call centre's assistant turns a customer's message asking for a callback into
one line in the house format ``CB;<first name>;<phone digits only>;<AM|PM>``
(``AM`` for a time before noon). Feedback: right or wrong with the right line
as ``ground_truth``. Scoring: the reply must be that line (case and spaces
aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from benchmarks.blind._family import Example, Family, label_feedback, label_score

SYSTEM_PROMPT = (
    "You are the intake assistant of Brightline Telecom. Turn the customer's callback request "
    "into a record line. Reply with the record only."
)

RULES = """Record format: CB;<first name>;<phone digits only>;<AM|PM>
- First name only, as the customer wrote it.
- Phone: digits only, no spaces, dashes, brackets or plus sign.
- AM for a time before 12:00, PM from 12:00 on.
Example: "Hi, Dana here, ring me on +44 (0)20 7946-0018 at 3pm" -> CB;Dana;4402079460018;PM
"""


def _ex(text: str, record: str) -> Example:
    return Example(input=text, kind="callback", answer=record)


TRAIN = (
    _ex(
        "Hi, this is Maria Lopez, please call me at 0612-345-678 around 10am.",
        "CB;Maria;0612345678;AM",
    ),
    _ex("Call back Peter on (020) 555 0199 after 2 pm please.", "CB;Peter;0205550199;PM"),
    _ex("It's Aisha. Number +31 6 1234 5678, any time after 4pm.", "CB;Aisha;31612345678;PM"),
    _ex(
        "Could someone ring Tom Baker, 07700 900123, at 9:30 in the morning?",
        "CB;Tom;07700900123;AM",
    ),
    _ex("Jonas here - 030-1234567 - best before 11.", "CB;Jonas;0301234567;AM"),
    _ex("Please phone Lea at +49 170 555 1234 at 1pm.", "CB;Lea;491705551234;PM"),
    _ex("My name is Chen Wei, call 415-555-0132 at 8am.", "CB;Chen;4155550132;AM"),
    _ex("Sofia, 0044 20 7946 0321, evening around 6 works.", "CB;Sofia;00442079460321;PM"),
    _ex("Hello, Ivan. Reach me on 8-800-555-35-35 at noon.", "CB;Ivan;88005553535;PM"),
    _ex("Nadia Karim: 06 12 34 56 78, before lunch at 11:15.", "CB;Nadia;0612345678;AM"),
    _ex(
        "Ring Oliver on 0161 496 0000 at half past three in the afternoon.",
        "CB;Oliver;01614960000;PM",
    ),
    _ex("Yuki here, 090-1234-5678, 7am would be ideal.", "CB;Yuki;09012345678;AM"),
)

HELDOUT = (
    _ex(
        "Greetings, I'm Hannah Stein. Please dial +43 660 1234567 tomorrow at 10:45.",
        "CB;Hannah;436601234567;AM",
    ),
    _ex("Need a call. Marco, 347 555 0101, late afternoon ~5pm.", "CB;Marco;3475550101;PM"),
    _ex(
        "Priya calling - reach me at (0)7911 123456 at 9 in the morning.", "CB;Priya;07911123456;AM"
    ),
    _ex("This is Lars; my mobile is 0046-70-123-45-67, try 2:30 pm.", "CB;Lars;0046701234567;PM"),
    _ex(
        "Fatima Noor would like a callback, 050 123 4567, around 8.30am.", "CB;Fatima;0501234567;AM"
    ),
    _ex("Give Diego a ring at +34 612 34 56 78 after lunch, say 1:30.", "CB;Diego;34612345678;PM"),
    _ex("Emma, tel. 01632 960 001, any time before ten.", "CB;Emma;01632960001;AM"),
    _ex("Phone Kwame on +233 20 123 4567, at 4 in the afternoon.", "CB;Kwame;233201234567;PM"),
    _ex("Rosa Diaz asks you to call 555-0175 at eleven a.m.", "CB;Rosa;5550175;AM"),
    _ex("Hi! Ben. 0412 345 678. 7pm tonight please.", "CB;Ben;0412345678;PM"),
    _ex("Could Mei get a call on 138 0013 8000 at 6:45 in the morning?", "CB;Mei;13800138000;AM"),
    _ex("Callback for Ahmed, number 079 123 45 67, 12:30.", "CB;Ahmed;0791234567;PM"),
)


FAMILY = Family(
    name="extraction",
    title="callback requests to a house record line (first name, digits only, AM/PM)",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=label_feedback,
    feedback_kind="correct=bool with the right record as ground_truth (source=operator)",
)
