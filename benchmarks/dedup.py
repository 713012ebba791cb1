"""Cost of the lexical de-duplication pass that follows every playbook change.

Three playbooks of 200 distinct routing rules each: English (the speed
benchmark's ticket rules, ``_tickets.ticket_rule``), Chinese and Russian (the
same shape of rule: region, product and issue, then a desk code). Passes of
``deduplicate()`` with no embedder are timed on each:

* ``after_apply``: what runs after each apply, one bullet never seen before
  compared with the 199 others (``changed={its id}``), the others read by an
  earlier pass; ``after_apply_cold``: the same with nothing cached (the first
  pass of a process, or one whose playbook outgrew the cache);
* ``full``: every pair compared (``changed=None``), the worst case.

Each figure is the median of ``--repeats`` passes (a tenth as many for
``full``); ``first_call`` is the first pass of the process, which also builds
the Unicode character classes when the text needs them. ``merges`` counts the
bullets a pass folded into another.

    python -m benchmarks.dedup [--repeats 30] [--out DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, command, machine_info, write_json
from benchmarks._tickets import make_traces, ticket_rule
from langgraph_combee._core import dedup
from langgraph_combee._core.ops import Add
from langgraph_combee._core.playbook import Playbook

MODULE = "benchmarks.dedup"
SIZE = 200

_ZH_PRODUCTS = (
    "路由器",
    "摄像头",
    "笔记本电脑",
    "无人机",
    "蓝牙音箱",
    "冰箱",
    "耳机",
    "门铃",
    "平板电脑",
    "温控器",
    "投影仪",
    "智能手表",
    "电动滑板车",
    "搅拌机",
    "打印机",
    "显示器",
    "游戏机",
    "电子阅读器",
    "空气净化器",
    "跑步机",
)
_ZH_ISSUES = (
    "固件更新后反复重启",
    "退货后没有收到退款",
    "同一订单被扣款两次",
    "包裹卡在海关",
    "重置密码后账户被锁定",
    "充电时设备过热",
    "保修申请被无故拒绝",
    "配套应用登录时崩溃",
    "包装盒里缺少配件",
    "取消后订阅仍被续费",
)
_ZH_REGIONS = ("华东", "华南", "华北", "西部")
_RU_PRODUCTS = (
    "роутер",
    "камера",
    "ноутбук",
    "дрон",
    "колонка",
    "холодильник",
    "наушники",
    "дверной звонок",
    "планшет",
    "термостат",
    "проектор",
    "умные часы",
    "электросамокат",
    "блендер",
    "принтер",
    "монитор",
    "игровая приставка",
    "электронная книга",
    "очиститель воздуха",
    "беговая дорожка",
)
_RU_ISSUES = (
    "после обновления прошивки бесконечная перезагрузка",
    "деньги за возвращённый товар не пришли",
    "за один заказ списали дважды",
    "посылка застряла на таможне",
    "аккаунт заблокирован после сброса пароля",
    "устройство перегревается при зарядке",
    "гарантийную заявку отклонили без причины",
    "приложение падает при входе",
    "в коробке не хватает комплектующих",
    "подписка продлилась после отмены",
)
_RU_REGIONS = ("Москва", "Сибирь", "Урал", "Юг")
_CODES = ("FW", "REFUND", "BILLING", "LOGISTICS", "ACCESS", "SAFETY", "WARRANTY", "APP")


def _rules(render: Callable[[int, int, int], str], products: int, issues: int) -> list[str]:
    # As in _tickets.make_traces: consecutive rules differ in product and issue,
    # and every product x issue pair appears once.
    return [
        render(i % products, (i // products + i % products) % issues, i % 4) for i in range(SIZE)
    ]


def _code(issue: int, product: int, region: int) -> str:
    # Eight desk prefixes for ten issues: for each product two pairs of rules about
    # different issues share a code, the only ASCII word in them besides GENERAL.
    return f"{_CODES[issue % len(_CODES)]}-{product:02d}{region}"


def workloads() -> dict[str, list[str]]:
    """The three lists of 200 distinct rules, by language."""
    english = [
        ticket_rule(t.input, t.feedback.ground_truth, t.output)
        for t in make_traces(SIZE)
        if t.feedback is not None
    ]
    chinese = _rules(
        lambda product, issue, region: (
            f"{_ZH_REGIONS[region]}地区关于{_ZH_PRODUCTS[product]}、反映“{_ZH_ISSUES[issue]}”"
            f"的工单，转给 {_code(issue, product, region)}，不要转给 GENERAL。"
        ),
        len(_ZH_PRODUCTS),
        len(_ZH_ISSUES),
    )
    russian = _rules(
        lambda product, issue, region: (
            f"Обращения из региона {_RU_REGIONS[region]} про товар «{_RU_PRODUCTS[product]}» "
            f"с жалобой «{_RU_ISSUES[issue]}» передавайте в {_code(issue, product, region)}, "
            "не в GENERAL."
        ),
        len(_RU_PRODUCTS),
        len(_RU_ISSUES),
    )
    return {"english": english, "chinese": chinese, "russian": russian}


def _forget() -> None:
    # Shingles are cached per text between passes; the code before the cache had
    # none, so there is nothing to clear there.
    getattr(dedup._shingles, "cache_clear", lambda: None)()


def _median_ms(passes: Sequence[Callable[[], object]], *, cold: bool = False) -> float:
    times = []
    for call in passes:
        if cold:
            _forget()
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(rules: Sequence[str], repeats: int) -> dict[str, Any]:
    """Time the passes over a playbook of ``rules``: one bullet new in each, or all pairs."""
    adds = [Add(section="others", content=r) for r in rules]
    base = Playbook().apply(adds[:-1], version=1).playbook
    full = Playbook().apply(adds, version=1).playbook

    def after_apply(k: int) -> Callable[[], dedup.DedupResult]:
        # A bullet never seen before (its text is new) joins the 199 of the last pass.
        new = Add(section="others", content=f"{rules[-1]} ({k})")
        applied = base.apply([new], version=2).playbook
        return lambda: dedup.deduplicate(applied, changed={applied.bullets[-1].id})

    _forget()
    started = time.perf_counter()
    merges = len(after_apply(-1)().merges)
    first = (time.perf_counter() - started) * 1000
    return {
        "bullets": len(full.bullets),
        "merges_after_apply": merges,
        "merges_full": len(dedup.deduplicate(full).merges),
        "first_call_ms": first,
        "after_apply_ms": _median_ms([after_apply(k) for k in range(repeats)]),
        "after_apply_cold_ms": _median_ms(
            [after_apply(k) for k in range(repeats, 2 * repeats)], cold=True
        ),
        "full_ms": _median_ms([lambda: dedup.deduplicate(full)] * max(3, repeats // 10)),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run, print the figures, write ``dedup.json``; return the record."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per figure")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    cmd = command(MODULE, argv)
    print(f"reproduce: {cmd}", flush=True)
    results = {}
    for language, rules in workloads().items():
        figures = measure(rules, args.repeats)
        results[language] = figures
        print(
            f"{language:8s} {figures['bullets']} bullets: after one apply "
            f"{figures['after_apply_ms']:.2f} ms ({figures['after_apply_cold_ms']:.2f} ms "
            f"with nothing cached), all pairs {figures['full_ms']:.1f} ms, first call "
            f"{figures['first_call_ms']:.1f} ms; merges "
            f"{figures['merges_after_apply']} / {figures['merges_full']}",
            flush=True,
        )
    record = {
        "benchmark": "dedup",
        "command": cmd,
        "machine": machine_info(),
        "repeats": args.repeats,
        "results": results,
    }
    path = write_json(args.out / "dedup.json", record)
    print(f"wrote {path}")
    return record


if __name__ == "__main__":
    main()
