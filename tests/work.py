"""The work a call does, counted rather than timed: no test reads a clock to judge speed.

``LinesRun`` counts the lines a module's code runs (its algorithm's steps).

``RegexWork.install`` replaces every compiled pattern held by a module of
``langgraph_combee`` (and the ``re`` functions those modules call) with a proxy
that adds up the characters each call reads: a search to the end of its match
(or of the text), a ``finditer``, ``findall``, ``split`` or ``sub`` over the
whole string it is handed. A reading that is linear in its input reads about
four times the characters on an input four times as long; a quadratic one (a
search restarted from every match to the end of the text, the rest of the text
sliced for every match) reads about sixteen times. No clock is read.
"""

from __future__ import annotations

import re
import sys
import types
from typing import Any

import pytest

_WHOLE = ("finditer", "findall", "split", "sub", "subn")


class _Counted:
    """A compiled pattern that adds what each call reads to its ``RegexWork``."""

    def __init__(self, pattern: re.Pattern[str], work: RegexWork) -> None:
        self._pattern = pattern
        self._work = work

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pattern, name)

    def search(self, string: str, pos: int = 0, endpos: int | None = None) -> Any:
        end = len(string) if endpos is None else endpos
        found = self._pattern.search(string, pos, end)
        self._work.characters += (found.end() if found else end) - pos
        return found

    def match(self, string: str, pos: int = 0, endpos: int | None = None) -> Any:
        end = len(string) if endpos is None else endpos
        found = self._pattern.match(string, pos, end)
        self._work.characters += (found.end() - pos) if found else 1
        return found

    def fullmatch(self, string: str, pos: int = 0, endpos: int | None = None) -> Any:
        end = len(string) if endpos is None else endpos
        self._work.characters += end - pos
        return self._pattern.fullmatch(string, pos, end)

    def finditer(self, string: str, *args: Any) -> Any:
        self._work.characters += len(string)
        return self._pattern.finditer(string, *args)

    def findall(self, string: str, *args: Any) -> Any:
        self._work.characters += len(string)
        return self._pattern.findall(string, *args)

    def split(self, string: str, *args: Any, **kwargs: Any) -> Any:
        self._work.characters += len(string)
        return self._pattern.split(string, *args, **kwargs)

    def sub(self, repl: Any, string: str, *args: Any, **kwargs: Any) -> Any:
        self._work.characters += len(string)
        return self._pattern.sub(repl, string, *args, **kwargs)

    def subn(self, repl: Any, string: str, *args: Any, **kwargs: Any) -> Any:
        self._work.characters += len(string)
        return self._pattern.subn(repl, string, *args, **kwargs)


class RegexWork:
    """Characters read by the package's regular expressions since ``install``."""

    def __init__(self) -> None:
        self.characters = 0

    def _counted(self, pattern: str | re.Pattern[str], flags: int = 0) -> _Counted:
        compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, flags)
        return _Counted(compiled, self)

    def _module(self) -> types.SimpleNamespace:
        # The ``re`` functions a module calls as ``re.search(pattern, text)``, counted too.
        def call(name: str) -> Any:
            def counted(pattern: Any, *args: Any, **kwargs: Any) -> Any:
                flags = kwargs.pop("flags", 0)
                return getattr(self._counted(pattern, flags), name)(*args, **kwargs)

            return counted

        names = ("search", "match", "fullmatch", *_WHOLE)
        functions = {name: getattr(re, name) for name in dir(re) if not name.startswith("__")}
        functions.update({name: call(name) for name in names}, compile=self._counted)
        return types.SimpleNamespace(**functions)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> RegexWork:
        """Count from now on, in every loaded ``langgraph_combee`` module; undone with the test."""
        module = self._module()
        for name, loaded in list(sys.modules.items()):
            if not name.startswith("langgraph_combee") or loaded is None:
                continue
            for attribute, value in list(vars(loaded).items()):
                if isinstance(value, re.Pattern):
                    monkeypatch.setattr(loaded, attribute, self._counted(value))
                elif value is re:
                    monkeypatch.setattr(loaded, attribute, module)
        return self


class LinesRun:
    """Lines of one module's code run inside ``with``: the steps of its algorithms.

    Counted with ``sys.settrace`` on the calling thread, for code in ``module``'s
    file only; the tracer in place before is put back on leaving.
    """

    def __init__(self, module: types.ModuleType) -> None:
        self.lines = 0
        self._file = module.__file__
        self._previous: Any = None

    def _trace(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != self._file:
            return None
        if event == "line":
            self.lines += 1
        return self._trace

    def __enter__(self) -> LinesRun:
        self._previous = sys.gettrace()
        sys.settrace(self._trace)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self._previous)
