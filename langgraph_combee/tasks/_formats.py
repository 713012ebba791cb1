"""House formats: answer a question about a record in the company's house format (``"formats"``).

Each question asks for one value stated in a short record ("The parcel weighs
2.5 kg. What is the parcel's weight?"). The value is easy to find; the answer is
right only in the house format of its kind, and each kind has a convention a
model cannot guess: weights in grams as a bare integer (``2500``), dates as
``YYYY/MM/DD``, names as ``SURNAME, Given``, amounts as ``EUR 12.50``, and so
on, ten conventions in all. Without a rule a model answers in the record's own
format; a written rule is enough for a small model on most kinds.

Scoring normalises both sides (first line, fences, quotes and a final period
removed, upper-cased, whitespace collapsed) and accepts the reply when the
house-format answer stands in it as a whole token ("2500 g" counts for
``2500``, "2.5 kg" does not).

Measured on Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, CPU, temperature 0), 40 test
questions, seed 0: 2.5% with no rules (it answers in the record's own format),
52.5% with ``rules`` in the system prompt (perfect on dates, countries and
yes/no; it copies worked examples into names and durations). Reproduce (details
in ``docs/tasks.md``)::

    python -m langgraph_combee.tasks --model local:1.5b --task formats -n 40
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import ClassVar

from langgraph_combee.tasks._base import Example, Rule, Split, Task, clean_answer

__all__ = ["HouseFormats"]

MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip

# Each rule shows a worked value. Measured on the 1.5B model, the model sometimes
# copies that value into unrelated answers ("DUBOIS" for every name, "90" for
# every duration): see docs/tasks.md.
RULES: tuple[Rule, ...] = (
    Rule(
        "weights",
        "Weights are answered in grams, as a whole number with no unit (2.5 kg -> 2500).",
        (r"\bweigh",),
        "gram",
    ),
    Rule(
        "dates",
        "Dates are answered as YYYY/MM/DD (5 March 2024 -> 2024/03/05).",
        (r"\bdate",),
        "YYYY/MM/DD",
    ),
    Rule(
        "durations",
        "Durations are answered in minutes, as a whole number with no unit (1.5 hours -> 90).",
        (r"\bduration",),
        "minutes",
    ),
    Rule(
        "names",
        "Names of people are answered as SURNAME, Given name with the surname in capitals "
        "(Marie Dubois -> DUBOIS, Marie).",
        (r"\bnames?\b",),
        "SURNAME",
    ),
    Rule(
        "phones",
        "Phone numbers are answered in international form: a plus sign and digits only, "
        "no spaces or brackets (+49 30 1234 567 -> +49301234567).",
        (r"\bphone",),
        "plus sign",
    ),
    Rule(
        "money",
        "Amounts of money are answered as the three-letter currency code, a space and the "
        "amount with two decimals (€12.5 -> EUR 12.50, $7 -> USD 7.00).",
        (r"\bmoney\b", r"\bamounts?\b"),
        "currency code",
    ),
    Rule(
        "times",
        "Times of day are answered in 24-hour form HH:MM (3:30 pm -> 15:30, 9 am -> 09:00).",
        (r"\btimes? of day",),
        "24-hour",
    ),
    Rule(
        "yes_no",
        "Yes/no questions are answered with the single letter Y or N.",
        (r"yes/no",),
        "single letter",
    ),
    Rule(
        "countries",
        "Countries are answered as their two-letter ISO code (Germany -> DE).",
        (r"\bcountr",),
        "two-letter",
    ),
    Rule(
        "percentages",
        "Percentages are answered as a decimal fraction with two decimals (45% -> 0.45).",
        (r"\bpercent",),
        "decimal fraction",
    ),
)

# (template, question) pairs per rule and split; {v} is the value as the record states it.
TEMPLATES: dict[str, dict[Split, tuple[str, ...]]] = {
    "weights": {
        "train": (
            "The parcel weighs {v} kg. What is the parcel's weight?",
            "Packing note: the box of books weighs {v} kg. How much does the box weigh?",
        ),
        "test": (
            "Shipping label: net weight {v} kg. What is the net weight?",
            "The suitcase was {v} kg at check-in. How heavy was the suitcase?",
        ),
    },
    "dates": {
        "train": (
            "The contract starts on {v}. What is the start date?",
            "Invoice issued {v}. When was the invoice issued?",
        ),
        "test": (
            "We shipped the order on {v}. On what date was it shipped?",
            "The warranty expires on {v}. What is the expiry date?",
        ),
    },
    "durations": {
        "train": (
            "The support call lasted {v}. How long did the call last?",
            "The installation took {v}. What was the installation time?",
        ),
        "test": (
            "The repair took {v} in total. How long was the repair?",
            "Training session length: {v}. What is the session duration?",
        ),
    },
    "names": {
        "train": (
            "The ticket was opened by {v}. Who opened the ticket?",
            "Account holder: {v}. What is the account holder's name?",
        ),
        "test": (
            "The parcel was signed for by {v}. Who signed for the parcel?",
            "Our new contact person is {v}. Who is the contact person?",
        ),
    },
    "phones": {
        "train": (
            "You can reach me at {v}. What is my phone number?",
            "Customer phone: {v}. What is the customer's phone number?",
        ),
        "test": (
            "Please call the courier on {v}. What number should we call?",
            "Emergency line: {v}. What is the emergency number?",
        ),
    },
    "money": {
        "train": (
            "The repair costs {v}. How much does the repair cost?",
            "Order total: {v}. What is the order total?",
        ),
        "test": (
            "The customer paid {v} for shipping. How much was shipping?",
            "Refund approved for {v}. What is the refund amount?",
        ),
    },
    "times": {
        "train": (
            "The courier arrives at {v}. At what time does the courier arrive?",
            "The store opens at {v}. When does the store open?",
        ),
        "test": (
            "The webinar begins at {v}. What time does the webinar begin?",
            "Last pickup is at {v}. When is the last pickup?",
        ),
    },
    "yes_no": {
        "train": (
            "Gift wrapping: {v}. Is the order gift-wrapped?",
            "Express shipping: {v}. Does the order ship express?",
        ),
        "test": (
            "Signature required on delivery: {v}. Is a signature required?",
            "Insurance added: {v}. Is the parcel insured?",
        ),
    },
    "countries": {
        "train": (
            "Ship to: {v}. Which country does the order ship to?",
            "The supplier is based in {v}. Which country is the supplier in?",
        ),
        "test": (
            "The customer lives in {v}. What is the customer's country?",
            "Made in {v}. Which country was it made in?",
        ),
    },
    "percentages": {
        "train": (
            "The discount is {v}. What is the discount?",
            "Tax rate: {v}. What is the tax rate?",
        ),
        "test": (
            "{v} of tickets were solved on the first day. What share was solved?",
            "The battery is at {v}. What is the battery level?",
        ),
    },
}

FIRST_NAMES: dict[Split, tuple[str, ...]] = {
    "train": ("Marie", "James", "Ingrid", "Carlos", "Hana", "Peter"),
    "test": ("Lucia", "David", "Freya", "Mateo", "Keiko", "Oscar"),
}
SURNAMES: dict[Split, tuple[str, ...]] = {
    "train": ("Dubois", "Miller", "Larsen", "Romero", "Sato", "Novak"),
    "test": ("Rossi", "Walker", "Berg", "Silva", "Tanaka", "Horvat"),
}
COUNTRIES: dict[Split, tuple[tuple[str, str, str], ...]] = {
    "train": (
        ("Lyon", "France", "FR"), ("Madrid", "Spain", "ES"), ("Osaka", "Japan", "JP"),
        ("Toronto", "Canada", "CA"), ("Krakow", "Poland", "PL"), ("Oslo", "Norway", "NO"),
    ),
    "test": (
        ("Munich", "Germany", "DE"), ("Milan", "Italy", "IT"), ("Sydney", "Australia", "AU"),
        ("Lisbon", "Portugal", "PT"), ("Dublin", "Ireland", "IE"), ("Vienna", "Austria", "AT"),
    ),
}  # fmt: skip
CURRENCIES = (("€", "EUR", "euros"), ("$", "USD", "dollars"), ("£", "GBP", "pounds"))
YES_NO: dict[Split, tuple[tuple[str, str], ...]] = {
    "train": (("yes", "Y"), ("no", "N"), ("requested", "Y"), ("not requested", "N")),
    "test": (("included", "Y"), ("none", "N"), ("true", "Y"), ("false", "N")),
}

Value = tuple[str, str]  # (as the record states it, in house format)


def _weight(rng: random.Random, split: Split) -> Value:
    grams = rng.randrange(3, 95) * 100 if split == "train" else rng.randrange(12, 380) * 25
    text = f"{grams / 1000:g}"
    return text, str(grams)


def _date(rng: random.Random, split: Split) -> Value:
    year = rng.choice((2023, 2024) if split == "train" else (2025, 2026))
    month, day = rng.randrange(1, 13), rng.randrange(1, 29)
    name = MONTHS[month - 1]
    text = f"{day} {name} {year}" if split == "train" else f"{name} {day}, {year}"
    return text, f"{year}/{month:02d}/{day:02d}"


def _duration(rng: random.Random, split: Split) -> Value:
    if split == "train":
        hours = rng.choice((1.5, 2, 2.5, 3, 4, 0.5, 1.25, 0.75))
        return f"{hours:g} hours", str(round(hours * 60))
    hours, minutes = rng.randrange(1, 4), rng.choice((10, 15, 20, 40, 45, 50))
    unit = "hour" if hours == 1 else "hours"
    return f"{hours} {unit} and {minutes} minutes", str(hours * 60 + minutes)


def _name(rng: random.Random, split: Split) -> Value:
    first, last = rng.choice(FIRST_NAMES[split]), rng.choice(SURNAMES[split])
    return f"{first} {last}", f"{last.upper()}, {first}"


def _phone(rng: random.Random, split: Split) -> Value:
    code = rng.choice(("49", "33", "44", "34") if split == "train" else ("39", "31", "46", "41"))
    parts = [str(rng.randrange(10, 100)), str(rng.randrange(1000, 10_000))]
    parts.append(str(rng.randrange(100, 1000)))
    if split == "train":
        text = f"+{code} {' '.join(parts)}"
    else:
        text = f"+{code} ({parts[0]}) {parts[1]}-{parts[2]}"
    return text, f"+{code}{''.join(parts)}"


def _money(rng: random.Random, split: Split) -> Value:
    symbol, code, word = rng.choice(CURRENCIES)
    cents = rng.randrange(150, 20_000, 5)
    amount = f"{cents / 100:.2f}".removesuffix(".00")
    if amount.endswith("0") and "." in amount:
        amount = amount[:-1]
    text = f"{symbol}{amount}" if split == "train" else f"{amount} {word}"
    return text, f"{code} {cents / 100:.2f}"


def _time(rng: random.Random, split: Split) -> Value:
    hour = rng.randrange(1, 12) if split == "train" else rng.randrange(1, 13)
    minute = rng.choice((0, 15, 30, 45) if split == "train" else (0, 5, 10, 20, 40, 50))
    half = rng.choice(("am", "pm"))
    text = f"{hour}:{minute:02d} {half}" if minute else f"{hour} {half}"
    hour24 = hour % 12 + (12 if half == "pm" else 0)
    return text, f"{hour24:02d}:{minute:02d}"


def _yes_no(rng: random.Random, split: Split) -> Value:
    return rng.choice(YES_NO[split])


def _country(rng: random.Random, split: Split) -> Value:
    city, country, code = rng.choice(COUNTRIES[split])
    return f"{city}, {country}", code


def _percentage(rng: random.Random, split: Split) -> Value:
    percent = rng.randrange(5, 96, 5) if split == "train" else rng.randrange(3, 98)
    return f"{percent}%", f"{percent / 100:.2f}"


VALUES: dict[str, Callable[[random.Random, Split], Value]] = {
    "weights": _weight,
    "dates": _date,
    "durations": _duration,
    "names": _name,
    "phones": _phone,
    "money": _money,
    "times": _time,
    "yes_no": _yes_no,
    "countries": _country,
    "percentages": _percentage,
}

# Answers the double gives, per input it generated: (rule id, record's own format, house format).
_SOLUTIONS: dict[str, tuple[str, str, str]] = {}


class HouseFormats(Task):
    """Answer with one value from a short record, in the company's house format."""

    name: ClassVar[str] = "formats"
    description: ClassVar[str] = "values from records, in 10 house-format conventions"
    system_prompt: ClassVar[str] = (
        "You answer questions about short records at Northwind Retail. Reply with the "
        "requested value only, nothing else."
    )
    rules_heading: ClassVar[str] = "House format rules:"

    @property
    def rule_set(self) -> tuple[Rule, ...]:
        """One rule per kind of value."""
        return RULES

    def _example(self, rule: Rule, rng: random.Random, split: Split) -> Example:
        templates = TEMPLATES[rule.id][split]
        template = rng.randrange(len(templates))
        stated, house = VALUES[rule.id](rng, split)
        text = templates[template].format(v=stated)
        _SOLUTIONS[text] = (rule.id, stated, house)
        return Example(
            input=text,
            answer=house,
            meta={"rule": rule.id, "template": f"{split}-{template}", "split": split},
        )

    def normalise(self, answer: str) -> str:
        """Upper-cased first line without fences, quotes or a final period."""
        return clean_answer(answer)

    def score(self, answer: str, example: Example) -> bool:
        """Right when the house-format answer stands in the reply as a whole token."""
        expected = self.normalise(example.answer)
        got = self.normalise(answer)
        if got == expected:
            return True
        pattern = rf"(?<![A-Z0-9+./:-]){re.escape(expected)}(?![A-Z0-9]|[./:,][0-9])"
        return re.search(pattern, got) is not None

    def follow_rules(self, system_prompt: str, user_input: str) -> str:
        """The house-format value when the prompt states its rule, else the record's own."""
        solution = _SOLUTIONS.get(user_input)
        if solution is None:
            return "UNKNOWN"
        rule_id, stated, house = solution
        stated_ids = {rule.id for rule in self.stated_rules(system_prompt)}
        return house if rule_id in stated_ids else stated

    def insight(self, task_input: str, ground_truth: str | None, output: str) -> str:
        """The convention the expected answer follows, stated as a rule."""
        solution = _SOLUTIONS.get(task_input)
        if ground_truth is None or solution is None:
            return ""
        if self.score(output, Example(task_input, ground_truth)):
            return ""
        return self.rule(solution[0]).text
