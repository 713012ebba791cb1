"""Lexical de-duplication never folds two bullets that name different values.

A value is what an answer must carry literally (a code, a number, a quoted
string: ``_core.values``). Two rules alike in every word but their code are two
rules, perhaps contradicting each other: folding one into the other lost one of
them and hid the contradiction from the rules layer, which settles it
(``rules.reconcile``, ``rules.conflicts``). Before, each pair of ``DIFFERENT``
scored at least 0.7 and was merged.
"""

from __future__ import annotations

import pytest

from langgraph_combee._core.dedup import deduplicate, lexical_similarity
from langgraph_combee._core.values import FROM_INPUT, values
from langgraph_combee.types import Bullet, Playbook

THRESHOLD = 0.7  # the lexical default
_AURORA = "EU tickets about the Aurora router whose firmware update loops on reboot go to"
_VOUCHER = f"When a parcel is late, make the calls send_voucher(order_id='{FROM_INPUT}', code="


def _merges(*contents: str, changed: set[str] | None = None) -> list[tuple[str, str]]:
    playbook = Playbook(
        bullets=[
            Bullet(id=f"b{i}", section="others", content=c, created_version=i)
            for i, c in enumerate(contents)
        ]
    )
    return [(m.kept_id, m.dropped_id) for m in deduplicate(playbook, changed=changed).merges]


DIFFERENT = {
    "english, one desk per region": (f"{_AURORA} FW-AUR-EU.", f"{_AURORA} FW-AUR-US."),
    "english, quoted answers": (
        "When the customer asks which colour the tent comes in, answer 'coral'.",
        "When the customer asks which colour the tent comes in, answer 'amber'.",
    ),
    "english, house values of a tool call": (f"{_VOUCHER}'SORRY10').", f"{_VOUCHER}'SORRY20')."),
    # Two rules of benchmarks/dedup.py's Russian playbook: another product, another
    # desk; the region, the issue and the little words ("из", "про", "с", "в", "не")
    # shared.
    "russian, another product and desk": (
        "Обращения из региона Москва про товар «электросамокат» с жалобой «за один заказ "
        "списали дважды» передавайте в BILLING-120, не в GENERAL.",
        "Обращения из региона Москва про товар «роутер» с жалобой «за один заказ "
        "списали дважды» передавайте в BILLING-000, не в GENERAL.",
    ),
    "russian, another code": (
        "Когда клиент просит возврат денег, ответь FIN-7Q.",
        "Когда клиент просит возврат денег, ответь FIN-8Q.",
    ),
    # And of its Chinese playbook (0.70: the issue shared, the product another).
    "chinese, another product and desk": (
        "西部地区关于跑步机、反映“重置密码后账户被锁定”的工单，转给 ACCESS-193，不要转给 GENERAL。",
        "西部地区关于门铃、反映“重置密码后账户被锁定”的工单，转给 ACCESS-073，不要转给 GENERAL。",
    ),
}


@pytest.mark.parametrize("case", sorted(DIFFERENT))
def test_rules_naming_different_values_stay_apart_however_alike(case: str) -> None:
    a, b = DIFFERENT[case]
    # Alike enough to merge on their words: only their values keep them apart.
    assert lexical_similarity(a, b) >= THRESHOLD
    assert values(a) != values(b)
    assert _merges(a, b) == []
    assert _merges(a, b, changed={"b1"}) == []


def test_the_rule_naming_a_third_value_joins_neither() -> None:
    eu, us, uk = (f"{_AURORA} FW-AUR-{region}." for region in ("EU", "US", "UK"))
    # Its twin with the same value still merges, whatever else is in the playbook.
    assert _merges(eu, us, uk, eu) == [("b0", "b3")]
    assert _merges(eu, us, uk, eu, changed={"b3"}) == [("b0", "b3")]


# One rule with one code written twice, the second time in another form: another
# case and punctuation, a full-width code, the code quoted; its values are the same.
SAME = {
    "english": ("When a refund is late, answer FIN-7Q.", "when a refund is late: answer 'FIN-7Q'!"),
    "chinese": ("当退款时，回答 FIN-7Q。", "当退款时，回答 ＦＩＮ－７Ｑ。"),
    "japanese": (
        "パスワード再設定のときは SEC-4X に案内する。",
        "ﾊﾟｽﾜｰﾄﾞ再設定のときは ＳＥＣ－４Ｘ に案内する。",
    ),
    "russian": (
        "Когда клиент просит возврат денег, ответь FIN-7Q.",
        "КОГДА КЛИЕНТ ПРОСИТ ВОЗВРАТ ДЕНЕГ, ОТВЕТЬ «FIN-7Q»!",
    ),
    "hindi": ("जब ग्राहक रिफंड माँगे, तो FIN-7Q बताएं।", "जब ग्राहक रिफंड माँगे, तो 'FIN-7Q' बताएं।"),
    "arabic": (
        "عندما يطلب العميل استرداد المبلغ، أجب FIN-7Q.",
        "عندما يطلب العميل استرداد المبلغ، أجب ＦＩＮ－７Ｑ!",
    ),
}


@pytest.mark.parametrize("script", sorted(SAME))
def test_one_rule_with_one_code_merges_in_every_script(script: str) -> None:
    rule, other_form = SAME[script]
    assert _merges(rule, rule) == [("b0", "b1")]
    assert _merges(rule, other_form) == [("b0", "b1")]
    assert _merges(rule, other_form, changed={"b1"}) == [("b0", "b1")]


NEAR = {
    "english": (
        "Route refund tickets to FIN-REFUNDS.",
        "Route refund tickets to FIN-REFUNDS please.",
    ),
    "english, a tool call": (
        f"{_VOUCHER}'SORRY10').",
        f"{_VOUCHER}'SORRY10').".replace("late", "very late"),
    ),
    "chinese": ("当退款时，回答 FIN-7Q。", "当退款时，请回答 FIN-7Q。"),
    "russian": (
        "Когда клиент просит возврат денег, ответь FIN-7Q.",
        "Когда клиент просит возврат денег, пожалуйста, ответь FIN-7Q.",
    ),
    "hindi": ("जब ग्राहक रिफंड माँगे, तो FIN-7Q बताएं।", "जब ग्राहक जल्दी रिफंड माँगे, तो FIN-7Q बताएं।"),
    "arabic": (
        "عندما يطلب العميل استرداد المبلغ، أجب FIN-7Q.",
        "عندما يطلب العميل استرداد المبلغ بسرعة، أجب FIN-7Q.",
    ),
}


@pytest.mark.parametrize("case", sorted(NEAR))
def test_a_near_identical_rule_with_the_same_code_merges(case: str) -> None:
    a, b = NEAR[case]
    assert THRESHOLD <= lexical_similarity(a, b) < 1.0
    assert _merges(a, b) == [("b0", "b1")]
    assert _merges(a, b, changed={"b1"}) == [("b0", "b1")]


def test_the_same_words_are_one_rule_whatever_the_quoting() -> None:
    # A small model writes "answer 'coral'" in one reply and "answer coral" in the
    # next: one value quoted in one, a plain word in the other, the words the same.
    quoted = "When the customer asks which colour the tent comes in, answer 'coral'."
    plain = quoted.replace("'coral'", "coral")
    assert values(quoted) != values(plain)
    assert _merges(quoted, plain) == [("b0", "b1")]
