"""Family 23 (SEALED: not run during development): leisure-centre messages to eight staff codes.

A leisure centre's (gym, pool, sports hall) inbox assistant passes each
member's message to one of eight members of staff by the centre's own codes
(``7GQ2``, ``K3VW``, ...): letters and digits that say nothing about what each
person handles. The app's prompt lists every code with a neutral line (the
person's name and phone extension), never which messages go there, so the
agent cannot guess any of them. Two training runs per code (16), each with an
operator's label as the docs say labels are sent: right or wrong with the right
code as ``ground_truth`` and ``source="operator"``. Held-out: two messages per
code (16) describing the same needs in other words, with none of the key nouns
of that code's training messages ("my subscription stopped and restarted after
my knee operation" where training said "freeze" and "membership ... on hold").
Scoring: the reply must be the code alone (case, spaces, quotes and a final
full stop aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from benchmarks.blind._family import Example, Family, label_feedback, label_score

SYSTEM_PROMPT = (
    "You are the inbox assistant of Dunmore Leisure Centre. Pass each member's message to one "
    "member of staff by their code and reply with the code only.\n"
    "Codes:\n"
    "- 7GQ2: Priya Nandakumar, ext. 301\n"
    "- K3VW: Tom Eagleton, ext. 302\n"
    "- X8MB: Siobhan Reilly, ext. 304\n"
    "- 2PLN: Marcus Obi, ext. 307\n"
    "- D6RJ: Hannah Lindqvist, ext. 310\n"
    "- Y5HT: Gareth Pryce, ext. 311\n"
    "- M9CZ: Aisha Rahman, ext. 315\n"
    "- 4FKS: Dev Malhotra, ext. 318"
)

CODES = {
    "freeze": "7GQ2",
    "swimkids": "K3VW",
    "coaching": "X8MB",
    "lost": "2PLN",
    "payments": "D6RJ",
    "faults": "Y5HT",
    "hire": "M9CZ",
    "classes": "4FKS",
}

RULES = """Routing (reply with the code only):
- 7GQ2: putting a membership on hold for a while (injury, illness, travel, pregnancy) and
  restarting it later.
- K3VW: children's swimming lessons: places, levels and stages, ages, moving a child up.
- X8MB: personal training: one-to-one sessions with a trainer or instructor, a tailored
  exercise plan, prices of personal sessions.
- 2PLN: lost property: anything a member left behind or lost at the centre.
- D6RJ: payments: direct debits, amounts taken from a bank account, the price or rate
  charged, refunds of charges.
- Y5HT: faulty or broken equipment and facilities: gym machines, sauna, showers, lights,
  lockers that do not work, water that is too cold.
- M9CZ: hiring a hall, studio or room for a private event: parties, club dinners,
  community or charity events.
- 4FKS: booking a place on a group fitness class (spin, yoga, Pilates, Zumba, ...),
  waiting lists for full classes.
"""


def _ex(kind: str, text: str) -> Example:
    return Example(input=text, kind=kind, answer=CODES[kind])


TRAIN = (
    _ex("freeze", "Can I freeze my membership while I'm travelling for two months?"),
    _ex("swimkids", "Are there spaces in the Saturday swimming lessons for my 6-year-old?"),
    _ex("coaching", "How much does a personal trainer cost per session?"),
    _ex("lost", "I left my goggles in the changing room yesterday."),
    _ex("payments", "Why was my direct debit taken twice this month?"),
    _ex("faults", "The third treadmill from the left has a torn belt."),
    _ex("hire", "Can I hire the sports hall for my son's 10th birthday party?"),
    _ex("classes", "How do I book a place on the Tuesday spin class?"),
    _ex("freeze", "I've broken my wrist, can my gym membership be put on hold until it heals?"),
    _ex("swimkids", "My daughter wants to move up a level in her swim classes."),
    _ex("coaching", "I'd like someone to write me a workout programme and coach me."),
    _ex("lost", "Has anyone handed in a blue water bottle from the spin studio?"),
    _ex("payments", "I was charged the peak rate but I only come in off-peak."),
    _ex("faults", "The sauna has been cold all week."),
    _ex("hire", "We'd like to book the dance studio for our running club's annual dinner."),
    _ex("classes", "The yoga class was full, can I join the waiting list?"),
)

HELDOUT = (
    _ex(
        "freeze",
        "My surgeon says no exercise for six weeks after my knee operation; can my "
        "subscription stop and then restart afterwards?",
    ),
    _ex("freeze", "I'm expecting a baby in May; is there a way to pause paying until I'm back?"),
    _ex(
        "swimkids",
        "My twins splash about happily but can't do a length yet; is there a beginners' group "
        "for under-eights?",
    ),
    _ex("swimkids", "At what age can my little boy start learning to paddle with an instructor?"),
    _ex(
        "coaching", "I want an instructor dedicated just to me twice a week to help me lose weight."
    ),
    _ex(
        "coaching",
        "Can somebody design exercises tailored to my bad back and supervise me doing them?",
    ),
    _ex("lost", "My wedding ring must have slipped off by the lockers on Tuesday."),
    _ex("lost", "I think my car keys fell out of my bag near the squash courts; were they found?"),
    _ex("payments", "My bank statement shows two withdrawals from you on the 1st."),
    _ex("payments", "The amount collected from my account went up without any warning."),
    _ex("faults", "One of the rowing machines makes a horrible grinding sound."),
    _ex("faults", "There's no hot water in the men's showers again."),
    _ex(
        "hire",
        "Our church group wants the big room on a Sunday afternoon for a gathering of 60 people; "
        "what would that cost?",
    ),
    _ex("hire", "Could we rent space at the centre for a charity quiz night?"),
    _ex("classes", "Is there still room in tomorrow morning's Pilates session?"),
    _ex("classes", "I want to reserve a spot at Thursday's Zumba."),
)


FAMILY = Family(
    name="dispatch",
    title="leisure-centre messages to eight staff codes the app's prompt lists by name only",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=label_feedback,
    feedback_kind="correct=bool with the right code as ground_truth (source=operator)",
)
