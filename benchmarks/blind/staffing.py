"""Family 29 (SEALED: not run during development): three recruitment jobs in one stream.

A recruitment agency's back-office helper gets three unrelated kinds of item in
one stream, interleaved:

* a candidate's answer to an interview invitation, to be given one of the
  agency's status codes: ``ST-10`` (the slot is accepted), ``ST-20`` (another
  date or time is asked for), ``ST-90`` (the candidate withdraws);
* a client company's question about the agency's fees or terms, to be answered
  in a short paragraph that gives the terms page, ``hollisrecruit.co.uk/terms``;
* a client's email about a new vacancy, from which the vacancy reference is
  extracted in the house form ``JR-<digits>`` (``our ref 4471`` -> ``JR-4471``).

The app's prompt names the three jobs and lists the status codes without what
they mean. Feedback as each job gets it: an operator's label for the status
codes and the references (right or wrong with the right answer as
``ground_truth``, ``source="operator"``); a reviewer's verdict for the replies
(``correct=True``, or ``correct=False`` with a comment in the reviewer's own
words, no ``ground_truth``, ``source="reviewer"``). Six training runs per job
(18), four held-out per job (12) in other words. Scoring: the code or reference
alone (case, spaces, quotes and a final full stop aside); a reply with the terms
page in it.

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
    "You are the back-office helper of Hollis Recruitment. Three kinds of item reach you: "
    "candidates' answers to interview invitations, questions from client companies, and "
    "clients' emails about new vacancies. For a candidate's answer, reply with its status code "
    "only (ST-10, ST-20 or ST-90). For a client's question, reply in a short friendly "
    "paragraph. For a vacancy email, reply with the vacancy reference only."
)

RULES = """How to handle each kind of item:
- A candidate's answer to an interview invitation: reply with the status code only.
  ST-10 the candidate accepts the slot offered; ST-20 they ask for another date or time;
  ST-90 they withdraw (no longer interested, took another job).
- A client's question about fees, rebates, payment or terms of business: answer in a
  short paragraph and always give the terms page, hollisrecruit.co.uk/terms.
- A client's email about a new vacancy: reply with the vacancy reference only, written
  JR- followed by the digits of the client's reference (e.g. "our ref 4471" -> JR-4471).
"""

TERMS_PAGE = "hollisrecruit.co.uk/terms"

_COMMENT: dict[str, str] = {}


def _status(text: str, code: str) -> Example:
    return Example(input=text, kind="status", answer=code)


def _vacancy(text: str, reference: str) -> Example:
    return Example(input=text, kind="vacancy", answer=reference)


def _client(text: str, comment: str = "") -> Example:
    _COMMENT[text] = comment
    answer = (
        "Our fee is a percentage of the first year's salary, invoiced on the start date; the "
        f"full terms, rebates included, are on {TERMS_PAGE}."
    )
    return Example(input=text, kind="client", answer=answer)


TRAIN = (
    _status("Candidate: Thursday at 10 works for me, see you then.", "ST-10"),
    _client(
        "Client: What percentage do you charge when we hire someone through you?",
        f"Fee questions always get the terms page, {TERMS_PAGE}.",
    ),
    _vacancy(
        "Vacancy email: We need a payroll administrator in Leeds, our ref 4471, start ASAP.",
        "JR-4471",
    ),
    _status("Candidate: Could we do next week instead? I'm away until Monday.", "ST-20"),
    _client(
        "Client: If the person you placed leaves after a month, do we get anything back?",
        f"rebate question -> link {TERMS_PAGE}, that's where the rebate scale is",
    ),
    _vacancy(
        "Vacancy email: New role for you - warehouse supervisor, reference number 0932.",
        "JR-0932",
    ),
    _status("Candidate: Sorry, I've accepted another offer so I'll withdraw.", "ST-90"),
    _client(
        "Client: When do you send the invoice, and how long do we have to pay it?",
        "Payment terms are all written up on our terms page - please link it "
        f"({TERMS_PAGE}) rather than explaining from memory.",
    ),
    _vacancy("Vacancy email: Ref: 7718. Two HGV drivers wanted from March.", "JR-7718"),
    _status("Candidate: Yes please, the 2pm slot on Tuesday is perfect.", "ST-10"),
    _client(
        "Client: Is your fee different for temporary staff?",
        "Missing the terms link. Anything about what we charge needs it.",
    ),
    _vacancy(
        "Vacancy email: Please advertise our receptionist post (job no. 2205) on your site.",
        "JR-2205",
    ),
    _status(
        "Candidate: Is there any chance of an afternoon slot rather than the morning?", "ST-20"
    ),
    _client(
        "Client: Do you have standard terms of business we could read before signing?",
        f"They asked for our terms: give them {TERMS_PAGE}.",
    ),
    _vacancy("Vacancy email: Hi, our reference for the chef vacancy is 5063.", "JR-5063"),
    _status("Candidate: I've decided to stay with my current employer, thanks anyway.", "ST-90"),
    _client(
        "Client: Can the fee be split into two payments?",
        f"no link to {TERMS_PAGE} - every question on payment must have it",
    ),
    _vacancy("Vacancy email: Accounts assistant, part time, our ref 3390.", "JR-3390"),
)

HELDOUT = (
    _status("Reply from a candidate: Great, I'll be there on the 14th at 9:30.", "ST-10"),
    _client("Question from a client: How much would it cost us to take on a sales manager?"),
    _vacancy(
        "New vacancy from a client: Forklift operator, night shifts, our job code is 6120.",
        "JR-6120",
    ),
    _status(
        "Reply from a candidate: Something has come up that day; do you have anything on Friday?",
        "ST-20",
    ),
    _client(
        "Question from a client: The new starter quit in week three - are we owed a partial refund?"
    ),
    _vacancy(
        "New vacancy from a client: We're looking for a lab technician (our reference 8457).",
        "JR-8457",
    ),
    _status(
        "Reply from a candidate: Please take me off the list, I'm not looking any more.",
        "ST-90",
    ),
    _client("Question from a client: What notice do we have to give to end our agreement?"),
    _vacancy(
        "New vacancy from a client: Please find details of the cleaner role, ref 1176, attached.",
        "JR-1176",
    ),
    _status("Reply from a candidate: Confirmed, Monday morning suits me fine.", "ST-10"),
    _client("Question from a client: Do you charge VAT on top of the placement fee?"),
    _vacancy(
        "New vacancy from a client: Hiring a dental nurse - please quote 9034 on every CV.",
        "JR-9034",
    ),
)


def score(example: Example, outcome: Outcome) -> float:
    """The code or reference alone for a label; the terms page in a reply to a client."""
    if example.kind == "client":
        return keeps_convention("contains", TERMS_PAGE, outcome.text)
    return label_score(example, outcome)


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """An operator's label for a code or reference; a reviewer's verdict for a reply."""
    if example.kind != "client":
        return label_feedback(example, outcome)
    if score(example, outcome) == 1.0:
        return {"correct": True, "source": "reviewer"}
    return {"correct": False, "comment": _COMMENT[example.input], "source": "reviewer"}


FAMILY = Family(
    name="staffing",
    title="three unrelated recruitment jobs in one stream (status codes, a reply convention, "
    "a reference extracted in house form)",
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
