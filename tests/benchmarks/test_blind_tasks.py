"""The blind benchmark's families and runner, offline: structure only, no model quality."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.blind import FAMILIES
from benchmarks.blind.__main__ import main
from benchmarks.blind._family import Call, Example, Family, Outcome
from benchmarks.blind._runner import ARMS, fraction_of_gain, run_family


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_runs_every_arm_in_quick_mode(name: str, tmp_path: Path) -> None:
    out = tmp_path / f"blind-{name}.json"
    record = run_family(FAMILIES[name], out=out, quick=True, log=lambda _: None)
    written = json.loads(out.read_text())
    assert written["family"] == name
    assert set(written["arms"]) == set(ARMS) == set(record["arms"])
    for arm, result in written["arms"].items():
        assert "failure" not in result, (arm, result.get("failure"))
        assert 0.0 <= result["score"] <= 1.0
        assert result["seconds"] >= 0.0
        assert len(result["items"]) == written["heldout_size"]
    learned = written["arms"]["learned"]
    assert learned["queue_emptied"] is True
    assert isinstance(learned["rules"], str)
    assert learned["versions"] >= 0
    assert learned["learner_calls"]["calls"] > 0
    # Every feedback sent found its run; a run given none sent nothing.
    assert all(run["feedback_taken"] for run in learned["training"] if run["feedback"])
    assert all(run["feedback_taken"] is None for run in learned["training"] if not run["feedback"])


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_right_answer_scores_one_and_heldout_inputs_are_new(name: str) -> None:
    family = FAMILIES[name]
    assert 12 <= len(family.train) <= 24
    assert 12 <= len(family.heldout) <= 16
    assert not {ex.input for ex in family.train} & {ex.input for ex in family.heldout}
    assert {ex.kind for ex in family.heldout} <= {ex.kind for ex in family.train}
    for example in (*family.train, *family.heldout):
        right = Outcome(text=example.answer, calls=example.calls)
        assert family.score(example, right) == 1.0, example.input
        assert family.score(example, Outcome(text="")) == 0.0, example.input
        # A run given no feedback at all is an empty dict, right or wrong.
        given = family.feedback(example, right)
        assert given == {} or given["correct"] is True
        given = family.feedback(example, Outcome(text=""))
        assert given == {} or given["correct"] is False


def test_sealed_families_say_so_and_dev_families_are_the_first_four() -> None:
    names = list(FAMILIES)
    assert names[:4] == ["replies", "workflow", "mixed", "router"]
    assert names[4:] == [
        "codes",
        "extraction",
        "house_args",
        "thumbs",
        "notes",
        "labels",
        "intents",
        "formats",
        "remarks",
        "plainwords",
        "mixedsignals",
        "toolconv",
        "approvals",
        "confirmations",
        "toolnotes",
        "sorting",
        "housestyle",
        "toolerrors",
        "dispatch",
        "frontdesk",
        "toolrefusals",
        "railway",
        "campsite",
        "carhire",
        "staffing",
        "nursery",
        "driving",
        "museum",
        "brewery",
        "marina",
    ]
    for name, family in FAMILIES.items():
        assert family.sealed is (name not in names[:4])
        module = __import__(f"benchmarks.blind.{name}", fromlist=["FAMILY"])
        assert (
            "sealed: not run during development" in (module.__doc__ or "").lower()
        ) is family.sealed


def test_notes_reviewers_word_their_comments_differently_and_give_no_reply() -> None:
    family = FAMILIES["notes"]
    comments: dict[str, set[str]] = {}
    for example in family.train:
        sent = family.feedback(example, Outcome(text="Thanks, we will look into it."))
        assert sent["correct"] is False and sent["source"] == "reviewer"
        assert "ground_truth" not in sent
        comments.setdefault(example.kind, set()).add(sent["comment"])
    # Two training runs per kind, each with its own reviewer's wording.
    assert all(len(wordings) == 2 for wordings in comments.values()), comments
    assert len(comments) == 6


def test_notes_scores_the_convention_case_spaces_and_markup_aside() -> None:
    family = FAMILIES["notes"]
    by_kind: dict[str, Example] = {}
    for example in family.train:
        by_kind.setdefault(example.kind, example)  # the first run of each kind

    def scored(kind: str, text: str) -> float:
        return family.score(by_kind[kind], Outcome(text=text))

    assert scored("noise", "**Noise  report LOGGED.** We will speak to them.") == 1.0
    assert scored("noise", "Sorry about that. Noise report logged.") == 0.0
    assert scored("parking", "Happy to help. Reply confirm to book!") == 1.0
    assert scored("parking", "Reply CONFIRM to book. Your visitors can use bay 3 all day.") == 0.0
    assert scored("repair", "A technician will visit flat 4b tomorrow.") == 1.0
    assert scored("repair", "A technician will visit flat 14B tomorrow.") == 0.0
    assert scored("keys", "Please bring photo  ID to the site office.") == 1.0


def test_labels_has_two_training_runs_per_code_and_an_operators_correction() -> None:
    family = FAMILIES["labels"]
    codes = [example.answer for example in family.train]
    assert len(set(codes)) == 7
    assert all(codes.count(code) == 2 for code in codes)
    assert {example.answer for example in family.heldout} == set(codes)
    wrong = family.feedback(family.train[0], Outcome(text="Roads"))
    assert wrong == {"correct": False, "ground_truth": "SR-214", "source": "operator"}


def test_intents_has_two_runs_per_code_and_heldout_words_new_to_their_code() -> None:
    family = FAMILIES["intents"]
    codes = [example.answer for example in family.train]
    assert len(set(codes)) == 7
    assert all(codes.count(code) == 2 for code in codes)
    assert sorted(ex.answer for ex in family.heldout) == sorted(codes)
    # The distinctive verbs and nouns of a code's training messages stay out of its held-out
    # ones, so a rule listing them cannot catch the held-out messages.
    distinctive = {
        "Q-17": ("claim", "crash", "storm", "roof"),
        "Q-04": ("claim", "update", "assessor", "submitted"),
        "Q-31": ("cancel", "renew", "stop"),
        "Q-22": ("update", "address", "add", "driver"),
        "Q-09": ("quote", "cost", "insure"),
        "Q-45": ("direct debit", "premium", "instalment", "pay "),
        "Q-12": ("complaint", "rude", "unhappy", "service"),
    }
    for example in family.heldout:
        words = example.input.lower()
        assert not [w for w in distinctive[example.answer] if w in words], example.input
    wrong = family.feedback(family.train[0], Outcome(text="Claims"))
    assert wrong == {"correct": False, "ground_truth": "Q-17", "source": "operator"}


def test_formats_needs_the_format_not_a_copied_answer_and_keeps_case() -> None:
    family = FAMILIES["formats"]
    answers = [ex.answer for ex in (*family.train, *family.heldout)]
    assert len(set(answers)) == len(answers)  # every message carries its own values
    assert len({ex.kind for ex in family.train}) == 5
    first = family.train[0]
    assert family.score(first, Outcome(text=f'  "{first.answer}."  ')) == 1.0
    assert family.score(first, Outcome(text="RBK  NV412   2027-03-03")) == 1.0
    assert family.score(first, Outcome(text="rbk nv412 2027-03-03")) == 0.0
    assert family.score(first, Outcome(text="Record: RBK NV412 2027-03-03")) == 0.0
    assert family.score(first, Outcome(text=family.train[5].answer)) == 0.0
    wrong = family.feedback(first, Outcome(text="RBK NV412 03.03.2027"))
    assert wrong == {"correct": False, "ground_truth": first.answer, "source": "operator"}


def test_remarks_comments_vary_some_runs_get_none_and_no_reply_is_given() -> None:
    family = FAMILIES["remarks"]
    comments: dict[str, list[str]] = {}
    bare_verdicts = 0
    for example in family.train:
        sent = family.feedback(example, Outcome(text="Thanks for your message."))
        assert sent["correct"] is False and sent["source"] == "reviewer"
        assert "ground_truth" not in sent
        if "comment" in sent:
            comments.setdefault(example.kind, []).append(sent["comment"])
        else:
            bare_verdicts += 1
    assert bare_verdicts == 3
    assert len(comments) == 5  # every kind has at least one commented run
    flat = [comment for wordings in comments.values() for comment in wordings]
    assert len(set(flat)) == len(flat)
    assert "missing the account number" in flat


def _reply_scorer(name: str) -> Callable[[str, str], float]:
    """The family's score of a reply ``text`` for the first training example of ``kind``."""
    family = FAMILIES[name]
    by_kind: dict[str, Example] = {}
    for example in family.train:
        by_kind.setdefault(example.kind, example)
    return lambda kind, text: family.score(by_kind[kind], Outcome(text=text))


