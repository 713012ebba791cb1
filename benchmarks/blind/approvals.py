"""Family 17 (SEALED: not run during development): vet clinic messages, reviewers' verdicts.

A veterinary clinic's reception assistant routes each client message to one of
seven teams by the clinic's own codes (``BV-03`` front desk, ``BV-47`` duty
vet, ...). The app's prompt lists the codes with the team's name alone, not
which messages go where, so the agent can guess some (a repeat prescription to
the dispensary) and not others (a question about stitches after an operation
goes to the nurse team, not the duty vet; a vaccination certificate to the
records office, not the front desk). Feedback is mostly a reviewer's verdict
alone, as a review tool sends it: ``correct=True`` or ``correct=False`` with
``source="reviewer"``, no right code and no comment. One training run per code
(7 of 21) instead gets an operator's label: right or wrong with the right code
as ``ground_truth`` and ``source="operator"``. Held-out: two messages per code
in other words. Scoring: the reply must be the code alone (case, spaces,
quotes and a final full stop aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from typing import Any

from benchmarks.blind._family import Example, Family, Outcome, label_score

SYSTEM_PROMPT = (
    "You are the reception assistant of Brookside Veterinary Clinic. Route each client "
    "message to one team by its code and reply with the code only.\n"
    "Codes:\n"
    "- BV-03: front desk\n"
    "- BV-18: nurse team\n"
    "- BV-26: dispensary\n"
    "- BV-31: accounts\n"
    "- BV-47: duty vet\n"
    "- BV-52: records office\n"
    "- BV-64: client care"
)

CODES = {
    "booking": "BV-03",
    "aftercare": "BV-18",
    "medicine": "BV-26",
    "billing": "BV-31",
    "emergency": "BV-47",
    "records": "BV-52",
    "feedback": "BV-64",
}

RULES = """Routing (reply with the code only):
- BV-03: booking, moving or cancelling a routine appointment (check-up, vaccination,
  nail clip, dental check).
- BV-18: questions about a pet's recovery after an operation or treatment at the clinic
  (stitches, wound, bandage, cone, eating after surgery), when it is not an emergency.
- BV-26: repeat prescriptions and ordering medicines, flea, tick and worming treatments.
- BV-31: invoices, payments, payment plans and the cost of treatment.
- BV-47: emergencies happening now: poisoning or eating something toxic, heavy bleeding,
  collapse, fits, trouble breathing, hit by a car.
- BV-52: paperwork: vaccination certificates, medical history sent to or from another
  practice, pet passports, microchip details.
- BV-64: complaints and compliments about the clinic, its staff or a visit.
"""

_OPERATOR: set[str] = set()


def _ex(kind: str, text: str, *, operator: bool = False) -> Example:
    if operator:
        _OPERATOR.add(text)
    return Example(input=text, kind=kind, answer=CODES[kind])


TRAIN = (
    _ex("booking", "Can I book Bella in for her yearly check-up next week?", operator=True),
    _ex("aftercare", "Milo was neutered on Monday and one of his stitches looks loose."),
    _ex("medicine", "I need a repeat prescription of Rex's heart tablets."),
    _ex("emergency", "My dog just ate a whole bar of dark chocolate, what do I do?"),
    _ex("records", "Could you email me Luna's vaccination certificate for the kennels?"),
    _ex("billing", "I think I was charged twice for Oscar's X-ray last Thursday.", operator=True),
    _ex("feedback", "I want to complain about how long we waited in reception yesterday."),
    _ex("booking", "Please move Coco's vaccination appointment from Friday to Tuesday."),
    _ex(
        "aftercare",
        "Since her dental surgery Daisy won't eat her dry food, is that normal?",
        operator=True,
    ),
    _ex("medicine", "Can I order three months of flea and worming treatment for two cats?"),
    _ex("emergency", "Our cat is struggling to breathe and her gums look pale.", operator=True),
    _ex("records", "We're moving to Leeds, please send Max's history to his new vet."),
    _ex("billing", "Can I pay the bill for Toby's operation in monthly instalments?"),
    _ex("feedback", "Nurse Priya was wonderful with our nervous rabbit, please thank her."),
    _ex("booking", "I need to cancel Ziggy's nail clip appointment tomorrow."),
    _ex("aftercare", "How long does Rocky have to wear the cone after his operation?"),
    _ex("medicine", "Bramble's allergy tablets are running out, can I get more?", operator=True),
    _ex("emergency", "A car hit our dog and his leg is bleeding badly."),
    _ex(
        "records",
        "The microchip is still registered to my old address, can you update it?",
        operator=True,
    ),
    _ex("billing", "How much was the blood test on Pepper's last invoice?"),
    _ex("feedback", "The vet was rude to my daughter during our visit.", operator=True),
)

HELDOUT = (
    _ex("booking", "Is there a slot on Saturday morning for Nala's booster jab?"),
    _ex("booking", "We can't make Thursday's routine visit for Biscuit, can we do next week?"),
    _ex("aftercare", "The wound where Honey had her lump removed is a bit red, should I worry?"),
    _ex("aftercare", "Teddy keeps chewing the dressing on his paw since you took the growth off."),
    _ex("medicine", "Please have Loki's usual arthritis medication ready for me to collect."),
    _ex("medicine", "We need another pack of tick drops for the spaniel."),
    _ex("billing", "The amount on my receipt doesn't match the estimate I was given."),
    _ex("billing", "Do you take card over the phone for what I owe from Ruby's visit?"),
    _ex("emergency", "My puppy found some rat poison in the shed and swallowed it."),
    _ex("emergency", "Our old collie has collapsed and is shaking on the floor right now."),
    _ex("records", "I need the paperwork to take Ginger abroad on holiday in June."),
    _ex("records", "Our previous practice needs a copy of Simba's treatment notes."),
    _ex("feedback", "Nobody called me back about Winnie's results, this isn't good enough."),
    _ex("feedback", "Just wanted to say the whole team was so kind when we came in on Sunday."),
)


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """A reviewer's verdict alone; on the operator's runs, the right code as well."""
    right = label_score(example, outcome) == 1.0
    if example.input in _OPERATOR:
        return {"correct": right, "ground_truth": example.answer, "source": "operator"}
    return {"correct": right, "source": "reviewer"}


FAMILY = Family(
    name="approvals",
    title="vet clinic messages to seven team codes, judged mostly by a reviewer's verdict alone",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=feedback,
    feedback_kind="correct=bool alone from a reviewer (source=reviewer) on 14 of 21 runs; "
    "correct=bool with the right code as ground_truth (source=operator) on 7",
)
