"""House formats: answers made of each request's values are learned as one format."""

from __future__ import annotations

import pytest

from langgraph_combee._core import formats

ANSWERS = ["CB;Maria;0612345678;AM", "CB;Peter;0205550199;PM", "CB;Tom;07700900123;AM"]
REQUESTS = [
    "Hi, this is Maria Lopez, please call me at 0612-345-678 around 10am.",
    "Call back Peter on (020) 555 0199 after 2 pm please.",
    "Could someone ring Tom Baker, 07700 900123, at 9:30 in the morning?",
]
FORMAT = "CB;<first name>;<phone number, digits only>;<AM or PM>"


def test_answers_written_alike_have_one_shape_and_labels_another() -> None:
    assert {formats.shape(a) for a in ANSWERS} == {"A;Aa;9;A"}
    assert formats.shape("RFD 1200.00 USD") == "A 9.9 A"
    assert formats.shape("SR-305") != formats.shape("CB;Maria;0612345678;AM")


def test_an_answer_carries_its_requests_values_a_house_code_does_not() -> None:
    assert all(formats.carries_input(a, r) for a, r in zip(ANSWERS, REQUESTS, strict=True))
    assert not formats.carries_input("SR-305", "the lamp post outside number 4 is out")


def test_a_format_fits_when_its_fixed_parts_write_every_answer() -> None:
    assert formats.fits(FORMAT, ANSWERS)
    assert not formats.fits("CB <name>", ANSWERS)  # the space is not the answers' ";"
    assert not formats.fits("CB;Maria;0612345678;AM", ANSWERS)  # no placeholder
    assert not formats.fits("<topic>", ANSWERS)  # a placeholder alone fits anything
    assert not formats.fits("CB;<name>;" + "x" * 300, ANSWERS)


def test_a_format_naming_one_runs_value_is_refused() -> None:
    assert formats.names_no_single_value(FORMAT, ANSWERS, REQUESTS)
    assert not formats.names_no_single_value(
        "CB;<first name, e.g. Maria>;<digits>;<AM or PM>", ANSWERS, REQUESTS
    )
    assert not formats.names_no_single_value("CB;<name>;<e.g. 0612345678>;<AM>", ANSWERS, REQUESTS)


def test_placeholders_are_served_in_square_brackets() -> None:
    assert formats.bracketed(FORMAT) == "CB;[first name];[phone number, digits only];[AM or PM]"


def test_what_the_answers_show_of_each_part_is_added_to_its_description() -> None:
    answers = [*ANSWERS, "CB;Lea;491705551234;PM"]
    assert (
        formats.described("CB;<name>;<phone number>;<time>", answers)
        == "CB;<name>;<phone number, digits only>;<time: AM or PM>"
    )
    # "PM" in one answer only: no closed set is named from one example of it.
    assert formats.described("CB;<name>;<phone>;<time>", ANSWERS).endswith("<time>")
    assert formats.described("X <a>", ANSWERS) == "X <a>"  # does not fit: left as it was


def test_a_part_is_described_in_a_few_words() -> None:
    assert formats.plain_parts(FORMAT)
    assert not formats.plain_parts("CB;<a name as the customer wrote it in the message>")


def test_derived_is_the_fixed_text_around_one_value_each_request_holds() -> None:
    requests = ["our ref 4471", "reference number 0932"]
    assert formats.derived(["JR-4471", "JR-0932"], requests) == "JR-<number from the message>"
    assert formats.derived(["Ticket 4471 (open)", "Ticket 0932 (open)"], requests) == (
        "Ticket <number from the message> (open)"
    )
    # A value cut inside a token, a middle no request holds, one answer, no fixed text: none.
    assert formats.derived(["JR-4471", "JR-4432"], ["ref 71", "ref 32"]) is None
    assert formats.derived(["FIN-7Q", "FIN-8R"], ["a refund", "a credit"]) is None
    assert formats.derived(["JR-4471"], ["ref 4471"]) is None
    assert formats.derived(["4471", "0932"], requests) is None


def test_derived_fixed_text_holding_a_requests_value_is_a_customers_not_a_format() -> None:
    # Two runs of one customer: her name (or a number she gave) is in every answer, and
    # as a format it would be written for everyone.
    maria = ["Maria Lopez here, ref 4471", "Maria Lopez again, ref 0932"]
    assert (
        formats.derived(
            ["Order for Maria Lopez: ref 4471", "Order for Maria Lopez: ref 0932"], maria
        )
        is None
    )
    assert formats.derived(["CB;Maria;4471", "CB;Maria;0932"], maria) is None
    assert (
        formats.derived(["Maria: 7788", "Tom: 7788"], ["Maria, order 7788", "Tom, order 7788"])
        is None
    )


def test_derived_takes_a_value_whole_across_its_dots_and_at_signs() -> None:
    requests = ["my login is joe@x.io", "please reset ann@y.io"]
    # Not "ACC-<value>.io": the agent would write ".io" twice.
    assert formats.derived(["ACC-joe@x.io", "ACC-ann@y.io"], requests) == (
        "ACC-<value from the message>"
    )


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        (["", ""], None),
        (["   ", " "], None),
        (["JR-4471", "JR-4471"], None),  # no value changes
        (["JR-44", "JR-4471"], "JR-<number from the message>"),  # one a prefix of the other
        (["JR-(4471).*", "JR-(0932).*"], "JR-(<number from the message>).*"),  # regex specials
        (["<b>4471</b>", "<b>0932</b>"], "<b><number from the message></b>"),  # refused later
        ([f"JR-{'4' * 5000}", f"JR-{'5' * 5000}"], "JR-<number from the message>"),
    ],
)
def test_derived_on_odd_answers_is_a_format_or_none_never_an_error(
    answers: list[str], expected: str | None
) -> None:
    requests = [f"ref {a.strip()[3:].strip('().*<>/b')}" for a in answers]
    assert formats.derived(answers, requests) == expected
