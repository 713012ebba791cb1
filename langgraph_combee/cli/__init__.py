"""The ``combee`` command line (the ``[cli]`` extra: ``pip install 'langgraph-combee[cli]'``).

Commands: ``demo``, ``learn``, ``versions``, ``show``, ``diff``, ``approve``,
``reject``, ``rollback``, ``export``, ``dead-letters`` and ``bench``; ``combee --help`` lists them
and ``docs/cli.md`` is the reference. ``main(argv)`` runs the tool in-process and
returns its exit code; ``app`` is the ``typer.Typer`` application (for
``typer.testing.CliRunner``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

try:
    from langgraph_combee.cli._app import app, main
except ImportError as _exc:  # typer or rich missing: say how to install them, no traceback
    if _exc.name not in {"typer", "rich"}:
        raise
    from langgraph_combee._errors import MissingExtraError

    _MISSING = MissingExtraError("cli", "the combee command")

    def main(argv: Sequence[str] | None = None) -> int:
        """Report that the ``[cli]`` extra is missing and return exit code 2."""
        print(f"error: {_MISSING}", file=sys.stderr)
        return 2


__all__ = ["app", "main"]
