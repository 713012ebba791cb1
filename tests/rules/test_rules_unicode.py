"""Rules in languages other than English: words of any script, and scripts without spaces."""

from __future__ import annotations

import pytest

from langgraph_combee import Feedback, Trace
from langgraph_combee._algorithm.schemas import SmallReflectionOut
from langgraph_combee._core.ops import Add
from langgraph_combee._core.playbook import Playbook
from langgraph_combee._rules import rules


def _add(content: str, *sources: str) -> Add:
    return Add(section="others", content=content, sources=list(sources))


def _ticket(tid: str, text: str, truth: str) -> Trace:
    return Trace(
        id=tid,
        input=text,
        output="GENERAL",
        feedback=Feedback(correct=False, ground_truth=truth),
    )


# situation, its words, an input, a keyword of that input
REPLIES = {
    "french": (
        "réservation annulée",
        {"réservation", "annulée"},
        "Bonjour, ma réservation a été annulée sans préavis.",
        "préavis",
    ),
    "german": (
        "Müll nicht abgeholt",
        {"müll", "nicht", "abgeholt"},
        "Guten Tag, der Müll wurde schon wieder nicht abgeholt.",
        "wieder",
    ),
    "russian": (
        "возврат денег",
        {"возврат", "денег"},
        "Здравствуйте, прошу оформить возврат денег за заказ.",
        "заказ",
    ),
    "arabic": (
        "استرداد المبلغ",
        {"استرداد", "المبلغ"},
        "مرحبا، أريد استرداد المبلغ بسبب التأخير.",
        "التأخير",
    ),
    "chinese": (
        "退款申请",
        {"退款", "款申", "申请"},
        "你好，我的退款申请还没有处理。",
        "处理",
    ),
    "japanese": (
        "パスワード再設定",
        {"パス", "スワ", "ワー", "ード", "ド再", "再設", "設定"},
        "パスワードの再設定ができません。ログインも失敗します。",
        "ログイン",
    ),
}


@pytest.mark.parametrize("language", sorted(REPLIES))
def test_a_small_reflector_reply_in_another_language_gives_a_rule(language: str) -> None:
    situation, words, source, keyword = REPLIES[language]
    # Its words are the words as written (case-folded), not ASCII fragments of them;
    # a script without spaces is read in overlapping pairs of characters.
    assert rules.situation_words(situation) == words
    out = SmallReflectionOut(situation=situation, keywords=[keyword, "absent"], action="X-1")
    reflection = out.to_reflection("t", ground_truth="X-1", source=source)
    assert reflection.key_insight == f"When {situation}, X-1."
    # With no situation of its own, the keyword the input holds is the situation.
    bare = out.model_copy(update={"situation": ""})
    assert bare.to_reflection("t", ground_truth="X-1", source=source).key_insight == (
        f"When {keyword}, X-1."
    )


def test_accented_letters_belong_to_their_word() -> None:
    # Read as ASCII, "Größe" (size) and "Grüße" (greetings) were both "gr", and
    # "tâche" (task) and "pêche" (fishing) both "che".
    assert not rules.same_situation("Größe", "Grüße")
    assert not rules.same_situation("tâche", "pêche")
    assert rules.grounded_keywords(["pêche", "tâche"], "Ma tâche est en retard.") == ["tâche"]
    # "été" was no word at all; the same text in another Unicode form is the same word.
    decomposed = "e\u0301te\u0301"
    assert rules.situation_words("été") == {"été"} == rules.situation_words(decomposed)
    assert rules.grounded_keywords(["été"], f"Le contrat d'{decomposed} a expiré.") == ["été"]


def test_vowel_signs_and_tone_marks_stay_in_their_word() -> None:
    # Devanagari vowel signs and Thai marks are not letters to Python's regular
    # expressions; a word split at them was single letters (dropped) or fragments.
    assert rules.situation_words("पासवर्ड रीसेट") == {"पासवर्ड", "रीसेट"}
    # Thai has no spaces: pairs of letters, each with its marks ("ที่" is one letter here).
    assert rules.situation_words("ที่อยู่") == {"ที่อ", "อยู่"}
    assert rules.same_situation("ที่อยู่จัดส่ง", "ที่อยู่จัดส่งผิด")