def test_remarks_scores_the_convention_case_spaces_and_markup_aside() -> None:
    scored = _reply_scorer("remarks")

    assert scored("safety", "**SAFETY  first:** call 0800 111 999.") == 1.0
    assert scored("safety", "Please leave the house. Safety first: call us.") == 0.0
    assert scored("tariff", "Done. Reply switch to confirm!") == 1.0
    assert scored("tariff", "Reply SWITCH to confirm. The new plan starts next month.") == 0.0
    assert scored("reading", "Reading saved for bw-204817.") == 1.0
    assert scored("reading", "Reading saved for BW-2048170.") == 0.0
    assert scored("hardship", "Our help  fund team can help.") == 1.0
    assert scored("bill", "We will check it within 10 working days.") == 1.0


def test_plainwords_training_uses_the_action_words_and_heldout_never_does() -> None:
    family = FAMILIES["plainwords"]
    actions = [example.answer for example in family.train]
    assert len(set(actions)) == 6
    assert all(2 <= actions.count(action) <= 3 for action in actions)
    heldout = [example.answer for example in family.heldout]
    assert set(heldout) == set(actions) and all(heldout.count(a) == 2 for a in heldout)
    stems = {"reschedule": "reschedul"}
    with_word = [ex for ex in family.train if stems.get(ex.answer, ex.answer) in ex.input.lower()]
    assert len(with_word) >= len(family.train) * 2 // 3
    # No held-out message holds any action's word, its own or another's.
    for example in family.heldout:
        words = example.input.lower()
        assert not [a for a in actions if stems.get(a, a) in words], example.input
    assert family.score(family.train[0], Outcome(text=" Refund. ")) == 1.0
    wrong = family.feedback(family.train[0], Outcome(text="cancel"))
    assert wrong == {"correct": False, "ground_truth": "refund", "source": "operator"}


def test_mixedsignals_feedback_is_a_label_a_comment_a_thumbs_or_nothing() -> None:
    family = FAMILIES["mixedsignals"]
    wrong = Outcome(text="Thanks for your message.")
    shapes: dict[str, list[str]] = {}
    order: list[str] = []
    for example in family.train:
        sent = family.feedback(example, wrong)
        if not sent:
            shape = "none"
        elif "ground_truth" in sent:
            assert sent == {
                "correct": False, "ground_truth": example.answer, "source": "operator"
            }  # fmt: skip
            shape = "label"
        elif "comment" in sent:
            assert sent["correct"] is False and sent["source"] == "reviewer"
            shape = "comment"
        else:
            assert sent == {"correct": False}  # an end user's thumbs: the default source
            shape = "bare"
        shapes.setdefault(shape, []).append(example.kind)
        order.append(shape)
    assert {shape: len(kinds) for shape, kinds in shapes.items()} == {
        "label": 4, "comment": 4, "bare": 3, "none": 3
    }  # fmt: skip
    # Every kind has a run that says what the right reply is.
    assert set(shapes["label"]) | set(shapes["comment"]) == {ex.kind for ex in family.train}
    # The quick run's four training runs hold every shape, the silent one included.
    assert sorted(order[:4]) == ["bare", "comment", "label", "none"]
    right = family.train[0]
    assert family.feedback(right, Outcome(text=right.answer))["correct"] is True
    assert family.score(right, Outcome(text="Renewed on al-30418.")) == 1.0
    assert family.score(right, Outcome(text="Renewed on AL-304181.")) == 0.0


def test_toolconv_scores_team_and_template_and_comments_vary_without_a_right_call() -> None:
    family = FAMILIES["toolconv"]
    comments = set()
    for example in family.train:
        sent = family.feedback(example, Outcome(text="Done."))
        assert sent["correct"] is False and sent["source"] == "reviewer"
        assert "ground_truth" not in sent
        comments.add(sent["comment"])
    assert len(comments) == len(family.train)  # every reviewer words it their own way
    assert len({ex.kind for ex in family.train}) == 5
    first = family.train[0]

    def scored(*calls: Call) -> float:
        return family.score(first, Outcome(text="", calls=calls))

    right = {"team": "hk-02", "template": " Amenity-Drop", "details": "anything"}
    assert scored(Call("log_request", right)) == 1.0
    assert scored(Call("log_request", {**right, "team": "HK-2"})) == 0.0
    assert scored(Call("log_request", right), Call("log_request", {**right, "details": "x"})) == 0.0
    assert family.feedback(first, Outcome(text="", calls=(Call("log_request", right),))) == {
        "correct": True, "source": "reviewer"
    }  # fmt: skip


