"""Family 20 (SEALED: not run during development): student enquiries to eight desk codes.

A university's student-services assistant routes each student's message to one
of eight desks by the university's own codes (``R4K``, ``Z9M``, ...): letters
and digits that say nothing about what they handle. The app's prompt lists
every code with a neutral line (where the desk sits), never which messages go
there, so the agent cannot guess any of them. Two training runs per code (16),
each with an operator's label as the docs say labels are sent: right or wrong
with the right code as ``ground_truth`` and ``source="operator"``. Held-out:
two messages per code (16) describing the same needs in other words, with none
of the key nouns of that code's training messages ("a stamped record of
everything I studied" where training said "transcript" and "certificate").
Scoring: the reply must be the code alone (case, spaces, quotes and a final
full stop aside).

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from benchmarks.blind._family import Example, Family, label_feedback, label_score

SYSTEM_PROMPT = (
    "You are the enquiries assistant of Calloway University's student services. Route each "
    "student's message to one desk by its code and reply with the code only.\n"
    "Codes:\n"
    "- R4K: desk 1, Calloway House, ground floor\n"
    "- Z9M: desk 2, Calloway House, ground floor\n"
    "- B2T: desk 3, Calloway House, first floor\n"
    "- H6W: desk 4, Calloway House, first floor\n"
    "- P3D: desk 5, Marsh Building, room 12\n"
    "- V8N: desk 6, Marsh Building, room 14\n"
    "- C5J: desk 7, Library annexe\n"
    "- L7F: desk 8, Library annexe"
)

CODES = {
    "records": "R4K",
    "circumstances": "Z9M",
    "fees": "B2T",
    "visa": "H6W",
    "transfer": "P3D",
    "housing": "V8N",
    "disability": "C5J",
    "graduation": "L7F",
}

RULES = """Routing (reply with the code only):
- R4K: official records of study: transcripts, marks or grades for an employer or another
  university, copies of a degree certificate, proof of enrolment for a bank or council.
- Z9M: something outside the student's control got in the way of an assessment: illness,
  a death, a family emergency; a missed exam or a late essay or report; deadline extensions.
- B2T: tuition fees: paying, instalments, the fee rate charged, discounts, a student loan
  that has not paid the fees.
- H6W: visas and immigration: visa letters, CAS numbers, permission to stay, work-hour
  limits for international students.
- P3D: changing course, degree programme, module or option.
- V8N: repairs and problems in university halls or flats: heating, leaks, mould, broken
  locks, windows or kitchen fittings.
- C5J: disability and learning-difference support: dyslexia, ADHD, sight or hearing loss,
  wheelchair access, adjustments such as extra exam time or large-print material.
- L7F: graduation: ceremony tickets and guest seats, gowns and robes, the ceremony day.
"""


def _ex(kind: str, text: str) -> Example:
    return Example(input=text, kind=kind, answer=CODES[kind])


TRAIN = (
    _ex("records", "Can I get an official transcript of my grades to send to an employer?"),
    _ex("circumstances", "My grandmother died last week, can I have more time for my essay?"),
    _ex("fees", "How do I pay my tuition in instalments instead of all at once?"),
    _ex("visa", "I need a letter confirming my enrolment for my visa renewal."),
    _ex("transfer", "I'd like to switch from Chemistry to Biochemistry next year."),
    _ex("housing", "The heating in my room in Harland Hall hasn't worked for three days."),
    _ex("disability", "I have dyslexia, can I get extra time in exams?"),
    _ex("graduation", "How many guest tickets do I get for the graduation ceremony?"),
    _ex("records", "I need a certified copy of my degree certificate, the original got lost."),
    _ex("circumstances", "I was ill with flu and missed the statistics exam, what happens now?"),
    _ex("fees", "I was charged the international fee rate but I'm a home student."),
    _ex("visa", "My CAS number has a mistake in it, who can correct that?"),
    _ex("transfer", "Can I change one of my optional modules from French to Spanish?"),
    _ex("housing", "There's mould on the bathroom ceiling of my flat in halls."),
    _ex("disability", "I use a wheelchair and some of my lectures are up a flight of stairs."),
    _ex("graduation", "Where do I hire a gown for graduation day?"),
)

HELDOUT = (
    _ex(
        "records",
        "A company I applied to wants verified proof of the marks I got in my second year.",
    ),
    _ex(
        "records",
        "The master's programme in Utrecht asks for a stamped record of everything I studied here.",
    ),
    _ex(
        "circumstances",
        "I've been in hospital since Monday and won't manage to hand in my lab report by the "
        "deadline.",
    ),
    _ex(
        "circumstances",
        "A family emergency meant I couldn't sit Tuesday's paper; how do I get that taken into "
        "account?",
    ),
    _ex(
        "fees",
        "My loan hasn't come through, will I be deregistered if I can't settle the "
        "£4,600 this term?",
    ),
    _ex("fees", "Is there a discount if I cover the whole year's cost upfront?"),
    _ex(
        "visa",
        "The Home Office wants evidence I'm still registered so I can extend my permission to "
        "stay.",
    ),
    _ex(
        "visa",
        "As an overseas student, how many hours of part-time work am I allowed under my "
        "immigration conditions?",
    ),
    _ex("transfer", "I've realised law isn't for me and want to move onto the economics degree."),
    _ex("transfer", "Is it too late to swap the elective I picked for a different one?"),
    _ex(
        "housing",
        "Water is dripping through the light fitting in our shared kitchen at Ferris Court.",
    ),
    _ex("housing", "My window won't shut and the lock on my door is broken in residence block C."),
    _ex(
        "disability",
        "I've just been diagnosed with ADHD; what adjustments can the university make for me?",
    ),
    _ex("disability", "Because of my visual impairment I need course handouts in large print."),
    _ex(
        "graduation",
        "My parents want to watch me receive my degree in July, how do they get seats?",
    ),
    _ex("graduation", "When I cross the stage in July, do I need to rent robes and a hat?"),
)


FAMILY = Family(
    name="sorting",
    title="student enquiries to eight desk codes the app's prompt lists by location only",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=label_score,
    feedback=label_feedback,
    feedback_kind="correct=bool with the right code as ground_truth (source=operator)",
)
