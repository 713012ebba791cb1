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

``merges_full_one_desk`` counts the merges of an all-pairs pass over the same
rules with every desk code replaced by one (``DESK-1``): rules whose values
agree, which their words alone tell apart or not.

Each figure is the median of ``--repeats`` passes (a tenth as many for
``full``); ``first_call`` is the first pass on the playbook, the first of the
process building the Unicode character classes when its text needs them (the
first non-ASCII playbook). ``merges`` counts the bullets a pass folded into
another.

``--baseline`` times an older ``dedup.py`` beside the current one, the two
taking turns pass by pass (a shared machine's load falls on both), and prints
the ratios:

    git show ba77a7f:langgraph_combee/_core/dedup.py > /tmp/dedup_before.py
    python -m benchmarks.dedup [--repeats 30] [--baseline /tmp/dedup_before.py] [--out DIR]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
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


# A desk code of any playbook ("FW-AUR-EU", "BILLING-120"); "GENERAL" is none.
_DESK = re.compile(r"\b[A-Z]+(?:-[A-Z0-9]+)+\b")


def one_desk(rules: Sequence[str]) -> list[str]:
    """``rules`` with every desk code replaced by one, ``DESK-1``."""
    return [_DESK.sub("DESK-1", r) for r in rules]


Pass = Callable[[], Any]


def _load(path: Path) -> ModuleType:
    """An older ``dedup.py`` (e.g. ``git show REV:langgraph_combee/_core/dedup.py``) as a module."""
    spec = importlib.util.spec_from_file_location("benchmarks._dedup_baseline", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--baseline {str(path)!r}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def _forget(module: ModuleType) -> None:
    # Shingles (and values) are cached per text between passes; code without the
    # caches has nothing to clear.
    for name in ("_shingles", "_values", "_normalised"):
        getattr(getattr(module, name, None), "cache_clear", lambda: None)()


def _timed_ms(call: Pass) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def _medians(
    passes: dict[str, list[Pass]], modules: dict[str, ModuleType], cold: bool
) -> dict[str, float]:
    # The versions take turns pass by pass, so a change of load on a shared
    # machine falls on both.
    times: dict[str, list[float]] = {name: [] for name in passes}
    for k in range(len(next(iter(passes.values())))):
        for name, calls in passes.items():
            if cold:
                _forget(modules[name])
            times[name].append(_timed_ms(calls[k]))
    return {name: statistics.median(t) for name, t in times.items()}


def measure(
    rules: Sequence[str], repeats: int, modules: dict[str, ModuleType]
) -> dict[str, dict[str, Any]]:
    """Time each module's passes over a playbook of ``rules``: one bullet new, or all pairs."""
    adds = [Add(section="others", content=r) for r in rules]
    base = Playbook().apply(adds[:-1], version=1).playbook
    full = Playbook().apply(adds, version=1).playbook
    one = Playbook().apply([Add(section="others", content=r) for r in one_desk(rules)], version=1)

    def after_apply(module: ModuleType, k: int) -> Pass:
        # A bullet never seen before (its text is new) joins the 199 of the last pass.
        new = Add(section="others", content=f"{rules[-1]} ({k})")
        applied = base.apply([new], version=2).playbook
        return lambda: module.deduplicate(applied, changed={applied.bullets[-1].id})

    figures: dict[str, dict[str, Any]] = {}
    for name, module in modules.items():
        _forget(module)
        first = after_apply(module, -1)
        started = time.perf_counter()
        merges = len(first().merges)
        figures[name] = {
            "bullets": len(full.bullets),
            "first_call_ms": (time.perf_counter() - started) * 1000,
            "merges_after_apply": merges,
            "merges_full": len(module.deduplicate(full).merges),
            "merges_full_one_desk": len(module.deduplicate(one.playbook).merges),
        }
    runs = {
        "after_apply_ms": (
            {n: [after_apply(m, k) for k in range(repeats)] for n, m in modules.items()},
            False,
        ),
        "after_apply_cold_ms": (
            {n: [after_apply(m, repeats + k) for k in range(repeats)] for n, m in modules.items()},
            True,
        ),
        "full_ms": (
            {
                n: [functools.partial(m.deduplicate, full)] * max(3, repeats // 10)
                for n, m in modules.items()
            },
            False,
        ),
    }
    for key, (passes, cold) in runs.items():
        for name, median in _medians(passes, modules, cold).items():
            figures[name][key] = median
    return figures


def _line(language: str, name: str, f: dict[str, Any]) -> str:
    return (
        f"{language:8s} {name:8s} {f['bullets']} bullets: after one apply "
        f"{f['after_apply_ms']:.2f} ms ({f['after_apply_cold_ms']:.2f} ms with nothing "
        f"cached), all pairs {f['full_ms']:.1f} ms, first call {f['first_call_ms']:.1f} ms; "
        f"merges {f['merges_after_apply']} / {f['merges_full']} "
        f"({f['merges_full_one_desk']} with one desk)"
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run, print the figures, write ``dedup.json``; return the record."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per figure")
    parser.add_argument(
        "--baseline", type=Path, help="an older dedup.py to time beside this one, turn by turn"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    cmd = command(MODULE, argv)
    print(f"reproduce: {cmd}", flush=True)
    modules = {"current": dedup}
    if args.baseline is not None:
        modules["baseline"] = _load(args.baseline)
    results: dict[str, Any] = {}
    for language, rules in workloads().items():
        figures = measure(rules, args.repeats, modules)
        results[language] = figures
        for name, f in figures.items():
            print(_line(language, name, f), flush=True)
        if "baseline" in figures:
            ratios = {
                key: figures["current"][key] / figures["baseline"][key]
                for key in ("after_apply_ms", "after_apply_cold_ms", "full_ms")
            }
            figures["ratio"] = ratios
            print(
                f"{language:8s} current / baseline: "
                + ", ".join(f"{k.removesuffix('_ms')} {v:.2f}" for k, v in ratios.items()),
                flush=True,
            )
    record = {
        "benchmark": "dedup",
        "command": cmd,
        "machine": machine_info(),
        "repeats": args.repeats,
        "baseline": None if args.baseline is None else str(args.baseline),
        "results": results,
    }
    path = write_json(args.out / "dedup.json", record)
    print(f"wrote {path}")
    return record


if __name__ == "__main__":
    main()