def test_approvals_is_mostly_a_reviewers_bare_verdict_and_one_operator_label_per_code() -> None:
    family = FAMILIES["approvals"]
    codes = [example.answer for example in family.train]
    assert len(set(codes)) == 7 and all(codes.count(code) == 3 for code in codes)
    held = [example.answer for example in family.heldout]
    assert set(held) == set(codes) and all(held.count(code) == 2 for code in held)
    labelled: list[str] = []
    for example in family.train:
        sent = family.feedback(example, Outcome(text="BV-99"))
        if "ground_truth" in sent:
            assert sent == {"correct": False, "ground_truth": example.answer, "source": "operator"}
            labelled.append(example.answer)
        else:
            # A reviewer's verdict alone: no right code, no comment.
            assert sent == {"correct": False, "source": "reviewer"}
    assert sorted(labelled) == sorted(set(codes))  # one labelled run per code, a third in all
    first = family.train[0]
    assert family.feedback(first, Outcome(text=" bv-03. "))["correct"] is True
    assert family.feedback(family.train[1], Outcome(text="BV-18")) == {
        "correct": True, "source": "reviewer"
    }  # fmt: skip
    # The app's prompt names each code's team, never which messages go there.
    for code in set(codes):
        line = next(
            line for line in family.system_prompt.splitlines() if line.startswith(f"- {code}")
        )
        assert len(line.split(": ", 1)[1].split()) <= 2, line


def test_confirmations_training_holds_the_label_words_and_heldout_never_does() -> None:
    family = FAMILIES["confirmations"]
    labels = [example.answer for example in family.train]
    assert len(set(labels)) == 6 and all(labels.count(label) == 3 for label in labels)
    held = [example.answer for example in family.heldout]
    assert set(held) == set(labels) and all(held.count(label) == 2 for label in held)
    stems = {"dispute": "disput", "replace_card": "replac", "close": "clos"}
    with_word = [ex for ex in family.train if stems.get(ex.answer, ex.answer) in ex.input.lower()]
    assert len(with_word) >= len(family.train) * 2 // 3
    for example in family.heldout:
        words = example.input.lower()
        assert not [a for a in labels if stems.get(a, a) in words], example.input
    assert family.score(family.train[1], Outcome(text="Replace_card.")) == 1.0
    assert family.score(family.train[1], Outcome(text="replace card")) == 0.0
    wrong = family.feedback(family.train[0], Outcome(text="statement"))
    assert wrong == {"correct": False, "ground_truth": "dispute", "source": "operator"}


def test_toolnotes_feedback_is_the_right_call_a_comment_or_nothing() -> None:
    family = FAMILIES["toolnotes"]
    shapes: dict[str, list[str]] = {}
    order: list[str] = []
    for example in family.train:
        sent = family.feedback(example, Outcome(text="Booked."))
        if not sent:
            shape = "none"
        elif "ground_truth" in sent:
            # The right call written as Python, as tool-call ground truth is given.
            truth = example.calls[0].render()
            assert truth.startswith("book_job(bay=")
            assert sent == {"correct": False, "ground_truth": truth, "source": "operator"}
            shape = "label"
        else:
            assert sent["correct"] is False and sent["source"] == "reviewer"
            assert example.calls[0].args["bay"] in sent["comment"]
            shape = "comment"
        shapes.setdefault(shape, []).append(example.kind)
        order.append(shape)
    assert {shape: len(kinds) for shape, kinds in shapes.items()} == {
        "label": 5, "comment": 5, "none": 4
    }  # fmt: skip
    assert set(shapes["label"]) & set(shapes["comment"]) == set(shapes["label"]) == {
        ex.kind for ex in family.train
    }  # fmt: skip
    assert {"label", "comment", "none"} <= set(order[:4])  # the quick run sees every shape
    first = family.train[0]

    def scored(*calls: Call) -> float:
        return family.score(first, Outcome(text="", calls=calls))

    right = {"bay": " North-4", "note": "anything at all"}
    assert scored(Call("book_job", right)) == 1.0
    assert scored(Call("book_job", {**right, "bay": "north-2"})) == 0.0
    assert scored(Call("book_job", right), Call("book_job", {**right, "note": "x"})) == 0.0
    assert (
        family.feedback(first, Outcome(text="", calls=(Call("book_job", right),)))["correct"]
        is True
    )


def test_sorting_has_two_runs_per_code_a_neutral_prompt_and_heldout_in_new_words() -> None:
    family = FAMILIES["sorting"]
    codes = [example.answer for example in family.train]
    assert len(set(codes)) == 8 and all(codes.count(code) == 2 for code in codes)
    held = [example.answer for example in family.heldout]
    assert sorted(held) == sorted(codes)
    # The app's prompt gives each code a desk's place, never a topic the rules route by.
    topics = ("transcript", "fee", "visa", "course", "hall", "disab", "graduat", "exam")
    for code in set(codes):
        line = next(
            line for line in family.system_prompt.splitlines() if line.startswith(f"- {code}")
        )
        assert not [word for word in topics if word in line.lower()], line
    # The key nouns of a code's training messages stay out of its held-out ones.
    key_nouns = {
        "R4K": ("transcript", "grades", "employer", "certificate", "copy"),
        "Z9M": ("grandmother", "time", "essay", "flu", "exam"),
        "B2T": ("tuition", "instalment", "fee", "student"),
        "H6W": ("letter", "enrolment", "visa", "cas"),
        "P3D": ("chemistry", "switch", "module", "change"),
        "V8N": ("heating", "room", "hall", "mould", "bathroom", "flat"),
        "C5J": ("dyslexia", "extra time", "exams", "wheelchair", "lecture"),
        "L7F": ("ticket", "graduation", "ceremony", "gown"),
    }
    for example in family.heldout:
        words = example.input.lower()
        assert not [w for w in key_nouns[example.answer] if w in words], example.input
    wrong = family.feedback(family.train[0], Outcome(text="Records"))
    assert wrong == {"correct": False, "ground_truth": "R4K", "source": "operator"}
    assert family.score(family.train[0], Outcome(text=' "r4k." ')) == 1.0


