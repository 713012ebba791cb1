"""Family 32 (SEALED: not run during development): museum visitors' messages to eight codes.

A town museum's enquiries assistant forwards each visitor's message to one of
eight mailboxes by the museum's own codes (``Q8LM``, ``4HTX``, ...): letters and
digits that say nothing about what each mailbox handles. The app's prompt lists
every code with a neutral line (its mailbox number and the wing it sits in),
never which messages go there, so the agent cannot guess any of them. Two
training runs per code (16), each with an operator's label as the docs say
labels are sent: right or wrong with the right code as ``ground_truth`` and
``source="operator"``. Held-out: two messages per code (16) describing the same
needs in other words, with none of the key nouns of that code's training
messages ("an 1850s engraving on our biscuit tins" where training said "photo",
"painting" and "reproduce"). Scoring: the reply must be the code alone (case,
spaces, quotes and a final full stop aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from benchmarks.blind._family import Example, Family, label_feedback, label_score

SYSTEM_PROMPT = (
    "You are the enquiries assistant of the Haverleigh Town Museum. Forward each visitor's "
    "message to one mailbox by its code and reply with the code only.\n"
    "Codes:\n"
    "- Q8LM: mailbox 11, east wing\n"
    "- 4HTX: mailbox 12, east wing\n"
    "- N2CW: mailbox 20, west wing\n"
    "- 7RBZ: mailbox 21, west wing\n"
    "- K5PD: mailbox 30, north wing\n"
    "- E6VJ: mailbox 31, north wing\n"
    "- H3SU: mailbox 40, old stables\n"
    "- 9FKA: mailbox 41, old stables"
)

CODES = {
    "membership": "Q8LM",
    "learning": "4HTX",
    "donation": "N2CW",
    "hire": "7RBZ",
    "licensing": "K5PD",
    "study": "E6VJ",
    "volunteer": "H3SU",
    "shop": "9FKA",
}

RULES = """Forwarding (reply with the code only):
- Q8LM: membership: joining, renewing, prices and kinds of membership, member cards,
  free entry for a year, gift memberships.
- 4HTX: school and college visits and learning sessions: class trips, workshops for
  pupils, guided sessions for students and their teachers.
- N2CW: offers of objects for the museum's collection: donations or bequests of
  heirlooms, medals, photographs, documents, signs or anything old the museum may keep.
- 7RBZ: hiring the building for an event: weddings, receptions, parties, corporate
  dinners, evening events after closing.
- K5PD: permission to use or reproduce images of the museum's objects (books,
  magazines, television, products), fees and image rights.
- E6VJ: research and study visits: seeing archives, records, letters or objects in
  store that are not on display, by appointment.
- H3SU: volunteering: unpaid roles, gallery guides, work experience, giving time.
- 9FKA: the museum shop and online orders: items not arrived, damaged or faulty goods,
  returns and replacements.
"""


def _ex(kind: str, text: str) -> Example:
    return Example(input=text, kind=kind, answer=CODES[kind])


TRAIN = (
    _ex("membership", "How do I renew my annual membership? My card ran out in May."),
    _ex("learning", "Can I book a class trip for 30 Year 5 pupils in March?"),
    _ex(
        "donation",
        "My grandfather's war medals are in a drawer; would the museum want them for its "
        "collection?",
    ),
    _ex("hire", "Can we hire the main hall for our wedding reception next June?"),
    _ex("licensing", "I'd like to use a photo of one of your paintings on the cover of my book."),
    _ex(
        "study",
        "I'm researching my family history - can I look at the parish records you hold?",
    ),
    _ex("volunteer", "I'm retired and would love to volunteer as a gallery guide."),
    _ex("shop", "I ordered a poster from your online shop two weeks ago and it hasn't arrived."),
    _ex("membership", "Does the family membership cover grandparents too?"),
    _ex("learning", "Do you run workshops for schools about the Romans?"),
    _ex(
        "donation",
        "We found a box of old photographs of the town in the loft; can we donate them?",
    ),
    _ex("hire", "How much does it cost to hold a corporate dinner in the galleries?"),
    _ex("licensing", "What's the fee to reproduce an image from your collection in a magazine?"),
    _ex(
        "study",
        "Can I make an appointment to see objects in the store that aren't on display?",
    ),
    _ex("volunteer", "Are there any volunteering roles for students over the summer?"),
    _ex(
        "shop",
        "The mug I bought in the gift shop was cracked when I unwrapped it; can I get a "
        "replacement?",
    ),
)

HELDOUT = (
    _ex(
        "membership",
        "I'd like to join so that I get in free to every exhibition for a year - how much is that?",
    ),
    _ex(
        "membership",
        "Could I give my sister twelve months of unlimited visits as a birthday present?",
    ),
    _ex(
        "learning",
        "I teach a group of eight-year-olds and we'd love to come and see the Egyptian mummies "
        "on a weekday in term time.",
    ),
    _ex(
        "learning",
        "Our sixth-form history students need a guided session in the Victorian gallery for "
        "their coursework.",
    ),
    _ex(
        "donation",
        "My great-aunt hand-stitched a quilt in 1890 and I'd like it kept by you for good "
        "rather than sold.",
    ),
    _ex(
        "donation",
        "Would you accept the enamel sign from my late father's ironmonger's business, for the "
        "town's heritage?",
    ),
    _ex(
        "hire",
        "Our company is looking for an unusual place for its summer party for 120 staff - is "
        "the building available after closing?",
    ),
    _ex(
        "hire",
        "My partner and I are getting married in August; could the ceremony take place among "
        "the dinosaur skeletons?",
    ),
    _ex(
        "licensing",
        "A TV documentary wants to show a high-resolution scan of your Turner watercolour; who "
        "grants the rights?",
    ),
    _ex(
        "licensing",
        "Can our bakery put the 1850s engraving of the harbour from your website on its "
        "biscuit tins?",
    ),
    _ex(
        "study",
        "For my PhD I need to examine the Hartley mill owners' letters in person; how do I "
        "arrange that?",
    ),
    _ex("study", "Is it possible to handle the Bronze Age axe heads kept behind the scenes?"),
    _ex(
        "volunteer",
        "I have free afternoons and would like to give my time helping visitors, unpaid.",
    ),
    _ex(
        "volunteer",
        "My teenage son needs a few weeks of experience for his Duke of Edinburgh award; could "
        "he help out with you?",
    ),
    _ex("shop", "The framed print I paid for on your website came with the glass smashed."),
    _ex(
        "shop",
        "I still haven't received the jigsaw and tote bag I paid for on the 3rd - where are they?",
    ),
)


FAMILY = Family(
    name="museum",
    title="museum visitors' messages to eight mailbox codes the app's prompt lists by place only",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=label_feedback,
    feedback_kind="correct=bool with the right code as ground_truth (source=operator)",
)
