"""Family 33 (SEALED: not run during development): three brewery jobs in one stream.

A small brewery's trade-desk helper gets three unrelated kinds of item in one
stream, interleaved:

* a pub's report of a cask that is not right, to be given one of the brewery's
  quality codes: ``Q4`` (the beer is flat: no condition, no head), ``Q7`` (it
  tastes or smells off: sour, vinegary, buttery), ``Q9`` (it will not clear:
  hazy, cloudy, bits floating);
* a member of the public's question about visiting the brewery (tours, the tap
  room), to be answered in a short friendly paragraph that ends with the house
  sign-off ``Cheers from the Hopwell tap room team.``;
* a pub's order for a delivery, from which the delivery reference is written in
  the house form ``DR/<account number>`` (``account 5517`` -> ``DR/5517``).

The app's prompt names the three jobs and lists the quality codes without what
they mean, and says nothing of the sign-off or the reference's form. Feedback
as each job gets it: an operator's label for the quality codes and the
references (right or wrong with the right answer as ``ground_truth``,
``source="operator"``); a reviewer's verdict for the replies (``correct=True``,
or ``correct=False`` with a comment in the reviewer's own words, no
``ground_truth``, ``source="reviewer"``). Six training runs per job (18), four
held-out per job (12) in other words, every order with an account number of its
own. Scoring: the code or reference alone (case, spaces, quotes and a final full
stop aside); a reply ending with the sign-off.

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from typing import Any

from benchmarks.blind._family import (
    Example,
    Family,
    Outcome,
    keeps_convention,
    label_feedback,
    label_score,
)

SYSTEM_PROMPT = (
    "You are the trade-desk helper of Hopwell Brewery. Three kinds of item reach you: pubs' "
    "reports about a cask, questions from the public about visiting us, and pubs' delivery "
    "orders. For a cask report, reply with its quality code only (Q4, Q7 or Q9). For a "
    "question about visiting, reply in a short friendly paragraph. For a delivery order, reply "
    "with the delivery reference only."
)

RULES = """How to handle each kind of item:
- A pub's report about a cask: reply with the quality code only.
  Q4 the beer is flat (no condition, no head, lifeless); Q7 it tastes or smells off
  (sour, vinegary, buttery, cardboard); Q9 it will not clear (hazy, cloudy, bits in it).
- A question from the public about visiting (tours, the tap room, opening times, groups):
  answer in a short paragraph and always end with the line
  "Cheers from the Hopwell tap room team."
- A pub's delivery order: reply with the delivery reference only, written DR/ followed by
  the pub's account number (e.g. "account 5517" -> DR/5517).
