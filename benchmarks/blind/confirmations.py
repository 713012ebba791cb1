"""Family 18 (SEALED: not run during development): bank card requests, easy training, hard held-out.

A bank's card-services assistant routes each customer message to one of six
labels that are plain words: ``dispute`` (a card payment the customer did not
make, was charged twice for or got nothing for), ``replace_card`` (a new card
because one is lost, stolen, damaged or not working), ``limit`` (a spending,
cash or credit limit raised or lowered), ``travel`` (a trip abroad announced so
the card keeps working), ``statement`` (copies of statements or a list of past
payments) and ``close`` (the card account ended for good). The training
messages are the easy ones: each holds its label's word or an obvious
synonym, so the agent answers most of them right and the feedback mostly
confirms it. The held-out messages say the same needs in other, harder words
and hold no label's word. Three labelled runs per label for training, two
held-out. Feedback is an operator's: right or wrong with the right label as
``ground_truth`` and ``source="operator"``. Scoring: the reply must be the
label alone (case, spaces, quotes and a final full stop aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from benchmarks.blind._family import Example, Family, label_feedback, label_score

SYSTEM_PROMPT = (
    "You are the card-services assistant of Fernhill Bank. Read the customer's message and "
    "reply with one label only: dispute, replace_card, limit, travel, statement or close."
)

RULES = """Labels (reply with the label only):
- dispute: a card payment the customer does not recognise, was charged for twice or for the
  wrong amount, or paid for goods or services that never came.
- replace_card: a new card is needed: lost, stolen, damaged, expired, or it stops working in
  shops or machines.
- limit: raise or lower a daily spending limit, a cash withdrawal limit or a credit limit.
- travel: the customer is going abroad and tells us where and when, so payments there are
  not blocked.
- statement: copies of past statements, a list of transactions for a period, proof of
  payments for an accountant or a landlord.
- close: end the card account for good.
"""

LABELS = ("dispute", "replace_card", "limit", "travel", "statement", "close")


def _ex(label: str, text: str) -> Example:
    return Example(input=text, kind=label, answer=label)


TRAIN = (
    _ex("dispute", "I want to dispute a charge of £64.99 from an online shop I never used."),
    _ex("replace_card", "I lost my debit card yesterday, please send me a replacement card."),
    _ex("limit", "Please raise my daily spending limit to £3,000."),
    _ex("travel", "I'm travelling to Spain from 3 to 17 May, please note my travel dates."),
    _ex("statement", "Can you send me my statement for January?"),
    _ex("close", "I want to close my credit card account."),
    _ex("dispute", "I was charged twice for the same hotel booking, I'd like to dispute it."),
    _ex("replace_card", "My card was stolen on the bus, I need a new card."),
    _ex("limit", "Can you lower the cash withdrawal limit on my card? I want it at £200."),
    _ex("travel", "Travel notice: I'll be in Canada for three weeks from the 10th."),
    _ex("statement", "I need paper statements for the last six months."),
    _ex("close", "Please close my card, I don't use it anymore."),
    _ex("dispute", "There's a payment to a gym I cancelled last year, I dispute it."),
    _ex("replace_card", "My card is damaged and cracked, can I get a replacement?"),
    _ex("limit", "I'd like a higher credit limit on my card."),
    _ex("travel", "Going on a business trip to Singapore next week, just letting you know."),
    _ex("statement", "Where can I download last year's card statements?"),
    _ex("close", "Close my account please, I've moved to another bank."),
)

HELDOUT = (
    _ex(
        "dispute",
        "There's £240 to an electronics website on my card and I've never bought anything "
        "from them.",
    ),
    _ex("dispute", "I paid for a sofa in March, the firm went bust and nothing was delivered."),
    _ex("replace_card", "The chip on mine has stopped working, every machine rejects it."),
    _ex("replace_card", "My wallet was pickpocketed in town this afternoon."),
    _ex("limit", "I'm buying a used car on Saturday and need to spend £6,000 in one day."),
    _ex("limit", "Cap how much can be taken out at cash machines each day, I overspend."),
    _ex("travel", "We fly to Japan on the 2nd and back on the 20th, don't block us out there."),
    _ex("travel", "I'll be working in Kenya all of next month, make sure my payments go through."),
    _ex("statement", "My accountant needs every transaction from April to March for my tax."),
    _ex("statement", "The letting agent wants proof of my rent payments for the past year."),
    _ex("close", "I don't want this card anymore, shut it down and cut my ties with it."),
    _ex("close", "Please terminate my credit card agreement once the balance is paid off."),
)


FAMILY = Family(
    name="confirmations",
    title="bank card messages to six plain-word labels; easy training, held-out in harder words",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=label_feedback,
    feedback_kind="correct=bool with the right label as ground_truth (source=operator)",
)
