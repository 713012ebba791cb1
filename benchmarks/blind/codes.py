"""Family 5 (SEALED: not run during development): expense lines to arbitrary ledger codes.

A finance assistant books each expense line to one of eight ledger codes the
model cannot guess (``GL-4410`` for travel, ...). Only two labelled runs per
category are given for training. Feedback: right or wrong with the right code
as ``ground_truth``. Scoring: the reply must be the code alone.

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from benchmarks.blind._family import Example, Family, label_feedback, label_score

SYSTEM_PROMPT = (
    "You are the bookkeeping assistant of Calder & Finch. For each expense line, reply with "
    "its ledger code only."
)

CODES = {
    "travel": "GL-4410",
    "meals": "GL-4425",
    "software": "GL-5120",
    "hardware": "GL-1630",
    "training": "GL-6205",
    "office": "GL-4870",
    "marketing": "GL-7310",
    "legal": "GL-6890",
}

RULES = """Ledger codes (reply with the code only):
- Travel (flights, trains, taxis, hotels): GL-4410
- Meals and client entertainment: GL-4425
- Software subscriptions and licences: GL-5120
- Computer hardware and equipment: GL-1630
- Training, courses, conferences: GL-6205
- Office supplies and stationery: GL-4870
- Marketing and advertising: GL-7310
- Legal and notary fees: GL-6890
"""


def _ex(kind: str, text: str) -> Example:
    return Example(input=text, kind=kind, answer=CODES[kind])


TRAIN = (
    _ex("travel", "Train ticket London to Bristol, 86.40 GBP"),
    _ex("travel", "Hotel, two nights in Lyon for the client visit"),
    _ex("meals", "Dinner with the Harlow account team"),
    _ex("meals", "Team lunch after the quarterly review"),
    _ex("software", "Annual licence for the design suite"),
    _ex("software", "Monthly subscription to the project tracker"),
    _ex("hardware", "New laptop for the analyst"),
    _ex("hardware", "Two 27-inch monitors"),
    _ex("training", "Registration for the data engineering course"),
    _ex("training", "Ticket to the fintech conference"),
    _ex("office", "Printer paper and toner"),
    _ex("office", "Notebooks, pens and sticky notes"),
    _ex("marketing", "Sponsored posts on social media"),
    _ex("marketing", "Printing of trade-fair banners"),
    _ex("legal", "Notary fee for the lease signing"),
    _ex("legal", "Solicitor's invoice for contract review"),
)

HELDOUT = (
    _ex("travel", "Taxi from the airport to the office"),
    _ex("travel", "Return flight to Madrid for the audit"),
    _ex("meals", "Coffee and pastries bought for a customer meeting"),
    _ex("meals", "Restaurant bill, celebrating the product launch with a partner"),
    _ex("software", "Renewal of the antivirus seats"),
    _ex("software", "Cloud accounting app, yearly plan"),
    _ex("hardware", "Docking station and keyboard for a new hire"),
    _ex("hardware", "Replacement phone for the sales manager"),
    _ex("training", "Online workshop on negotiation skills"),
    _ex("training", "Certification exam fee for the accountant"),
    _ex("office", "Staples, folders and whiteboard markers"),
    _ex("office", "Envelopes and a desk organiser"),
    _ex("marketing", "Search engine ad campaign for March"),
    _ex("marketing", "Flyers handed out at the city fair"),
    _ex("legal", "Lawyer's fee for the trademark filing"),
    _ex("legal", "Court filing charges"),
)


FAMILY = Family(
    name="codes",
    title="expense lines to eight arbitrary ledger codes, two labelled runs per code",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=label_feedback,
    feedback_kind="correct=bool with the right code as ground_truth (source=operator)",
)
