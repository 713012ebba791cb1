"""What the demo shows while it runs: a live progress view (rich) or plain lines.

The live view holds a progress bar over the ticket stream and a status table
(runs served, version in force, accuracy of recent windows, learner state);
events (a finished window, a version swap with the bullets it added) are
printed above it and stay in the scrollback. Without rich, or with
``plain=True``, the same events are printed as plain lines.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

__all__ = ["Display", "PlainDisplay", "Status", "make_display"]


@dataclass(frozen=True)
class Status:
    """The numbers the live view shows."""

    served: int
    total: int
    version: int
    bullets: int
    windows: tuple[float, ...]
    overall: float | None
    learner: str


class Display(Protocol):
    """Receives the demo's progress."""

    def start(self, title: str, total: int) -> None:
        """The stream is about to start."""

    def note(self, text: str) -> None:
        """A line of narration (a phase starting or ending)."""

    def update(self, status: Status) -> None:
        """New numbers for the live view."""

    def window(self, first: int, last: int, accuracy: float, version: int) -> None:
        """A window of runs finished."""

    def swap(
        self,
        version: int,
        after_run: int,
        added: Sequence[str],
        bullets: int,
        *,
        updated: Sequence[str] = (),
        removed: Sequence[str] = (),
    ) -> None:
        """The agent now serves ``version`` (rules added, rewritten as ``updated``, ``removed``)."""

    def stop(self) -> None:
        """The stream is over (the live view ends)."""

    def print(self, text: str) -> None:
        """Print a block of text (the final report)."""


def _one_line(text: str) -> str:
    """A learned rule on one line: line breaks, escape sequences and other control
    characters become spaces (the text came from a model, not from the operator)."""
    return "".join(c if c.isprintable() else " " for c in text)


def _escape(text: str) -> str:
    """``text`` as rich prints it literally: ``[local-embed]`` is not read as a markup tag."""
    from rich.markup import escape

    return escape(text)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


class PlainDisplay:
    """Plain lines on a text stream."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    def _out(self, text: str) -> None:
        print(text, file=self._stream or sys.stdout, flush=True)

    def start(self, title: str, total: int) -> None:
        """Print the title."""
        self._out(title)

    def note(self, text: str) -> None:
        """Print the line."""
        self._out(text)

    def update(self, status: Status) -> None:
        """Nothing: plain output shows events only."""

    def window(self, first: int, last: int, accuracy: float, version: int) -> None:
        """Print the window's accuracy."""
        self._out(f"runs {first:4d}-{last:4d}: accuracy {accuracy:4.0%}  (serving v{version})")

    def swap(
        self,
        version: int,
        after_run: int,
        added: Sequence[str],
        bullets: int,
        *,
        updated: Sequence[str] = (),
        removed: Sequence[str] = (),
    ) -> None:
        """Print the swap and the bullets it added, rewrote (~) and removed (-)."""
        self._out(
            f"  -> v{version} in force after run {after_run}: +{len(added)} bullets "
            f"({bullets} in the playbook)"
        )
        for mark, texts in (("+", added), ("~", updated), ("-", removed)):
            for text in texts:
                self._out(f"     {mark} {_one_line(text)}")

    def stop(self) -> None:
        """Nothing to tear down."""

    def print(self, text: str) -> None:
        """Print the text."""
        self._out(text)


class RichDisplay:
    """A rich live view: progress bar and status table, events printed above."""

    def __init__(self, console: Any) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = console
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        self._task: Any = None
        self._status: Status | None = None
        self._live: Any = None

    def _render(self) -> Any:
        from rich.console import Group
        from rich.table import Table

        status = self._status
        if status is None:
            return self.progress
        table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
        for column in ("served", "serving", "playbook", "accuracy", "recent windows", "learner"):
            table.add_column(column)
        recent = " ".join(_pct(a) for a in status.windows[-6:]) or "-"
        table.add_row(
            f"{status.served}/{status.total}",
            f"v{status.version}",
            f"{status.bullets} bullets",
            _pct(status.overall),
            recent,
            _escape(status.learner),
        )
        return Group(self.progress, table)

    def start(self, title: str, total: int) -> None:
        """Start the live view."""
        from rich.live import Live

        self.console.rule(_escape(title))
        self._task = self.progress.add_task("serving tickets", total=total)
        self._live = Live(get_renderable=self._render, console=self.console, refresh_per_second=4)
        self._live.start()

    def note(self, text: str) -> None:
        """Print a line above the live view, as written (``[local-embed]`` is no markup)."""
        self.console.print(_escape(text), highlight=False)

    def update(self, status: Status) -> None:
        """Move the bar and refresh the table."""
        self._status = status
        if self._task is not None:
            self.progress.update(self._task, completed=status.served)

    def window(self, first: int, last: int, accuracy: float, version: int) -> None:
        """Print the window's accuracy, coloured."""
        colour = "green" if accuracy >= 0.6 else "yellow" if accuracy >= 0.3 else "red"
        self.console.print(
            f"runs {first:4d}-{last:4d}: accuracy [{colour}]{accuracy:4.0%}[/]  "
            f"(serving v{version})",
            highlight=False,
        )

    def swap(
        self,
        version: int,
        after_run: int,
        added: Sequence[str],
        bullets: int,
        *,
        updated: Sequence[str] = (),
        removed: Sequence[str] = (),
    ) -> None:
        """Print the swap and the bullets it added, rewrote (~) and removed (-)."""
        from rich.text import Text

        self.console.print(
            f"[bold cyan]  -> v{version}[/] in force after run {after_run}: "
            f"+{len(added)} bullets ({bullets} in the playbook)",
            highlight=False,
        )
        for mark, style, texts in (
            ("+", "green", added),
            ("~", "yellow", updated),
            ("-", "red", removed),
        ):
            for text in texts:
                # A Text, not markup: brackets, backslashes and :emoji: codes print as written.
                line = Text.assemble("     ", (mark, style), " ", _one_line(text))
                self.console.print(line, highlight=False, emoji=False)

    def stop(self) -> None:
        """End the live view (its last frame stays on screen)."""
        if self._live is not None:
            self._live.stop()
            self._live = None
            if not self.console.is_terminal:
                self.console.line()  # the last frame ends without a newline off a terminal

    def print(self, text: str) -> None:
        """Print text as is (no markup)."""
        self.console.print(text, markup=False, highlight=False)


def make_display(*, plain: bool = False, stream: TextIO | None = None) -> Display:
    """The rich live view when rich is installed and ``plain`` is False, else plain lines."""
    if not plain:
        try:
            from rich.console import Console
        except ImportError:
            pass
        else:
            return RichDisplay(Console(file=stream))
    return PlainDisplay(stream)
