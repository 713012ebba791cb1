"""Lexical de-duplication of rules written in other scripts than English.

Read as ASCII, a rule in Chinese, Russian, Arabic or Hindi had no words but its
codes: two rules about different cases with one code looked identical and were
merged, and one rule written twice with other punctuation, case or Unicode forms
was two rules. English is read exactly as before.
"""

from __future__ import annotations

import itertools
import re

import pytest

from benchmarks._tickets import make_traces, ticket_rule
from langgraph_combee._core.dedup import _STOPWORDS, deduplicate, lexical_similarity
from langgraph_combee.types import Bullet, Playbook

THRESHOLD = 0.7  # the lexical default


def _merges(*contents: str, changed: set[str] | None = None) -> list[tuple[str, str]]:
    playbook = Playbook(
        bullets=[
            Bullet(id=f"b{i}", section="others", content=c, created_version=i)
            for i, c in enumerate(contents)
        ]
    )
    result = deduplicate(playbook, changed=changed)
    return [(m.kept_id, m.dropped_id) for m in result.merges]


# Pairs of rules about different cases (or giving different actions); before, every
# one of them but the first scored 1.0 (same code, no other ASCII word).
DIFFERENT = {
    "chinese, different codes": ("当退款时，回答 FIN-7Q。", "当密码重置时，回答 SEC-4X。"),
    "chinese, one code": ("当退款时，回答 FIN-7Q。", "当密码重置时，回答 FIN-7Q。"),
    "chinese in an English rule": (
        "When 退款未到账, answer FIN-7Q.",
        "When 包裹延迟, answer FIN-7Q.",
    ),
    "russian": (
        "Когда клиент просит возврат денег, ответь FIN-7Q.",
        "Когда клиент забыл пароль, ответь FIN-7Q.",
    ),
    "hindi": (
        "जब ग्राहक रिफंड माँगे, तो FIN-7Q बताएं।",
        "जब ग्राहक पासवर्ड बदलना चाहे, तो FIN-7Q बताएं।",
    ),
    "arabic": (
        "عندما يطلب العميل استرداد المبلغ، أجب FIN-7Q.",
        "عندما ينسى العميل كلمة المرور، أجب FIN-7Q.",
    ),
    "japanese in an English rule": (
        "When パスワード再設定, answer SEC-4X.",
        "When 返金の申請, answer SEC-4X.",
    ),
}

# One rule written twice: other punctuation, case, or Unicode forms that NFKC makes
# one (full-width Latin, half-width katakana, a decomposed letter, a presentation
# form); before, each pair scored at most 0.2.
SAME = {
    "chinese, full-width code": (
        "When 退款未到账, answer FIN-7Q.",
        "when 退款未到账，answer ＦＩＮ－７Ｑ。",
    ),
    "russian, capitals and punctuation": (
        "Когда спрашивают про возврат денег, отвечай вежливо.",
        "КОГДА СПРАШИВАЮТ ПРО ВОЗВРАТ ДЕНЕГ, ОТВЕЧАЙ ВЕЖЛИВО!",
    ),
    "russian, decomposed letter": (
        "Когда спрашивают про йогурт, отвечай вежливо.",
        "Когда спрашивают про и\u0306огурт, отвечай вежливо.",
    ),
    "hindi, nukta precomposed and decomposed": (
        "जब ग्राहक को \u095bरूरत हो, तो विनम्र उत्तर दें।",
        "जब ग्राहक को \u091c\u093cरूरत हो, तो विनम्र उत्तर दें।",
    ),
    "arabic, punctuation": (
        "عندما يطلب العميل استرداد المبلغ، أجب بلطف.",
        "عندما يطلب العميل استرداد المبلغ، أجب بلطف!",
    ),
    "arabic, lam-alef presentation form": (
        "إذا قال العميل لا أستطيع الدخول، أرسل رابط إعادة التعيين.",
        "إذا قال العميل \ufefb أستطيع الدخول، أرسل رابط إعادة التعيين.",
    ),
    "japanese, half-width katakana": (
        "パスワードを再設定するときは、サポートに案内する。",
        "ﾊﾟｽﾜｰﾄﾞを再設定するときは、ｻﾎﾟｰﾄに案内する。",
    ),
    "japanese in an English rule, full-width code": (
        "When パスワード再設定, answer SEC-4X.",
        "When ﾊﾟｽﾜｰﾄﾞ再設定, answer ＳＥＣ－４Ｘ.",
    ),
}


