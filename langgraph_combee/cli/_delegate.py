"""Commands that hand over to another program: ``combee demo`` and ``combee bench``.

Both pass every argument after the command name through unchanged
(``combee demo -- --help`` shows the demo's own help).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import typer

from langgraph_combee.cli._common import EXIT_FAILED, EXIT_USAGE, CliError, stderr

DEMO_MODULE = "langgraph_combee.demo"
BENCH_SCRIPT = Path("benchmarks") / "run_all.py"

PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}
"""Context settings of a command whose extra arguments belong to the program it runs."""


def demo(ctx: typer.Context) -> None:
    """Run the demo: learn a playbook end to end on the local model (no hosted API).

    Any further arguments go to the demo itself (see 'combee demo -- --help').
    """
    try:
        module = importlib.import_module(DEMO_MODULE)
    except ImportError as exc:
        if exc.name == DEMO_MODULE:
            raise CliError(
                f"the demo is not part of this install ({DEMO_MODULE} not found); "
                "upgrade langgraph-combee",
                EXIT_FAILED,
            ) from None
        raise CliError(f"the demo cannot start: {exc}", EXIT_USAGE) from None
    run = getattr(module, "main", None)
    if not callable(run):
        raise CliError(f"{DEMO_MODULE} has no main(argv) to run", EXIT_FAILED)
    code = run(list(ctx.args))
    if code:
        raise typer.Exit(int(code))


def search_roots() -> list[Path]:
    """Where ``combee bench`` looks for ``benchmarks/run_all.py``, in order.

    The current directory and its parents (a checkout you are in), then the
    checkout this package was installed from in editable mode.
    """
    here = Path.cwd().resolve()
    package_checkout = Path(__file__).resolve().parents[2]
    return [here, *here.parents, package_checkout]


def find_bench_script() -> Path | None:
    """Return the benchmarks runner of a source checkout, or None."""
    for root in search_roots():
        script = root / BENCH_SCRIPT
        if script.is_file():
            return script
    return None


def bench(ctx: typer.Context) -> None:
    """Run the benchmarks (benchmarks/run_all.py of a source checkout).

    The benchmarks ship with the source repository, not with the installed
    package: run this from a clone of langgraph-combee (or an editable install).
    Any further arguments go to the runner (see 'combee bench -- --help').
    """
    script = find_bench_script()
    if script is None:
        raise CliError(
            f"{BENCH_SCRIPT} not found: the benchmarks ship with the source repository, "
            "not the installed package; run 'combee bench' inside a clone of langgraph-combee",
            EXIT_USAGE,
        )
    checkout = script.parent.parent
    stderr().print(f"running {script} with {sys.executable}")
    env = dict(os.environ)
    # The runner may import its siblings as "benchmarks.x": put the checkout on the path.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(checkout), env.get("PYTHONPATH")) if p)
    code = subprocess.call([sys.executable, str(script), *ctx.args], env=env)
    if code:
        raise typer.Exit(code)
