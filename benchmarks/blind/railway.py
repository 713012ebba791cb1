"""Family 26 (SEALED: not run during development): train operator's messages to eight staff codes.

A regional train operator's customer-relations inbox assistant passes each
passenger's message to one of eight members of staff by the operator's own
codes (``W3NQ``, ``8KTE``, ...): letters and digits that say nothing about what
each person handles. The app's prompt lists every code with a neutral line (the
person's name and the office they work from), never which messages go there,
so the agent cannot guess any of them. Two training runs per code (16), each
with an operator's label as the docs say labels are sent: right or wrong with
the right code as ``ground_truth`` and ``source="operator"``. Held-out: two
messages per code (16) describing the same needs in other words, with none of
the key nouns of that code's training messages ("my folding Brompton" where
training said "bike" and "bicycle"). Scoring: the reply must be the code alone
(case, spaces, quotes and a final full stop aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from benchmarks.blind._family import Example, Family, label_feedback, label_score

SYSTEM_PROMPT = (
    "You are the customer-relations inbox assistant of Pennine Rail, a regional train "
    "operator. Pass each passenger's message to one member of staff by their code and reply "
    "with the code only.\n"
    "Codes:\n"
    "- W3NQ: Eleanor Marsh, Leeds office\n"
    "- 8KTE: Kwame Boateng, Leeds office\n"
    "- J5RV: Ruth Calloway, Carlisle office\n"
    "- C2XH: Imran Siddiqui, York office\n"
    "- 6MFZ: Fiona Gallagher, York office\n"
    "- Y9DL: Owen Prothero, Lancaster office\n"
    "- P4HU: Mei Lin Tan, Lancaster office\n"
    "- T7BK: Declan Murphy, Carlisle office"
)

CODES = {
    "delay": "W3NQ",
    "assist": "8KTE",
    "lost": "J5RV",
    "season": "C2XH",
    "penalty": "6MFZ",
    "bikes": "Y9DL",
    "group": "P4HU",
    "staff": "T7BK",
}

RULES = """Routing (reply with the code only):
- W3NQ: money owed for a journey that ran late or did not run at all (delays,
  cancellations, missed connections).
- 8KTE: help for passengers who need it at stations or getting on and off trains
  (wheelchairs, ramps, sight loss, limited mobility, guiding between platforms).
- J5RV: lost property: anything a passenger left or lost on a train or at a station.
- C2XH: season tickets and other tickets for regular travel (weekly, monthly, yearly):
  buying, renewing, refunds of the unused part, photocards.
- 6MFZ: penalty fares and on-the-spot charges for travelling without a valid ticket:
  disputing or appealing them.
- Y9DL: taking a bicycle on a train (any kind: folding, tandem, electric): spaces and
  reservations.
- P4HU: travelling as a large party (ten or more: schools, clubs, colleagues): booking
  together, reduced group prices.
- T7BK: a member of staff's behaviour: complaints about it or thanks and praise for it.
"""


def _ex(kind: str, text: str) -> Example:
    return Example(input=text, kind=kind, answer=CODES[kind])


TRAIN = (
    _ex("delay", "My 08:12 to Leeds was 40 minutes late, can I claim compensation?"),
    _ex("assist", "I use a wheelchair; can someone meet me with a ramp at Skipton on Friday?"),
    _ex("lost", "I left my laptop bag on the 14:05 from Carlisle."),
    _ex("season", "How do I renew my annual season ticket from Harrogate to York?"),
    _ex("penalty", "I got a penalty fare because the ticket machine was broken. How do I appeal?"),
    _ex("bikes", "Can I reserve a space for my bike on the Saturday 09:00 to Whitby?"),
    _ex("group", "We're a group of 25 people going to York, is there a group discount?"),
    _ex("staff", "The conductor on the Morecambe service was very rude to my son."),
    _ex(
        "delay",
        "The train was cancelled and I got home an hour late. How do I get money back for the "
        "delay?",
    ),
    _ex("assist", "My elderly mother needs assistance getting on board at Lancaster."),
    _ex("lost", "Has anyone handed in a black umbrella found on the Bradford train?"),
    _ex(
        "season",
        "I've changed jobs, can I get a refund on the rest of my monthly season ticket?",
    ),
    _ex("penalty", "The inspector fined me even though I had bought an e-ticket on my phone."),
    _ex("bikes", "Do I need to book ahead to bring a bicycle on the train?"),
    _ex(
        "group",
        "I'm organising a school trip for 40 pupils to Scarborough, can we book together?",
    ),
    _ex("staff", "I'd like to thank the guard who helped me find a seat yesterday."),
)

HELDOUT = (
    _ex(
        "delay",
        "We sat outside Huddersfield for ages and arrived well after the timetabled time; am I "
        "owed anything?",
    ),
    _ex(
        "delay",
        "The 17:40 service never turned up and the next one only got me in after eight; what "
        "am I entitled to?",
    ),
    _ex(
        "assist",
        "I'm partially sighted and would like someone to guide me between platforms at Preston.",
    ),
    _ex(
        "assist",
        "After my hip operation I can't manage the step up into the carriage; can somebody be "
        "there for me at Settle?",
    ),
    _ex(
        "lost",
        "My reading glasses must have slipped under a seat somewhere between Keighley and Leeds; "
        "were they picked up?",
    ),
    _ex("lost", "I got off at Appleby without my coat; is it being kept somewhere?"),
    _ex(
        "season",
        "I go to work on the same route every weekday; is there a yearly pass that works out "
        "cheaper?",
    ),
    _ex(
        "season",
        "I've moved house and no longer need my twelve-month Ilkley-Leeds travelcard; can I hand "
        "it back for what's left on it?",
    ),
    _ex(
        "penalty",
        "A revenue officer issued me a £100 notice at Wakefield but the barrier wasn't working; "
        "I want to dispute it.",
    ),
    _ex(
        "penalty",
        "I was made to pay a £20 charge on board because my railcard had expired the day "
        "before; can that decision be challenged?",
    ),
    _ex(
        "bikes",
        "Is there room for my tandem on the coast line this weekend, and must I tell you "
        "beforehand?",
    ),
    _ex("bikes", "Can my folding Brompton come with me on the 07:30, or does it need a slot?"),
    _ex(
        "group",
        "Our walking club, about 18 of us, wants to travel to Malham together in June; do you "
        "offer reduced prices?",
    ),
    _ex(
        "group",
        "Thirty colleagues are heading to a conference in Manchester; can you arrange seats for "
        "all of us in one go?",
    ),
    _ex(
        "staff",
        "The man on the gate at Leeds station swore at my elderly father; I want to report his "
        "behaviour.",
    ),
    _ex(
        "staff",
        "Whoever was in charge of the 11:20 to Lancaster was wonderful with my autistic "
        "daughter; please pass on my appreciation.",
    ),
)


FAMILY = Family(
    name="railway",
    title="train operator's messages to eight staff codes the app's prompt lists by name only",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=label_feedback,
    feedback_kind="correct=bool with the right code as ground_truth (source=operator)",
)