def test_housestyle_gives_reviewer_notes_or_bare_approvals_and_never_a_reply() -> None:
    family = FAMILIES["housestyle"]
    comments: dict[str, list[str]] = {}
    silent = 0
    # Wrong for every kind: no reference, number, page or sign-off, and over 20 words.
    wrong = Outcome(text=" ".join(["Thanks for getting in touch, we will look into it."] * 3))
    for example in family.train:
        sent = family.feedback(example, wrong)
        if not sent:
            silent += 1
            continue
        assert sent["correct"] is False and sent["source"] == "reviewer"
        assert "ground_truth" not in sent
        comments.setdefault(example.kind, []).append(sent["comment"])
        right = family.feedback(example, Outcome(text=example.answer))
        assert right == {"correct": True, "source": "reviewer"}
    assert silent == 3
    assert len(comments) == 5  # every kind has a reviewer's note
    flat = [comment for wordings in comments.values() for comment in wordings]
    assert len(set(flat)) == len(flat)
    assert "MP-51907" in " ".join(flat)  # the note names that run's own reference
    assert len(family.train) == 15 and len(family.heldout) == 12


def test_housestyle_scores_each_kinds_convention() -> None:
    scored = _reply_scorer("housestyle")

    assert scored("exchange", "Booking mp-48213 is moved.") == 1.0
    assert scored("exchange", "Booking MP-482130 is moved.") == 0.0
    assert scored("access", "Call the access line on 0161  496 0732.") == 1.0
    assert scored("access", "Call the access line on 01614960732.") == 0.0
    assert scored("lost", "See Marlowe.org.uk/lost for found items.") == 1.0
    assert scored("groups", "We can hold the seats.\n\n**Group Sales, The Marlowe**") == 1.0
    assert scored("groups", "Group Sales, The Marlowe. We can hold the seats for two weeks.") == 0.0
    assert scored("times", "It starts at 7.30pm.") == 1.0
    assert scored("times", " ".join(["word"] * 21)) == 0.0


def test_toolerrors_tool_refuses_a_wrong_vehicle_with_its_own_error_as_a_tool_error() -> None:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import ToolException

    from benchmarks.blind._runner import _tools

    family = FAMILIES["toolerrors"]
    book_job = family.tools[0]
    right = {"service": "piano", "crew": "crew-4", "vehicle": "Tail-Lift ", "notes": "grand"}
    assert book_job(**right).startswith("Job booked")
    with pytest.raises(ToolException, match="'piano' job goes out with vehicle 'tail-lift'"):
        book_job(**{**right, "vehicle": "van"})
    with pytest.raises(ToolException, match="Unknown service 'removal'"):
        book_job(**{**right, "service": "removal"})
    # Crews are the operator's to correct: the booking system does not check them.
    assert book_job(**{**right, "crew": "crew-2"}).startswith("Job booked")
    # In the runner a refusal goes back to the model as an error result, not a failed run.
    (tool,) = _tools(family)
    call = {"name": "book_job", "args": {**right, "vehicle": "van"}, "id": "c1"}
    message = tool.invoke({**call, "type": "tool_call"})
    assert isinstance(message, ToolMessage) and message.status == "error"
    assert "Fleet check failed" in message.text


def _one_operator_call_per_kind(family: Family, call_start: str) -> Example:
    """Check a tool family sends the right call on one run per kind and nothing on the
    others (both among the quick run's first four); return its first training example."""
    labelled: list[str] = []
    order: list[bool] = []
    for example in family.train:
        sent = family.feedback(example, Outcome(text="Done."))
        order.append(bool(sent))
        if sent:
            truth = example.calls[0].render()
            assert truth.startswith(call_start)
            assert sent == {"correct": False, "ground_truth": truth, "source": "operator"}
            labelled.append(example.kind)
    assert sorted(labelled) == sorted({ex.kind for ex in family.train})
    assert len(labelled) == 5 and len(family.train) == 14
    assert True in order[:4] and False in order[:4]
    return family.train[0]


def test_toolerrors_sends_one_operator_call_per_service_and_nothing_on_the_rest() -> None:
    family = FAMILIES["toolerrors"]
    first = _one_operator_call_per_kind(family, "book_job(service=")

    def scored(*calls: Call) -> float:
        return family.score(first, Outcome(text="", calls=calls))

    right = {"service": "Piano", "crew": "crew-4", "vehicle": "tail-lift", "notes": "anything"}
    assert scored(Call("book_job", right)) == 1.0
    assert scored(Call("book_job", {**right, "crew": "crew-2"})) == 0.0
    # A refused call counts: the run broke the fleet rule before getting it right.
    assert scored(Call("book_job", {**right, "vehicle": "van"}), Call("book_job", right)) == 0.0


def test_dispatch_has_two_runs_per_code_a_neutral_prompt_and_heldout_in_new_words() -> None:
    family = FAMILIES["dispatch"]
    codes = [example.answer for example in family.train]
    assert len(set(codes)) == 8 and all(codes.count(code) == 2 for code in codes)
    held = [example.answer for example in family.heldout]
    assert sorted(held) == sorted(codes)
    # The app's prompt gives each code a person's name and extension, never a topic.
    for code in set(codes):
        line = next(
            line for line in family.system_prompt.splitlines() if line.startswith(f"- {code}:")
        )
        name, extension = line.split(": ", 1)[1].split(", ")
        assert len(name.split()) == 2 and extension.startswith("ext. "), line
    # The key nouns of a code's training messages stay out of its held-out ones.
    key_nouns = {
        "7GQ2": ("freeze", "membership", "hold", "travel", "wrist"),
        "K3VW": ("swim", "lesson", "daughter", "level", "class", "spaces"),
        "X8MB": ("personal", "trainer", "workout", "programme", "coach"),
        "2PLN": ("goggles", "changing", "handed in", "bottle", "left"),
        "D6RJ": ("direct debit", "charged", "rate", "peak", "twice"),
        "Y5HT": ("treadmill", "belt", "sauna", "cold"),
        "M9CZ": ("hire", "hall", "party", "studio", "dinner", "club"),
        "4FKS": ("book", "class", "spin", "yoga", "waiting list", "full", "place"),
    }
    for example in family.heldout:
        words = example.input.lower()
        assert not [w for w in key_nouns[example.answer] if w in words], example.input
    wrong = family.feedback(family.train[0], Outcome(text="Membership"))
    assert wrong == {"correct": False, "ground_truth": "7GQ2", "source": "operator"}
    assert family.score(family.train[0], Outcome(text=' "7gq2." ')) == 1.0


