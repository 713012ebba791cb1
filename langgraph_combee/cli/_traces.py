"""Where ``combee learn`` gets its traces: a JSONL file (or stdin) or a LangSmith project.

A JSONL file holds one ``Trace`` object per line (the fields of
``langgraph_combee.Trace``; only ``input``/``output``/``feedback`` matter in
practice). A line that is not valid JSON, nested too deeply to read, not a valid
trace (a field a trace does not have, such as a misspelled ``feedbak``, makes
it invalid), or an object with none of a trace's fields (``{"foo": 1}``) is reported
with its line number and skipped; the rest still loads. Blank lines are ignored,
and a UTF-8 byte-order mark is accepted.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from langgraph_combee._core.types import Trace
from langgraph_combee._errors import CombeeError
from langgraph_combee.cli._common import EXIT_FAILED, EXIT_USAGE, CliError

# Characters of a validation message kept per bad line: enough to name the field.
_MAX_REASON = 200
# A line must carry at least one of these to be a trace to learn from
# (``{"foo": 1}`` is not one: it would make an empty trace, paid for in calls).
_TRACE_FIELDS = frozenset({"input", "messages", "output", "tool_calls", "error", "feedback"})
_SHOWN_FIELDS = ("input", "output", "messages", "feedback")


@dataclass(frozen=True)
class LineError:
    """A line of a JSONL file that could not be read as a trace."""

    line: int
    reason: str


@dataclass(frozen=True)
class LoadedTraces:
    """The traces read from a file, and the lines that were skipped."""

    traces: list[Trace] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)
    lines: int = 0


def _reason(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        parts.append(f"{where}: {err['msg']}" if where else str(err["msg"]))
    text = "; ".join(parts)
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 3] + "..."


def parse_lines(lines: Iterable[bytes]) -> LoadedTraces:
    """Parse JSONL lines (as bytes) into traces, collecting per-line errors.

    Args:
        lines: The raw lines, in file order (line numbers start at 1).

    Returns:
        The valid traces, in order, and one ``LineError`` per skipped line.
    """
    traces: list[Trace] = []
    errors: list[LineError] = []
    count = 0
    for number, raw in enumerate(lines, start=1):
        count = number
        try:
            # utf-8-sig: files written by some editors start with a byte-order mark.
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            errors.append(LineError(number, f"not UTF-8 ({exc.reason} at byte {exc.start})"))
            continue
        if not text.strip():
            continue
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as exc:
            errors.append(LineError(number, f"not valid JSON ({exc.msg}, column {exc.colno})"))
            continue
        except RecursionError:
            errors.append(LineError(number, "not readable: JSON nested too deeply"))
            continue
        if not isinstance(data, dict):
            errors.append(LineError(number, f"expected a JSON object, got {type(data).__name__}"))
            continue
        # Before validation: a line with no trace field at all ({"foo": 1}) is told
        # so, rather than that "foo" is not a field of a trace.
        if not _TRACE_FIELDS.intersection(data):
            keys = ", ".join(sorted(map(str, data))[:5]) or "none"
            errors.append(
                LineError(
                    number,
                    f"no trace field (found: {keys}; expected some of {', '.join(_SHOWN_FIELDS)})",
                )
            )
            continue
        try:
            trace = Trace.model_validate(data)
        except ValidationError as exc:
            errors.append(LineError(number, f"not a valid trace ({_reason(exc)})"))
            continue
        except RecursionError:
            errors.append(LineError(number, "not a valid trace: a value nested too deeply"))
            continue
        traces.append(trace)
    return LoadedTraces(traces=traces, errors=errors, lines=count)


def read_jsonl(source: str) -> LoadedTraces:
    """Read traces from a JSONL file, or from standard input when ``source`` is ``-``.

    Raises:
        CliError: When the file does not exist or is not a regular file (exit code 2).
        OSError: When it cannot be read.
    """
    if source == "-":
        return parse_lines(sys.stdin.buffer)
    path = Path(source).expanduser()
    if not path.exists():
        raise CliError(f"traces file not found: {source}", EXIT_USAGE)
    if not path.is_file():
        raise CliError(f"traces file is not a file: {source}", EXIT_USAGE)
    with path.open("rb") as stream:
        return parse_lines(stream)


def from_langsmith(project: str, *, limit: int | None = None) -> list[Trace]:
    """Fetch a LangSmith project's runs as traces.

    Uses ``langgraph_combee.langsmith.traces_from_project`` with a default
    ``langsmith.Client()`` (configured by the ``LANGSMITH_*`` environment).

    Args:
        project: The LangSmith project's name.
        limit: Most runs to read (the newest); None reads them all.

    Raises:
        MissingExtraError: When the LangSmith integration is not installed.
        CliError: When the project cannot be read.
    """
    try:
        module = importlib.import_module("langgraph_combee.langsmith")
        fetch = module.traces_from_project
    except (ImportError, AttributeError):
        raise CliError(
            "--from-langsmith needs langgraph_combee.langsmith.traces_from_project, "
            "which this install lacks; upgrade langgraph-combee",
            EXIT_USAGE,
        ) from None
    from langsmith import Client

    # The SDK logs its own connection failures (``/info``, retries) on top of
    # the error it raises; the one line below says it all.
    sdk_logger = logging.getLogger("langsmith")
    level = sdk_logger.level
    sdk_logger.setLevel(logging.CRITICAL)
    try:
        options = {} if limit is None else {"limit": limit}
        traces = list(fetch(Client(), project, **options))
    except CombeeError:
        raise
    except Exception as exc:  # network, auth and API errors alike: report, don't trace back
        raise CliError(
            f"cannot read traces from LangSmith project {project!r}: "
            f"{type(exc).__name__}: {_first_line(exc)}",
            EXIT_FAILED,
        ) from None
    finally:
        sdk_logger.setLevel(level)
    return [t if isinstance(t, Trace) else Trace.model_validate(t) for t in traces]


def _first_line(exc: BaseException, limit: int = 240) -> str:
    # LangSmith errors append the nested urllib3 repr, headers and the masked key.
    text = (str(exc).strip().splitlines() or [""])[0]
    for cut in (" ConnectionError(", " HTTPError(", " MaxRetryError("):
        text = text.split(cut, 1)[0]
    return text if len(text) <= limit else text[: limit - 1] + "…"