@pytest.mark.parametrize("case", sorted(DIFFERENT))
def test_rules_about_different_cases_in_any_script_both_stay(case: str) -> None:
    a, b = DIFFERENT[case]
    assert lexical_similarity(a, b) < THRESHOLD
    assert _merges(a, b) == []
    assert _merges(a, b, changed={"b1"}) == []


@pytest.mark.parametrize("case", sorted(SAME))
def test_one_rule_written_twice_in_any_script_merges(case: str) -> None:
    a, b = SAME[case]
    assert lexical_similarity(a, b) == 1.0
    assert _merges(a, b) == [("b0", "b1")]
    assert _merges(a, b, changed={"b1"}) == [("b0", "b1")]


def test_a_chinese_action_without_a_code_tells_rules_apart() -> None:
    # "Transfer to finance" and "transfer to logistics" for one situation.
    a, b = "当退款未到账时，转给财务部。", "当退款未到账时，转给物流部。"
    assert 0 < lexical_similarity(a, b) < THRESHOLD
    assert _merges(a, b) == []


def test_a_near_duplicate_chinese_rule_merges_as_its_english_twin_does() -> None:
    # One word more ("please") is near: as "Route refund tickets to FIN-REFUNDS
    # please." is to the rule without it (0.82).
    assert lexical_similarity("当退款时，回答 FIN-7Q。", "当退款时，请回答 FIN-7Q。") >= THRESHOLD
    assert _merges("当退款时，回答 FIN-7Q。", "当退款时，请回答 FIN-7Q。") == [("b0", "b1")]


def test_a_hindi_vowel_sign_makes_another_word() -> None:
    # "माल" (goods) and "मेल" (mail) differ by a vowel sign only; a splitter that
    # leaves marks out reads both as "म", "ल". The sign makes a word as different as
    # an unrelated one ("पैकेट", parcel). (Both pairs score 0.70, and merge: one word
    # of nine differs, and Hindi's little words count, stop words being English only.)
    goods = "जब माल देर से आए, तो LOG-5T बताएं।"
    mail = goods.replace("माल", "मेल")
    parcel = goods.replace("माल", "पैकेट")
    assert lexical_similarity(goods, mail) == lexical_similarity(goods, parcel) < 1.0


def _ascii_similarity(a: str, b: str) -> float:
    """The lexical similarity as it was computed before words of any script (ASCII words)."""

    def shingles(text: str) -> set[str]:
        found = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS]
        pairs = {f"{x} {y}" for x, y in itertools.pairwise(found)}
        return set(found) | pairs

    sa, sb = shingles(a), shingles(b)
    if not sa and not sb:
        return 1.0 if a.strip().lower() == b.strip().lower() else 0.0
    return len(sa & sb) / len(sa | sb)


ENGLISH = [
    "Route refund tickets to FIN-REFUNDS.",
    "Route refund tickets to FIN-REFUNDS please.",
    "Route refund tickets to \u201cFIN-REFUNDS\u201d please\u2026",
    "When a refund is late, answer FIN-7Q.",
    "When a refund is late \u2014 answer \u201cFIN-7Q\u201d.",
    "When a customer asks for a refund of money, answer politely.",
    "When a customer asks for a refund of money, answer briefly.",
    "Check the units.",
    "Answers use metric units.",
    "When it is the",
    "when IT is THE ",
    *(
        ticket_rule(t.input, t.feedback.ground_truth, t.output)
        for t in make_traces(24)
        if t.feedback
    ),
]


def test_english_scores_exactly_as_before_with_typographic_punctuation_too() -> None:
    scores = [
        (lexical_similarity(a, b), _ascii_similarity(a, b))
        for a, b in itertools.combinations(ENGLISH, 2)
    ]
    assert all(new == old for new, old in scores)
    # The list holds pairs on both sides of the threshold.
    assert {new >= THRESHOLD for new, _ in scores} == {True, False}


def test_english_pairs_merge_or_stay_as_before() -> None:
    # 0.82: merges (a word more); 0.69: stays (the action differs); 0.0: stays.
    assert _merges("Route refund tickets to FIN-REFUNDS.", ENGLISH[2]) == [("b0", "b1")]
    assert _merges(ENGLISH[5], ENGLISH[6]) == []
    assert _merges("Check the units.", "Refunds go to FIN.") == []