def test_frontdesk_gives_reviewer_notes_bare_verdicts_or_nothing_and_never_a_reply() -> None:
    family = FAMILIES["frontdesk"]
    comments: dict[str, list[str]] = {}
    shapes: list[str] = []
    # Wrong for every kind: no reference, number, page, sign-off or numbered steps.
    wrong = Outcome(text="Thanks for getting in touch, we will look into it.")
    for example in family.train:
        sent = family.feedback(example, wrong)
        if not sent:
            shapes.append("none")
            continue
        assert sent["correct"] is False and sent["source"] == "reviewer"
        assert "ground_truth" not in sent
        if "comment" in sent:
            assert sent["comment"]
            comments.setdefault(example.kind, []).append(sent["comment"])
            shapes.append("comment")
        else:
            shapes.append("verdict")
        right = family.feedback(example, Outcome(text=example.answer))
        assert right == {"correct": True, "source": "reviewer"}
    assert {shape: shapes.count(shape) for shape in set(shapes)} == {
        "comment": 10, "verdict": 2, "none": 3
    }  # fmt: skip
    assert {kind: len(notes) for kind, notes in comments.items()} == dict.fromkeys(
        ("moving", "urgent", "prices", "register", "aftercare"), 2
    )
    flat = [comment for wordings in comments.values() for comment in wordings]
    assert len(set(flat)) == len(flat)
    assert "KD-38854" in " ".join(flat)  # the note names that run's own reference
    assert set(shapes[:4]) == {"comment", "verdict", "none"}  # the quick run sees each shape
    assert len(family.train) == 15 and len(family.heldout) == 12


def test_frontdesk_scores_each_kinds_convention() -> None:
    scored = _reply_scorer("frontdesk")

    assert scored("moving", "Appointment kd-40721 is cancelled.") == 1.0
    assert scored("moving", "Appointment KD-407210 is cancelled.") == 0.0
    assert scored("urgent", "Please ring 0113  496 0581 straight away.") == 1.0
    assert scored("urgent", "Please ring 01134960581 straight away.") == 0.0
    assert scored("prices", "See Kingsmeaddental.co.uk/prices for every fee.") == 1.0
    assert scored("register", "Welcome aboard.\n\n**New Patients Team, Kingsmead Dental**") == 1.0
    assert (
        scored("register", "New Patients Team, Kingsmead Dental. Bring photo ID to your check-up.")
        == 0.0
    )
    assert scored("aftercare", "Tonight:\n1. Rest.\n2) No hot drinks.") == 1.0
    assert scored("aftercare", "Tonight:\n**1.** Rest.\n**2.** No hot drinks.") == 1.0
    assert scored("aftercare", "Tonight: 1. rest, 2. no hot drinks.") == 0.0
    assert scored("aftercare", "Tonight:\n- Rest.\n- No hot drinks.") == 0.0


def test_toolrefusals_press_refuses_a_wrong_paper_or_finish_as_a_tool_error() -> None:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import ToolException

    from benchmarks.blind._runner import _tools

    family = FAMILIES["toolrefusals"]
    place_order = family.tools[0]
    right = {"product": "Wedding", "paper": "cotton-350 ", "finish": "Gold-Foil", "details": "80"}
    assert place_order(**right).startswith("Order placed")
    with pytest.raises(ToolException, match="'wedding' orders print on paper 'cotton-350'"):
        place_order(**{**right, "paper": "350gsm"})
    with pytest.raises(ToolException, match="'wedding' orders take finish 'gold-foil'"):
        place_order(**{**right, "finish": "matt-lam"})
    with pytest.raises(ToolException, match="Unknown product 'invitations'"):
        place_order(**{**right, "product": "invitations"})
    # The wrong product with that product's own values passes: only the operator catches it.
    assert place_order(product="cards", paper="board-400", finish="matt-lam", details="80")
    # In the runner a refusal goes back to the model as an error result, not a failed run.
    (tool,) = _tools(family)
    call = {"name": "place_order", "args": {**right, "finish": "none"}, "id": "c1"}
    message = tool.invoke({**call, "type": "tool_call"})
    assert isinstance(message, ToolMessage) and message.status == "error"
    assert "Finishing check failed" in message.text


def test_toolrefusals_sends_one_operator_call_per_product_and_nothing_on_the_rest() -> None:
    family = FAMILIES["toolrefusals"]
    first = _one_operator_call_per_kind(family, "place_order(product=")

    def scored(*calls: Call) -> float:
        return family.score(first, Outcome(text="", calls=calls))

    right = {"product": "Cards", "paper": "board-400", "finish": " matt-lam", "details": "any"}
    assert scored(Call("place_order", right)) == 1.0
    assert scored(Call("place_order", {**right, "finish": "none"})) == 0.0
    # A refused call counts: the run broke a press rule before getting it right.
    assert (
        scored(Call("place_order", {**right, "paper": "350gsm"}), Call("place_order", right)) == 0.0
    )


def test_railway_has_two_runs_per_code_a_neutral_prompt_and_heldout_in_new_words() -> None:
    family = FAMILIES["railway"]
    codes = [example.answer for example in family.train]
    assert len(set(codes)) == 8 and all(codes.count(code) == 2 for code in codes)
    held = [example.answer for example in family.heldout]
    assert sorted(held) == sorted(codes)
    # The app's prompt gives each code a person's name and office, never a topic.
    for code in set(codes):
        line = next(
            line for line in family.system_prompt.splitlines() if line.startswith(f"- {code}:")
        )
        name, office = line.split(": ", 1)[1].split(", ")
        assert 2 <= len(name.split()) <= 3 and office.endswith(" office"), line
    # The key nouns of a code's training messages stay out of its held-out ones.
    key_nouns = {
        "W3NQ": ("late", "compensation", "cancel", "delay", "claim", "money back"),
        "8KTE": ("wheelchair", "ramp", "assistance", "on board", "elderly", "mother"),
        "J5RV": ("left", "laptop", "bag", "umbrella", "handed in", "found"),
        "C2XH": ("season", "ticket", "renew", "annual", "monthly", "refund"),
        "6MFZ": ("penalty", "fare", "fine", "appeal", "inspector", "machine"),
        "Y9DL": ("bike", "bicycle", "reserve", "space", "book"),
        "P4HU": ("group", "people", "school", "trip", "discount", "book"),
        "T7BK": ("conductor", "guard", "rude", "thank", "staff"),
    }
    for example in family.heldout:
        words = example.input.lower()
        assert not [w for w in key_nouns[example.answer] if w in words], example.input
    wrong = family.feedback(family.train[0], Outcome(text="Delay Repay"))
    assert wrong == {"correct": False, "ground_truth": "W3NQ", "source": "operator"}
    assert family.score(family.train[0], Outcome(text=' "w3nq." ')) == 1.0


