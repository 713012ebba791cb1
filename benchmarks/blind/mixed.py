"""Family 3 (dev): a mixed stream of three unrelated tasks through one prompt.

A logistics company's operations helper gets, in one stream: customer reviews to
label (house labels ``praise`` / ``complaint`` / ``mixed``), dates to write in the
house format (``DD.MM.YYYY``), and incident reports to give a priority
(``P1`` everyone blocked, ``P2`` degraded or some users, ``P3`` cosmetic).
Feedback is an operator's correction: right or wrong with the right answer as
``ground_truth``. Scoring: the reply must be the answer alone (case, spaces,
quotes and a final full stop aside).
"""

from __future__ import annotations

from benchmarks.blind._family import Example, Family, label_feedback, label_score

SYSTEM_PROMPT = (
    "You are the operations helper of Northwind Logistics. Several kinds of request reach you. "
    "Reply with the answer only, no explanation."
)

RULES = """Answer formats:
- Customer reviews: answer praise, complaint or mixed (one word, lower case).
- Dates: write the date as DD.MM.YYYY (two-digit day and month, four-digit year), nothing else.
- Incident reports: answer P1 if everyone is blocked (full outage), P2 if it is slow, degraded
  or affects some users, P3 if it is cosmetic (typos, colours, layout).
"""


def _review(text: str, label: str) -> Example:
    return Example(input=text, kind="review", answer=label)


def _date(text: str, value: str) -> Example:
    return Example(input=text, kind="date", answer=value)


def _incident(text: str, value: str) -> Example:
    return Example(input=text, kind="incident", answer=value)


TRAIN = (
    _review("Review: The driver was on time and very polite. Great service!", "praise"),
    _review("Review: Package arrived soaked and the box was crushed.", "complaint"),
    _review("Review: Fast delivery, but the tracking page never updated.", "mixed"),
    _review("Review: Best courier I've used, will book again.", "praise"),
    _review("Review: Nobody answered the phone for two days. Awful.", "complaint"),
    _review("Review: Friendly staff, though my parcel came a day late.", "mixed"),
    _date("Date: March 3rd 2025", "03.03.2025"),
    _date("Date: 2024-11-07", "07.11.2024"),
    _date("Date: 9 January 2026", "09.01.2026"),
    _date("Date: July 21, 2025", "21.07.2025"),
    _date("Date: 2025/02/14", "14.02.2025"),
    _date("Date: 30th of September 2024", "30.09.2024"),
    _incident("Incident: The whole booking site is down for all customers.", "P1"),
    _incident("Incident: Label printing is slow, taking a minute per label.", "P2"),
    _incident("Incident: Typo on the invoice footer ('Logisitcs').", "P3"),
    _incident("Incident: No depot can log in to the scanner app at all.", "P1"),
    _incident("Incident: Some drivers in the north region see stale routes.", "P2"),
    _incident("Incident: The logo on the tracking page is the wrong shade of blue.", "P3"),
)

HELDOUT = (
    _review(
        "Please label this customer feedback: 'Superb, my sofa came early and intact.'", "praise"
    ),
    _review("Customer wrote: 'Lost my shipment and then blamed me. Never again.'", "complaint"),
    _review("Feedback to classify: 'Cheap price, yet the courier left it in the rain.'", "mixed"),
    _review(
        "How would you tag this? 'Dreadful experience, parcel opened and items missing.'",
        "complaint",
    ),
    _date("Put this in our format: 5th May 2025", "05.05.2025"),
    _date("Format the day 2026-04-18 please", "18.04.2026"),
    _date("Which is December 1, 2024 in house style?", "01.12.2024"),
    _date("Rewrite 2025/08/09 the way we write dates", "09.08.2025"),
    _incident("Outage report: payments fail for every single user right now.", "P1"),
    _incident("Problem: the warehouse dashboard loads in 40 seconds for a few managers.", "P2"),
    _incident("Ticket: footer text on the invoice misaligned by a few pixels.", "P3"),
    _incident("Alert: API returns errors for all partners, nothing gets through.", "P1"),
)


FAMILY = Family(
    name="mixed",
    title="three unrelated tasks in one stream (review labels, house date format, priorities)",
    sealed=False,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=label_feedback,
    feedback_kind="correct=bool with the right answer as ground_truth (source=operator)",
)
