"""Family 13 (SEALED: not run during development): energy customers' replies judged by remarks.

An energy supplier's assistant (no tools) answers customers' messages. Five
kinds of message each have a house convention a reviewer checks: the account
number quoted back (meter readings), an opening (gas smells and carbon monoxide
alarms), a closing (tariff changes), or a required sentence (a bill disputed, a
customer struggling to pay). Feedback is a review tool's: ``correct=True`` for a
reply that keeps its kind's convention, else ``correct=False`` with a
reviewer's comment and no reference reply (no ``ground_truth``), sent with
``source="reviewer"``. Several reviewers wrote the comments, so their wording
differs from run to run: some are terse ("missing the account number"), some
long, some name the kind of message, some do not. Three training runs get no
comment at all when wrong (``correct=False`` alone), as production often gives;
every kind still has a commented run. Scoring checks the convention
deterministically (the account number, the phrase, the opening or the closing,
case and spaces aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from typing import Any

from benchmarks.blind._family import Example, Family, Outcome, keeps_convention

SYSTEM_PROMPT = (
    "You are the customer assistant of Brightwater Energy, a gas and electricity supplier. "
    "Reply to the customer's message in a short, helpful paragraph."
)

RULES = """House conventions for replies to customers:
- Meter readings: quote the customer's account number back, e.g. "Your reading for account
  BW-204817 is on file."
- A gas smell, a carbon monoxide alarm or any other safety worry: start the reply with
  "Safety first: call the emergency line on 0800 111 999."
- A bill that looks wrong or too high: include "We will check your bill within 10 working days."
- Changing tariff or plan: end the reply with "Reply SWITCH to confirm."
- A customer struggling to pay or behind on payments: include "Our Help Fund team can be
  reached on 0800 316 2020."
"""

# kind: (how the reply is checked, the phrase; "{account}" is the message's account number)
CHECKS: dict[str, tuple[str, str]] = {
    "reading": ("value", "{account}"),
    "safety": ("starts", "safety first"),
    "bill": ("contains", "10 working days"),
    "tariff": ("ends", "reply switch to confirm"),
    "hardship": ("contains", "help fund"),
}

_GOLD = {
    "reading": "Thank you, your reading for account {account} is on file and your next bill "
    "will use it.",
    "safety": "Safety first: call the emergency line on 0800 111 999. Open the windows, do not "
    "use switches or flames, and leave the property if you can.",
    "bill": "Sorry for the surprise. We will check your bill within 10 working days and let you "
    "know what we find.",
    "tariff": "Yes, you can move to that tariff from your next billing date. Reply SWITCH to "
    "confirm.",
    "hardship": "I am sorry to hear that. Our Help Fund team can be reached on 0800 316 2020 and "
    "can agree a plan that works for you.",
}

_ACCOUNT: dict[str, str] = {}
_COMMENT: dict[str, str | None] = {}


def _ex(kind: str, text: str, *, account: str = "", comment: str | None = None) -> Example:
    _ACCOUNT[text] = account
    _COMMENT[text] = comment.format(account=account) if comment else None
    return Example(input=text, kind=kind, answer=_GOLD[kind].format(account=account))


TRAIN = (
    _ex(
        "reading",
        "I've read my meter today: 04512 day, 01877 night. Account BW-204817.",
        account="BW-204817",
        comment="missing the account number",
    ),
    _ex(
        "safety",
        "I can smell gas in the kitchen, what should I do?",
        comment="Gas smell: the reply must open with 'Safety first:' and the emergency number "
        "(0800 111 999), before anything else. This one buried it at the end.",
    ),
    _ex(
        "bill",
        "My bill this quarter is double what it normally is, that can't be right.",
        comment="Should have said we'll check the bill within 10 working days.",
    ),
    _ex(
        "tariff",
        "I'd like to move to your fixed tariff.",
        comment="End with Reply SWITCH to confirm.",
    ),
    _ex(
        "hardship",
        "I lost my job and can't afford this month's energy payment.",
        comment="When a customer tells us they are struggling to pay, the reply has to give "
        "them the Help Fund line: 'Our Help Fund team can be reached on 0800 316 2020.' We "
        "are required to signpost it every time.",
    ),
    _ex(
        "reading",
        "Here's my gas reading for March, 7723. My account is BW-330962.",
        account="BW-330962",
    ),
    _ex(
        "safety",
        "Our carbon monoxide alarm went off twice last night.",
        comment="Wrong opening. Start with 'Safety first: call the emergency line on "
        "0800 111 999.'",
    ),
    _ex("bill", "I'm disputing the £412 charge on my latest statement."),
    _ex(
        "tariff",
        "Can I change to the green energy plan?",
        comment="Tariff changes: the last line must be 'Reply SWITCH to confirm.' so the "
        "system can pick up the customer's answer. It wasn't there.",
    ),
    _ex(
        "hardship",
        "I'm behind on my payments and worried about being cut off.",
        comment="no Help Fund line",
    ),
    _ex(
        "reading",
        "Submitting electricity reading 58120 for account BW-118405.",
        account="BW-118405",
        comment="When a customer sends a meter reading the reply repeats their account number "
        "({account} here), so they can see the reading went on the right account.",
    ),
    _ex("tariff", "Is the Economy 7 tariff cheaper for me? If so I want it."),
)

HELDOUT = (
    _ex(
        "reading",
        "The numbers on the dial today are 31094, account BW-552031.",
        account="BW-552031",
    ),
    _ex(
        "reading",
        "Sending this month's figures for BW-760148: electric 12004, gas 3381.",
        account="BW-760148",
    ),
    _ex(
        "reading",
        "Photo of the display attached, it shows 88210. Customer ref BW-409926.",
        account="BW-409926",
    ),
    _ex("safety", "There's a rotten-egg odour near our boiler and I'm a bit scared."),
    _ex("safety", "The detector in the hallway is beeping and its screen says CO."),
    _ex(
        "bill",
        "The amount you're asking for in June looks far too high, we were on holiday for three "
        "weeks.",
    ),
    _ex("bill", "I think the last invoice is wrong, it doesn't match what we used."),
    _ex(
        "bill", "Your latest demand for £287 is way above what we usually pay, please look into it."
    ),
    _ex("tariff", "Do you have a cheaper deal I could go on? Sign me up for it."),
    _ex("tariff", "I want the 100% renewable option instead of what I'm on now."),
    _ex(
        "hardship",
        "Money is really tight since my hours were cut, I don't know how I'll cover what's due "
        "next.",
    ),
    _ex("hardship", "We're a month in arrears and I'm scared you'll disconnect us."),
)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the reply keeps its kind's convention."""
    how, phrase = CHECKS[example.kind]
    return keeps_convention(how, phrase, outcome.text, _ACCOUNT.get(example.input))


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """A reviewer's verdict: right, or wrong with that run's comment when it has one."""
    if score(example, outcome) == 1.0:
        return {"correct": True, "source": "reviewer"}
    comment = _COMMENT[example.input]
    if comment is None:
        return {"correct": False, "source": "reviewer"}
    return {"correct": False, "comment": comment, "source": "reviewer"}


FAMILY = Family(
    name="remarks",
    title="replies to energy customers, five house conventions, varied or no reviewer comments",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    feedback_kind="correct=True, or correct=False with a varied reviewer comment or none "
    "(source=reviewer)",
)