def test_campsite_gives_reviewer_notes_or_nothing_and_never_a_reply() -> None:
    family = FAMILIES["campsite"]
    comments: dict[str, list[str]] = {}
    shapes: list[str] = []
    # Wrong for every kind: no reference, number, page, closing line or 24-hour time.
    wrong = Outcome(text="Thanks for getting in touch, we will look into it from 2pm.")
    for example in family.train:
        sent = family.feedback(example, wrong)
        if not sent:
            shapes.append("none")
            continue
        assert set(sent) == {"correct", "comment", "source"}
        assert sent["correct"] is False and sent["source"] == "reviewer" and sent["comment"]
        comments.setdefault(example.kind, []).append(sent["comment"])
        shapes.append("comment")
        right = family.feedback(example, Outcome(text=example.answer))
        assert right == {"correct": True, "source": "reviewer"}
    assert shapes.count("comment") == 12 and shapes.count("none") == 3
    assert {kind: len(notes) >= 2 for kind, notes in comments.items()} == dict.fromkeys(
        ("booking", "night", "pets", "group", "times"), True
    )
    flat = [comment for wordings in comments.values() for comment in wordings]
    assert len(set(flat)) == len(flat)
    assert "PW-29506" in " ".join(flat)  # the note names that run's own reference
    assert set(shapes[:4]) == {"comment", "none"}  # the quick run sees both
    assert len(family.train) == 15 and len(family.heldout) == 12


def test_campsite_scores_each_kinds_convention() -> None:
    scored = _reply_scorer("campsite")

    assert scored("booking", "Booking pw-31874 is cancelled.") == 1.0
    assert scored("booking", "Booking PW-318740 is cancelled.") == 0.0
    assert scored("night", "Please ring 01768  775 019 straight away.") == 1.0
    assert scored("night", "Please ring 01768775019 straight away.") == 0.0
    assert scored("pets", "See Pinewoodpark.co.uk/pets for the dog walk.") == 1.0
    closing = "Our rallies team will confirm your pitches within two working days."
    assert scored("group", f"Lovely!\n\n**{closing}**") == 1.0
    assert scored("group", f"{closing} Send us your dates and the number of vans, please.") == 0.0
    assert scored("times", "Arrive from 14:00 until 20:00; leave by 11:00.") == 1.0
    assert scored("times", "Arrive from 9:30.") == 1.0
    assert scored("times", "Arrive from 14:00 (2pm) until 20:00.") == 0.0
    assert scored("times", "Arrive from 2 p.m. until 8 p.m.") == 0.0
    assert scored("times", "Arrive any time after lunch.") == 0.0


def test_carhire_city_is_the_users_word_and_desk_a_house_value() -> None:
    family = FAMILIES["carhire"]
    cities = {ex.calls[0].args["city"] for ex in family.train}
    for example in (*family.train, *family.heldout):
        assert example.calls[0].args["city"].lower() in example.input.lower()
    # Held-out requests name other cities: a rule tied to a training city cannot help.
    assert not cities & {ex.calls[0].args["city"] for ex in family.heldout}
    labelled: list[str] = []
    order: list[bool] = []
    for example in family.train:
        sent = family.feedback(example, Outcome(text="Done."))
        order.append(bool(sent))
        if sent:
            truth = example.calls[0].render()
            assert truth.startswith("open_request(city=")
            assert sent == {"correct": False, "ground_truth": truth, "source": "operator"}
            labelled.append(example.kind)
    assert sorted(set(labelled)) == sorted({ex.kind for ex in family.train})
    assert len(labelled) == 11 and len(family.train) == 14
    assert True in order[:4] and False in order[:4]
    first = family.train[0]
    right = {"city": " bristol", "desk": "RES-1", "summary": "anything"}

    def scored(*calls: Call) -> float:
        return family.score(first, Outcome(text="", calls=calls))

    assert scored(Call("open_request", right)) == 1.0
    assert scored(Call("open_request", {**right, "city": "Glasgow"})) == 0.0
    assert scored(Call("open_request", {**right, "desk": "res-4"})) == 0.0
    assert scored(Call("open_request", right), Call("open_request", {**right, "desk": "x"})) == 0.0


def test_staffing_interleaves_three_jobs_with_labels_and_reviewer_notes() -> None:
    family = FAMILIES["staffing"]
    assert [ex.kind for ex in family.train[:3]] == ["status", "client", "vacancy"]
    for kind in ("status", "client", "vacancy"):
        assert sum(ex.kind == kind for ex in family.train) == 6
        assert sum(ex.kind == kind for ex in family.heldout) == 4
    # The app's prompt lists the codes, not what they mean, and not the terms page.
    prompt = family.system_prompt.lower()
    assert "st-10" in prompt
    assert not [w for w in ("accept", "withdraw", "another", "/terms", "jr-") if w in prompt]
    wrong = Outcome(text="Thanks, we will come back to you.")
    comments: list[str] = []
    for example in family.train:
        sent = family.feedback(example, wrong)
        if example.kind == "client":
            assert set(sent) == {"correct", "comment", "source"}
            assert sent["correct"] is False and sent["source"] == "reviewer"
            comments.append(sent["comment"])
            right = family.feedback(example, Outcome(text=example.answer))
            assert right == {"correct": True, "source": "reviewer"}
        else:
            assert sent == {"correct": False, "ground_truth": example.answer, "source": "operator"}
    assert len(set(comments)) == 6
    vacancy = next(ex for ex in family.train if ex.kind == "vacancy")
    assert family.score(vacancy, Outcome(text=" jr-4471. ")) == 1.0
    assert family.score(vacancy, Outcome(text="JR4471")) == 0.0
    client = next(ex for ex in family.train if ex.kind == "client")
    assert family.score(client, Outcome(text="See HollisRecruit.co.uk/terms.")) == 1.0