"""

SIGN_OFF = "cheers from the hopwell tap room team"

_COMMENT: dict[str, str] = {}


def _cask(text: str, code: str) -> Example:
    return Example(input=text, kind="cask", answer=code)


def _order(text: str, reference: str) -> Example:
    if reference.split("/")[1] not in text:
        raise ValueError(f"reference={reference!r} is not built from a number in {text!r}")
    return Example(input=text, kind="order", answer=reference)


def _visit(text: str, comment: str = "") -> Example:
    _COMMENT[text] = comment
    answer = (
        "Brewery tours run on Saturdays at 12:00 and 15:00 and the tap room is open from noon "
        "to 9pm, Thursday to Sunday.\nCheers from the Hopwell tap room team."
    )
    return Example(input=text, kind="visit", answer=answer)


TRAIN = (
    _cask("Cask report: The Hopwell Gold we tapped last night is flat, no head at all.", "Q4"),
    _visit(
        "Visitor: Do you do brewery tours at weekends, and do I need to book?",
        "Visiting questions finish with our sign-off: Cheers from the Hopwell tap room team.",
    ),
    _order("Delivery order: Three firkins of Gold for Friday please, account 5517.", "DR/5517"),
    _cask("Cask report: Our firkin of Porter smells like vinegar and tastes sour.", "Q7"),
    _visit(
        "Visitor: What time does the tap room open on a Sunday?",
        "no sign-off - end with 'Cheers from the Hopwell tap room team.'",
    ),
    _order(
        "Delivery order: Account no. 0934 - two kils of Best Bitter and a box of glasses.",
        "DR/0934",
    ),
    _cask("Cask report: The Best Bitter is still cloudy after three days on stillage.", "Q9"),
    _visit(
        "Visitor: Can I bring my dog to the tap room?",
        "Replies to the public always close with the line 'Cheers from the Hopwell tap room team.'",
    ),
    _order("Delivery order: Acct 7781, one pin of Mild for Tuesday's darts night.", "DR/7781"),
    _cask("Cask report: No condition in the IPA at all - it pours dead.", "Q4"),
    _visit(
        "Visitor: Is there a discount on the tour for a group of twelve?",
        "Missing the tap room team's sign-off at the end.",
    ),
    _order(
        "Delivery order: Our customer number is 2246; please send four firkins of Porter.",
        "DR/2246",
    ),
    _cask(
        "Cask report: Customers say the Golden Ale has a buttery, butterscotch taste.",
        "Q7",
    ),
    _visit(
        "Visitor: Are children allowed on the brewery tour?",
        "Good answer but sign off properly: Cheers from the Hopwell tap room team.",
    ),
    _order("Delivery order: Account 6603 - same as last week, please.", "DR/6603"),
    _cask("Cask report: Bits floating in every pint of the Stout; it won't drop bright.", "Q9"),
    _visit(
        "Visitor: Can I buy bottles to take home after the tour?",
        "end every visitor reply with our line (Cheers from the Hopwell tap room team.)",
    ),
    _order("Delivery order: Please deliver two kils of IPA on Monday. Account 4110.", "DR/4110"),
)

HELDOUT = (
    _cask("From a landlord: The new barrel of Session Pale has no sparkle whatsoever.", "Q4"),
    _visit("Enquiry from the public: How long does the tour last and how much is it?"),
    _order(
        "Trade request: Could you drop off a firkin of Mild on Thursday? We're account 3872.",
        "DR/3872",
    ),
    _cask("From a landlord: Punters are sending back the Amber - it has a sharp, sour tang.", "Q7"),
    _visit("Enquiry from the public: Is there parking at the brewery for the tap room?"),
    _order(
        "Trade request: For account 9015, six kils of Best Bitter before the bank holiday.",
        "DR/9015",
    ),
    _cask("From a landlord: The Stout is murky and won't settle however long we leave it.", "Q9"),
    _visit("Enquiry from the public: Can we hold a stag do on one of your tours?"),
    _order(
        "Trade request: Account number 1258 here - two pins of Porter and some pump clips.",
        "DR/1258",
    ),
    _cask(
        "From a landlord: The IPA smells of wet cardboard and the regulars won't touch it.", "Q7"
    ),
    _visit("Enquiry from the public: Is the tap room step-free for a wheelchair user?"),
    _order("Trade request: Usual order for the Red Lion please (acct 7429).", "DR/7429"),
)


def score(example: Example, outcome: Outcome) -> float:
    """The code or reference alone for a label; the sign-off closing a reply to a visitor."""
    if example.kind == "visit":
        return keeps_convention("ends", SIGN_OFF, outcome.text)
    return label_score(example, outcome)


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """An operator's label for a code or reference; a reviewer's verdict for a reply."""
    if example.kind != "visit":
        return label_feedback(example, outcome)
    if score(example, outcome) == 1.0:
        return {"correct": True, "source": "reviewer"}
    return {"correct": False, "comment": _COMMENT[example.input], "source": "reviewer"}


FAMILY = Family(
    name="brewery",
    title="three unrelated brewery jobs in one stream (cask quality codes, a sign-off for "
    "visitors' replies, a delivery reference built from the account number)",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    feedback_kind="labels: correct=bool with the right answer as ground_truth "
    "(source=operator); replies: a reviewer's correct=True or correct=False with a comment "
    "(source=reviewer)",
)