def test_chinese_situations_with_a_shared_term_match() -> None:
    assert rules.same_situation("退款未到账", "退款未到账的问题")
    assert not rules.same_situation("退款未到账", "包裹延迟")
    # A single character is a word of its own.
    assert rules.situation_words("书") == {"书"}


def test_chinese_rules_with_one_action_fold_as_english_ones_do() -> None:
    ops = rules.fold_actions(
        [
            _add("When 退款未到账, answer FIN-7Q.", "a"),
            _add("When 包裹延迟, answer LOG-5T.", "b"),
            _add("When 要求退钱, answer FIN-7Q.", "c"),
            _add("When 退款未到账的问题, answer FIN-7Q.", "d"),  # covered: no new wording
        ]
    )
    assert [(op.content, op.sources) for op in ops if isinstance(op, Add)] == [
        ("When 退款未到账 or 要求退钱, answer FIN-7Q.", ["a", "c", "d"]),
        ("When 包裹延迟, answer LOG-5T.", ["b"]),
    ]


def test_chinese_actions_without_values_are_told_apart() -> None:
    # Read as ASCII both actions had no word at all, and were "the same action".
    assert not rules.same_action("转给财务部", "转给物流部")
    assert rules.same_action("回答“珊瑚”", "回答珊瑚")
    ops = rules.fold_actions(
        [_add("When 退款, 转给财务部.", "a"), _add("When 包裹, 转给物流部.", "b")]
    )
    assert len(ops) == 2


def test_in_one_step_the_chinese_action_most_runs_back_wins() -> None:
    settled, found = rules.settle_batch(
        [
            _add("When 退款未到账, answer FIN-7Q.", "a"),
            _add("When 退款未到账的问题, answer FIN-7Q.", "b"),
            _add("When 退款未到账, answer LOG-5T.", "c"),
        ]
    )
    assert [op.content for op in settled if isinstance(op, Add)] == [
        "When 退款未到账, answer FIN-7Q.",
        "When 退款未到账的问题, answer FIN-7Q.",
    ]
    assert [c.reason for c in found] == ["outvoted in this step"]


def test_a_chinese_rule_for_a_known_situation_corrects_the_old_action() -> None:
    old = Playbook().apply([_add("When 退款未到账, answer LOG-5T.")], version=1).playbook
    ops, found = rules.reconcile(old, [_add("When 退款未到账的问题, answer FIN-7Q.", "t")])
    assert [(op.type, op.content) for op in ops] == [  # type: ignore[union-attr]
        ("UPDATE", "When 退款未到账的问题, answer FIN-7Q.")
    ]
    assert [c.reason for c in found] == ["corrected by new evidence"]


def test_grounded_keywords_in_chinese_are_those_the_input_holds() -> None:
    text = "你好，我的订单还没有发货，请尽快处理。"
    # "订单号" (order number) shares "订单" but "单号" is not in the input.
    assert rules.grounded_keywords(["发货", "退款", "订单号", "订单"], text) == ["发货", "订单"]
    # A copied clause is not a keyword: a run without spaces counts a word per
    # three characters, and at most four words are allowed.
    long = "我的订单还没有发货请尽快处理"
    assert rules.grounded_keywords([long], long) == []
    assert rules.grounded_keywords(["订单还没有发货"], text) == ["订单还没有发货"]


def test_names_are_found_in_scripts_with_case_and_not_guessed_in_others() -> None:
    text = "Здравствуйте, Иван просит возврат денег. مرحبا، أريد استرداد المبلغ"
    assert rules.grounded_keywords(["Иван", "возврат", "استرداد"], text) == [
        "возврат",
        "استرداد",
    ]