def test_nursery_child_is_the_parents_word_and_board_a_house_value() -> None:
    family = FAMILIES["nursery"]
    children = {ex.calls[0].args["child"] for ex in family.train}
    for example in (*family.train, *family.heldout):
        assert example.calls[0].args["child"].lower() in example.input.lower()
    # Held-out messages are about other children: a rule tied to a training name cannot help.
    assert not children & {ex.calls[0].args["child"] for ex in family.heldout}
    labelled: list[str] = []
    order: list[bool] = []
    for example in family.train:
        sent = family.feedback(example, Outcome(text="Done."))
        order.append(bool(sent))
        if sent:
            truth = example.calls[0].render()
            assert truth.startswith("post_note(child=")
            assert sent == {"correct": False, "ground_truth": truth, "source": "operator"}
            labelled.append(example.kind)
    assert sorted(set(labelled)) == sorted({ex.kind for ex in family.train})
    assert len(labelled) == 11 and len(family.train) == 14
    assert True in order[:4] and False in order[:4]
    # Someone else collecting: the right child is the child, not the adult the message names.
    collect = next(ex for ex in family.train if ex.kind == "collect")
    assert "Pat" in collect.input and collect.calls[0].args["child"] == "Alfie"
    right = {"child": " alfie", "board": "DOOR-6", "note": "anything"}

    def scored(*calls: Call) -> float:
        return family.score(collect, Outcome(text="", calls=calls))

    assert scored(Call("post_note", right)) == 1.0
    assert scored(Call("post_note", {**right, "child": "Pat"})) == 0.0
    assert scored(Call("post_note", {**right, "board": "reg-2"})) == 0.0
    assert scored(Call("post_note", right), Call("post_note", {**right, "board": "x"})) == 0.0
    assert family.feedback(collect, Outcome(text="", calls=(Call("post_note", right),))) == {
        "correct": True, "ground_truth": collect.answer, "source": "operator"
    }  # fmt: skip


def test_driving_gives_reviewer_notes_or_nothing_and_never_a_reply() -> None:
    family = FAMILIES["driving"]
    comments: dict[str, list[str]] = {}
    shapes: list[str] = []
    # Wrong for every kind: no reference, number, page, closing line or price with pence.
    wrong = Outcome(text="Thanks for getting in touch, it's 38 pounds and we will look into it.")
    for example in family.train:
        sent = family.feedback(example, wrong)
        if not sent:
            shapes.append("none")
            continue
        assert set(sent) == {"correct", "comment", "source"}
        assert sent["correct"] is False and sent["source"] == "reviewer" and sent["comment"]
        comments.setdefault(example.kind, []).append(sent["comment"])
        shapes.append("comment")
        right = family.feedback(example, Outcome(text=example.answer))
        assert right == {"correct": True, "source": "reviewer"}
    assert shapes.count("comment") == 12 and shapes.count("none") == 3
    assert {kind: len(notes) >= 2 for kind, notes in comments.items()} == dict.fromkeys(
        ("lesson", "complaint", "test", "intensive", "prices"), True
    )
    flat = [comment for wordings in comments.values() for comment in wordings]
    assert len(set(flat)) == len(flat)
    assert "FS-61470" in " ".join(flat)  # the note names that run's own reference
    assert set(shapes[:4]) == {"comment", "none"}  # the quick run sees both
    assert len(family.train) == 15 and len(family.heldout) == 12
    # The app's prompt gives the prices in words, never the house way to write them.
    assert "38 pounds" in family.system_prompt and "£" not in family.system_prompt


def test_driving_scores_each_kinds_convention() -> None:
    scored = _reply_scorer("driving")

    assert scored("lesson", "Lesson fs-58213 is cancelled.") == 1.0
    assert scored("lesson", "Lesson FS-582130 is cancelled.") == 0.0
    assert scored("complaint", "Please ring 01632  960 418 today.") == 1.0
    assert scored("complaint", "Please ring 01632960418 today.") == 0.0
    assert scored("test", "See Fellsidedriving.co.uk/test-day for the documents.") == 1.0
    closing = "Our course planner will call you within one working day to fix your dates."
    assert scored("intensive", f"Yes, we do.\n\n**{closing}**") == 1.0
    assert scored("intensive", f"{closing} Courses run Monday to Friday, 9:00 to 15:00.") == 0.0
    assert scored("prices", "An hour is £38.00; ten hours are £ 350.00 or £1,200.00.") == 1.0
    assert scored("prices", "An hour is £38.00.") == 1.0
    assert scored("prices", "An hour is £38, ten hours £350.00.") == 0.0
    assert scored("prices", "An hour is £38.00 (38 pounds).") == 0.0
    assert scored("prices", "An hour is 38.00 GBP.") == 0.0
    assert scored("prices", "An hour is £38.5.") == 0.0
    assert scored("prices", "Lessons are good value.") == 0.0


def test_museum_has_two_runs_per_code_a_neutral_prompt_and_heldout_in_new_words() -> None:
    family = FAMILIES["museum"]
    codes = [example.answer for example in family.train]
    assert len(set(codes)) == 8 and all(codes.count(code) == 2 for code in codes)
    held = [example.answer for example in family.heldout]
    assert sorted(held) == sorted(codes)
    # The app's prompt gives each code a mailbox and a wing, never a topic.
    for code in set(codes):
        line = next(
            line for line in family.system_prompt.splitlines() if line.startswith(f"- {code}:")
        )
        mailbox, place = line.split(": ", 1)[1].split(", ")
        places = {"east wing", "west wing", "north wing", "old stables"}
        assert mailbox.startswith("mailbox ") and place in places, line
    # The key nouns of a code's training messages stay out of its held-out ones.
    key_nouns = {
        "Q8LM": ("member", "renew", "card", "annual", "family", "grandparent"),
        "4HTX": ("class", "trip", "pupil", "school", "workshop", "roman"),
        "N2CW": ("donat", "collection", "medal", "photograph", "grandfather", "loft"),
        "7RBZ": ("hire", "wedding", "hall", "corporate", "dinner", "cost", "galler"),
        "K5PD": ("photo", "painting", "image", "reproduce", "book", "magazine", "cover"),
        "E6VJ": ("research", "record", "appointment", "store", "display", "family history"),
        "H3SU": ("volunteer", "guide", "retired", "role", "student", "summer"),
        "9FKA": ("order", "poster", "shop", "arrive", "mug", "crack", "replace", "gift"),
    }
    for example in family.heldout:
        words = example.input.lower()
        assert not [w for w in key_nouns[example.answer] if w in words], example.input
    wrong = family.feedback(family.train[0], Outcome(text="Membership"))
    assert wrong == {"correct": False, "ground_truth": "Q8LM", "source": "operator"}
    assert family.score(family.train[0], Outcome(text=' "q8lm." ')) == 1.0
    assert family.score(family.train[0], Outcome(text="Q8LM: membership")) == 0.0


