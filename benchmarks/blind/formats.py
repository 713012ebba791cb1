"""Family 12 (SEALED: not run during development): airline requests to house record lines.

An airline's service desk turns each customer message into one record line in
the house format of its kind, built from the values the message holds:

* moving to another flight: ``RBK <flight> <date>`` (``RBK NV412 2027-03-03``);
* a name correction: ``NM <SURNAME>/<Given>`` (``NM KOWALSKI/Anna``);
* a refund: ``RFD <amount> <currency>`` (``RFD 1200.00 USD``);
* a missing bag: ``BAG T-<tag digits> <date>`` (``BAG T-318442 2027-01-12``);
* wheelchair or boarding help: ``WCH <SURNAME>/<Given> <date>``.

Dates are ``YYYY-MM-DD`` whatever way the message writes them. Every message
carries its own values, so copying one run's answer is always wrong: a rule has
to state the format. Feedback is an operator's correction, sent as the docs say
an operator's labels are: right or wrong with the right line as
``ground_truth`` and ``source="operator"``. Scoring: the reply must be that line
exactly (case kept: the surname is in capitals), spaces trimmed and collapsed,
quotes, asterisks and a final full stop around it aside.

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

import re
from typing import Any

from benchmarks.blind._family import Example, Family, Outcome

SYSTEM_PROMPT = (
    "You are the service desk assistant of Norvale Air. Turn the customer's message into a "
    "record line for the booking system. Reply with the record line only."
)

RULES = """Record formats (reply with the record line only, nothing else):
- Moving to another flight: RBK <flight> <date>: the flight they want to move to, letters in
  capitals and no space (nv 412 -> NV412), and that flight's date.
- Name corrections: NM <SURNAME>/<Given>: the right name, surname in capitals, a slash, then
  the given name as written (NM KOWALSKI/Anna).
- Refunds: RFD <amount> <currency>: the amount with two decimals and no thousands separator,
  then the ISO currency code (EUR, GBP, USD, CHF).
- Missing or delayed bags: BAG T-<tag> <date>: the bag tag's digits only (no spaces, dashes or
  letters), then the date of the flight.
- Wheelchair or boarding assistance: WCH <SURNAME>/<Given> <date>: the passenger's name as for
  NM, then the date of the flight.
Dates are always YYYY-MM-DD (3 March 2027 -> 2027-03-03).
Example: "Put me on nv 88 on 2 May 2027" -> RBK NV88 2027-05-02
"""


def _ex(kind: str, text: str, record: str) -> Example:
    return Example(input=text, kind=kind, answer=record)


TRAIN = (
    _ex(
        "rebook",
        "Please move me onto flight NV 412 on 3 March 2027 instead.",
        "RBK NV412 2027-03-03",
    ),
    _ex(
        "name",
        "My name was typed as Anna Kowalsky, but my passport says Anna Kowalski.",
        "NM KOWALSKI/Anna",
    ),
    _ex("refund", "You charged me €45 for a seat I never got. Please refund it.", "RFD 45.00 EUR"),
    _ex(
        "bag",
        "My suitcase didn't arrive on the flight of 12 January 2027, tag number 318 442.",
        "BAG T-318442 2027-01-12",
    ),
    _ex(
        "wheelchair",
        "My father, Rahul Mehta, needs a wheelchair at the gate on 21 February 2027.",
        "WCH MEHTA/Rahul 2027-02-21",
    ),
    _ex(
        "rebook",
        "Can I change to the nv218 leaving on the 17th of November 2026? My current one is on "
        "the 15th.",
        "RBK NV218 2026-11-17",
    ),
    _ex(
        "name",
        "Please correct the passenger name to Daniel Okafor, it currently reads Daniel Okafur.",
        "NM OKAFOR/Daniel",
    ),
    _ex("refund", "I'm owed £120.5 for the lounge pass you cancelled.", "RFD 120.50 GBP"),
    _ex(
        "bag",
        "Bag missing after landing on 2026-12-02. The tag says NV-55-0193.",
        "BAG T-550193 2026-12-02",
    ),
    _ex(
        "wheelchair",
        "Can you arrange assistance for Ingrid Larsen flying on the 5th of May 2027? She can't "
        "walk long distances.",
        "WCH LARSEN/Ingrid 2027-05-05",
    ),
    _ex(
        "rebook",
        "I'd like to switch my return to NV 1090 on April 9, 2027.",
        "RBK NV1090 2027-04-09",
    ),
    _ex(
        "refund",
        "Refund the 1,200 US dollars for the flight you cancelled, please.",
        "RFD 1200.00 USD",
    ),
)

HELDOUT = (
    _ex(
        "rebook",
        "Is there room on NV 77 on 28 June 2027? I'd like to move my booking to it.",
        "RBK NV77 2027-06-28",
    ),
    _ex(
        "rebook",
        "I need to fly a day later. Put me on flight nv 530 on 1 December 2026.",
        "RBK NV530 2026-12-01",
    ),
    _ex(
        "rebook",
        "Switching my outbound from the 10th to NV2204 on 14 August 2027, please.",
        "RBK NV2204 2027-08-14",
    ),
    _ex("name", "The booking says Jon Petersen; it should be John Pedersen.", "NM PEDERSEN/John"),
    _ex(
        "name",
        "Misspelling on my ticket: Maria Gonzales should be Maria Gonzalez.",
        "NM GONZALEZ/Maria",
    ),
    _ex(
        "refund",
        "The extra bag fee of 60 euros was taken twice, I want one of them back.",
        "RFD 60.00 EUR",
    ),
    _ex(
        "refund",
        "Please return the CHF 89.90 I paid for wifi that never worked.",
        "RFD 89.90 CHF",
    ),
    _ex(
        "refund",
        "I was charged US$2,350 for a ticket I didn't book. Give me my money back.",
        "RFD 2350.00 USD",
    ),
    _ex(
        "bag",
        "Arrived on 30 October 2026 without my backpack, the luggage tag reads 771 204.",
        "BAG T-771204 2026-10-30",
    ),
    _ex(
        "bag",
        "Our stroller never came off the plane on the 8th of March 2027. Tag 0042-917.",
        "BAG T-0042917 2027-03-08",
    ),
    _ex(
        "wheelchair",
        "Please book wheelchair help for passenger Tomas Novak on 19 January 2027.",
        "WCH NOVAK/Tomas 2027-01-19",
    ),
    _ex(
        "wheelchair",
        "My grandmother Elena Rossi will need help boarding on 2027-07-03.",
        "WCH ROSSI/Elena 2027-07-03",
    ),
)

_SPACES = re.compile(r"\s+")
_EDGE = re.compile(r"^[\s\"'`*.:]+|[\s\"'`*.:]+$")


def tidy(text: str) -> str:
    """The reply with spaces collapsed and quotes, asterisks and stops at its ends stripped.

    Typographic dashes become ``-``; the case is kept.
    """
    text = text.replace("\u2013", "-").replace("\u2014", "-").replace("\u2011", "-")
    return _EDGE.sub("", _SPACES.sub(" ", text))


def score(example: Example, outcome: Outcome) -> float:
    """1 when the reply is the right record line (case kept)."""
    return 1.0 if tidy(outcome.text) == example.answer else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """Right or wrong, with the right record line (an operator's correction)."""
    right = score(example, outcome) == 1.0
    return {"correct": right, "ground_truth": example.answer, "source": "operator"}


FAMILY = Family(
    name="formats",
    title="airline requests to house record lines (ISO dates, SURNAME/Given, amounts and codes)",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    feedback_kind="correct=bool with the right record line as ground_truth (source=operator)",
)
