"""Family 14 (SEALED: not run during development): meal-kit requests to the customer's own words.

A meal-kit subscription's inbox assistant routes each customer message to one
of six actions, and the actions are ordinary words customers type themselves:
``refund`` (money back for a problem with a delivered box), ``skip`` (one
coming week's box left out, the subscription goes on), ``pause`` (deliveries
stopped for a stretch of weeks, then resumed), ``cancel`` (the subscription
ended for good), ``swap`` (other meals in a coming box) and ``reschedule``
(another delivery day or time slot). Most training messages hold the action
word itself ("I want a refund ..."), as real customers write; the held-out
messages say the same needs without it and in other words ("I'd like my money
back"). Two or three labelled runs per action. Feedback is an operator's
correction, sent as the docs say an operator's labels are: right or wrong with
the right action as ``ground_truth`` and ``source="operator"``. Scoring: the
reply must be the action alone (case, spaces, quotes and a final full stop
aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from benchmarks.blind._family import Example, Family, label_feedback, label_score

SYSTEM_PROMPT = (
    "You are the inbox assistant of Greenfork Kitchen, a weekly meal-kit subscription. "
    "Read the customer's message and reply with the action to take, one word only: refund, "
    "skip, pause, cancel, swap or reschedule."
)

RULES = """Actions (reply with the word only):
- refund: money back for a problem with a box already delivered (missing, spoiled, damaged
  items, a wrong charge).
- skip: leave out one coming week's box; the subscription carries on after it.
- pause: stop deliveries for several weeks or until a date, then start again.
- cancel: end the subscription for good.
- swap: change the meals or recipes in a coming box.
- reschedule: deliver on another day or in another time slot.
"""

ACTIONS = ("refund", "skip", "pause", "cancel", "swap", "reschedule")


def _ex(action: str, text: str) -> Example:
    return Example(input=text, kind=action, answer=action)


TRAIN = (
    _ex("refund", "I want a refund for the chicken, it arrived warm and smelled off."),
    _ex("skip", "Please skip next week's box, we're away."),
    _ex("pause", "Pause my subscription for a month, I'm travelling for work."),
    _ex("cancel", "Cancel my subscription please, it's too expensive for us now."),
    _ex("swap", "Can I swap the beef stew for the veggie curry in my next box?"),
    _ex("reschedule", "I need to reschedule my delivery to Saturday morning."),
    _ex("refund", "The salmon was missing from my box, please refund it."),
    _ex("skip", "Can I skip the delivery on the 14th only? The week after is fine."),
    _ex("pause", "Can you pause deliveries until after the summer holidays?"),
    _ex("cancel", "I want to cancel, we're moving abroad for good."),
    _ex("swap", "I'd like to swap two recipes this week, my kids won't eat fish."),
    _ex("reschedule", "Can we reschedule deliveries to the evening slot from now on?"),
    _ex("refund", "You charged me twice for last week's box, I need a refund."),
    _ex("skip", "I'd like to skip this Friday's box but keep the rest coming."),
    _ex("pause", "We'll be away for six weeks, please hold my boxes until we're back."),
    _ex("cancel", "How do I cancel my account completely? I won't need it anymore."),
    _ex("swap", "Could you change the pasta dish in Thursday's box to the salad?"),
    _ex("reschedule", "Please reschedule Tuesday's box to Wednesday, nobody's home."),
)

HELDOUT = (
    _ex(
        "refund",
        "Half the vegetables in yesterday's delivery were mouldy, I'd like my money back for them.",
    ),
    _ex("refund", "The yoghurt pots burst and ruined the whole bag, I expect to be reimbursed."),
    _ex(
        "skip",
        "We're at a wedding the week of the 22nd, so don't send anything that one week; carry "
        "on as normal after.",
    ),
    _ex("skip", "Leave out the coming Monday's order; the weeks after that as usual."),
    _ex(
        "pause",
        "I'm going into hospital for about two months; stop the boxes for now and start them "
        "again in March.",
    ),
    _ex("pause", "Suspend my plan temporarily until September, then resume it."),
    _ex("cancel", "Close my account permanently, I won't be ordering again."),
    _ex("cancel", "End my membership for good, we've decided meal kits aren't for us."),
    _ex("swap", "Instead of the lamb in this week's box, could I have the mushroom risotto?"),
    _ex("swap", "Replace the prawn dish in my upcoming order with something vegetarian."),
    _ex("reschedule", "Could my boxes come on Thursdays instead of Mondays from now on?"),
    _ex("reschedule", "Is it possible to move my drop-off window from mornings to after 6pm?"),
)


FAMILY = Family(
    name="plainwords",
    title="meal-kit messages to six actions that are the customers' own words (refund, skip, ...)",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=label_feedback,
    feedback_kind="correct=bool with the right action as ground_truth (source=operator)",
)