def test_brewery_interleaves_three_jobs_with_labels_and_reviewer_notes() -> None:
    family = FAMILIES["brewery"]
    assert [ex.kind for ex in family.train[:3]] == ["cask", "visit", "order"]
    for kind in ("cask", "visit", "order"):
        assert sum(ex.kind == kind for ex in family.train) == 6
        assert sum(ex.kind == kind for ex in family.heldout) == 4
    # The app's prompt lists the codes, not what they mean, the sign-off or the reference form.
    prompt = family.system_prompt.lower()
    assert "q7" in prompt
    assert not [w for w in ("flat", "sour", "cloud", "cheers", "dr/") if w in prompt]
    # Every order's reference is built from a number of its own.
    orders = [ex.answer for ex in (*family.train, *family.heldout) if ex.kind == "order"]
    assert len(set(orders)) == len(orders) == 10
    wrong = Outcome(text="Thanks, we will come back to you.")
    comments: list[str] = []
    for example in family.train:
        sent = family.feedback(example, wrong)
        if example.kind == "visit":
            assert set(sent) == {"correct", "comment", "source"}
            assert sent["correct"] is False and sent["source"] == "reviewer"
            comments.append(sent["comment"])
            right = family.feedback(example, Outcome(text=example.answer))
            assert right == {"correct": True, "source": "reviewer"}
        else:
            assert sent == {"correct": False, "ground_truth": example.answer, "source": "operator"}
    assert len(set(comments)) == 6
    order = next(ex for ex in family.train if ex.kind == "order")
    assert family.score(order, Outcome(text=" dr/5517. ")) == 1.0
    assert family.score(order, Outcome(text="DR-5517")) == 0.0
    assert family.score(order, Outcome(text="5517")) == 0.0
    visit = next(ex for ex in family.train if ex.kind == "visit")
    sign_off = "Cheers from the Hopwell tap room team."
    assert family.score(visit, Outcome(text=f"Tours run on Saturdays.\n\n**{sign_off}**")) == 1.0
    assert family.score(visit, Outcome(text=f"{sign_off} Tours run on Saturdays at noon.")) == 0.0


def test_marina_vessel_is_the_owners_word_and_yard_a_house_value() -> None:
    family = FAMILIES["marina"]
    vessels = {ex.calls[0].args["vessel"] for ex in family.train}
    for example in (*family.train, *family.heldout):
        assert example.calls[0].args["vessel"].lower() in example.input.lower()
    # Held-out requests are about other boats: a rule tied to a training name cannot help.
    assert not vessels & {ex.calls[0].args["vessel"] for ex in family.heldout}
    labelled: list[str] = []
    order: list[bool] = []
    for example in family.train:
        sent = family.feedback(example, Outcome(text="Done."))
        order.append(bool(sent))
        if sent:
            truth = example.calls[0].render()
            assert truth.startswith("book_job(vessel=")
            assert sent == {"correct": False, "ground_truth": truth, "source": "operator"}
            labelled.append(example.kind)
    assert sorted(set(labelled)) == sorted({ex.kind for ex in family.train})
    assert len(labelled) == 11 and len(family.train) == 14
    assert True in order[:4] and False in order[:4]
    # A neighbour's boat in the message: the right vessel is the owner's, not the neighbour's.
    berth = next(ex for ex in family.train if "Osprey" in ex.input)
    assert berth.calls[0].args["vessel"] == "Lady Grace"
    right = {"vessel": " lady  grace", "yard": "PONT-4", "note": "anything"}

    def scored(*calls: Call) -> float:
        return family.score(berth, Outcome(text="", calls=calls))

    assert scored(Call("book_job", right)) == 1.0
    assert scored(Call("book_job", {**right, "vessel": "Osprey"})) == 0.0
    assert scored(Call("book_job", {**right, "yard": "crane-2"})) == 0.0
    assert scored(Call("book_job", right), Call("book_job", {**right, "yard": "x"})) == 0.0
    assert family.feedback(berth, Outcome(text="", calls=(Call("book_job", right),))) == {
        "correct": True, "ground_truth": berth.answer, "source": "operator"
    }  # fmt: skip


def test_fraction_of_gain_is_none_without_a_gain_on_offer() -> None:
    arms = {"no_rules": {"score": 0.2}, "hand_rules": {"score": 0.6}, "learned": {"score": 0.4}}
    assert fraction_of_gain(arms) == 0.5
    arms["hand_rules"]["score"] = 0.2
    assert fraction_of_gain(arms) is None
    assert fraction_of_gain({"no_rules": {"score": 0.1}}) is None


def test_the_command_line_writes_the_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    main(["run", "mixed", "--quick", "--arms", "no_rules,learned", "--out", str(out)])
    assert set(json.loads(out.read_text())["arms"]) == {"no_rules", "learned"}
    assert "fraction of gain" in capsys.readouterr().out
    with pytest.raises(ValueError, match="unknown arms"):
        main(["run", "mixed", "--quick", "--arms", "nope", "--out", str(out)])


def test_an_ablation_leaves_the_named_stages_out_of_the_learned_arm(tmp_path: Path) -> None:
    from langgraph_combee.errors import ConfigurationError

    out = tmp_path / "ablated.json"
    record = run_family(
        FAMILIES["labels"], out=out, quick=True, arms=["learned"], without=["kinds"],
        log=lambda _: None,
    )  # fmt: skip
    assert record["without"] == ["kinds"]
    assert "failure" not in record["arms"]["learned"]
    with pytest.raises(ConfigurationError, match="'kindz'"):
        run_family(FAMILIES["labels"], out=out, quick=True, without=["kindz"], log=lambda _: None)
