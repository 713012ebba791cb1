"""Family 11 (SEALED: not run during development): insurance customers' messages to queue codes.

An insurer's inbox assistant routes each customer message to one of seven
internal queues. The queue codes are the insurer's own numbering (``Q-17`` for a
new loss, ``Q-04`` for a claim already open, ...), so the words of a message
cannot give them away, and two pairs of neighbouring kinds go to different
queues (reporting a new loss and chasing one already reported; changing a
policy and ending it). Two labelled runs per code are given for training. The
held-out messages are the same kinds written in other words: they avoid the
distinctive nouns and verbs of their kind's training messages ("my van was
broken into" where training said "crashed" and "claim"), so a rule listing the
training words misses them and a rule naming the kind of message finds them.
Feedback is an operator's correction, sent as the docs say an operator's labels
are: right or wrong with the right code as ``ground_truth`` and
``source="operator"``. Scoring: the reply must be the code alone (case,
spaces, quotes and a final full stop aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from benchmarks.blind._family import Example, Family, label_feedback, label_score

SYSTEM_PROMPT = (
    "You are the inbox assistant of Harwell Mutual Insurance. Route each customer message to "
    "its internal queue. Reply with the queue code only."
)

CODES = {
    "new_loss": "Q-17",
    "claim_progress": "Q-04",
    "ending": "Q-31",
    "policy_change": "Q-22",
    "new_cover": "Q-09",
    "payment": "Q-45",
    "complaint": "Q-12",
}

RULES = """Queue codes (reply with the code only):
- Q-17: a new loss or damage being reported for the first time: an accident, a theft or
  break-in, storm, fire, flood or leak damage, anything the customer now wants paid for.
- Q-04: a loss already reported: asking how an open claim is going, when it will be decided or
  paid, chasing an assessor or loss adjuster.
- Q-31: ending cover: cancelling a policy, not renewing it, stopping it from a date.
- Q-22: changing a policy that stays in force: new address, new vehicle, adding or removing a
  driver, correcting a name or other personal details.
- Q-09: a price or quote for new cover the customer does not yet have.
- Q-45: paying for cover: premiums, direct debits, instalments, missed or wrong payments,
  payment dates.
- Q-12: a complaint about how the customer was treated: staff behaviour, broken promises,
  slow or poor handling, a request to escalate.
"""


def _ex(kind: str, text: str) -> Example:
    return Example(input=text, kind=kind, answer=CODES[kind])


TRAIN = (
    _ex(
        "new_loss",
        "I crashed into a bollard reversing out of my drive this morning and the bumper is "
        "smashed. I need to make a claim.",
    ),
    _ex(
        "claim_progress",
        "I submitted a claim for my stolen bike three weeks ago, is there any update?",
    ),
    _ex("ending", "Please cancel my car insurance from the end of this month, I've sold the car."),
    _ex("policy_change", "I've moved house, please update the address on my policy."),
    _ex("new_cover", "How much would it cost to insure a 2019 Toyota Yaris for a new driver?"),
    _ex("payment", "My direct debit failed this month, how do I pay the premium now?"),
    _ex(
        "complaint",
        "I want to make a formal complaint about how rude your call centre agent was to me.",
    ),
    _ex(
        "new_loss",
        "A storm blew tiles off our roof last night and rain is coming into the bedroom. How do "
        "I claim?",
    ),
    _ex(
        "claim_progress",
        "What's happening with claim CL-88213? The assessor visited last Tuesday.",
    ),
    _ex("ending", "I don't want my home policy to renew next year. Stop it at renewal please."),
    _ex("policy_change", "Can you add my daughter as a named driver on my car insurance?"),
    _ex("new_cover", "I'd like a quote for buildings and contents insurance on a three-bed house."),
    _ex("payment", "Can I switch from paying annually to monthly instalments?"),
    _ex(
        "complaint",
        "Your handling of my claim has been a disgrace and I'm very unhappy with the service.",
    ),
)

HELDOUT = (
    _ex(
        "new_loss",
        "Somebody broke into our house while we were away and took the TV and a laptop. What do "
        "I do to get this covered?",
    ),
    _ex(
        "new_loss",
        "A pipe burst under the sink and flooded the kitchen floor, I'd like to report the damage.",
    ),
    _ex(
        "claim_progress",
        "It's been a month since the loss adjuster came round about our water leak and I still "
        "have no decision. Where are things at?",
    ),
    _ex(
        "claim_progress",
        "When will the payout for my windscreen repair, reference WS-4410, be settled? Nobody "
        "has told me anything.",
    ),
    _ex(
        "ending",
        "We're moving in with my parents, so we won't need the contents cover any more. Please "
        "close it.",
    ),
    _ex(
        "ending",
        "I found a cheaper deal elsewhere, so terminate my van cover from 1 June.",
    ),
    _ex(
        "policy_change",
        "I've swapped my Fiesta for a Golf, registration KX19 ZPL. Can the documents show the "
        "new vehicle?",
    ),
    _ex(
        "policy_change",
        "My surname changed when I got married and the paperwork still has my old one.",
    ),
    _ex(
        "new_cover",
        "Do you offer travel cover for a family of four going skiing in February? What would the "
        "price be?",
    ),
    _ex(
        "new_cover",
        "We're getting a puppy next week. What would a pet plan from you set me back a month?",
    ),
    _ex(
        "payment",
        "My bank says you took the money twice on the 3rd. Can you look into the double charge?",
    ),
    _ex(
        "payment",
        "I'm short this month, could the amount due on the 15th be pushed back a couple of weeks?",
    ),
    _ex(
        "complaint",
        "I was promised a call back three times and never got one. This is unacceptable and I "
        "want it escalated to a manager.",
    ),
    _ex(
        "complaint",
        "The person I spoke to yesterday hung up on me mid-sentence. I'm appalled and want this "
        "on record.",
    ),
)


FAMILY = Family(
    name="intents",
    title="insurance customers' messages to seven arbitrary queue codes, held out in other words",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=label_feedback,
    feedback_kind="correct=bool with the right queue code as ground_truth (source=operator)",
)
