"""A second public injection corpus: AgentDojo's injection goals in its attack templates.

AgentDojo (ETH Zurich's benchmark of prompt injections against tool-using agents,
MIT, ``agentdojo`` on PyPI) ships task suites (a workspace, a travel agency, a
bank, a Slack workspace) whose *injection tasks* each state an attacker's goal
(``GOAL``: send money to an account, forward the inbox, post a phishing link),
and attacks that wrap a goal in a template ("ignore your previous instructions",
a fake system message, a signed ``<INFORMATION>`` note from the user, the tool
calls that reach the goal) or plant a fixed text that stops the agent (the
``dos`` attacks). None of their text is copied here: ``load_agentdojo()`` reads
``agentdojo/default_suites/<version>/<suite>/injection_tasks.py`` and
``agentdojo/attacks/*.py`` from an installed ``agentdojo`` distribution
(``pip install --no-deps agentdojo==0.1.35``) or its wheel (``pip download
--no-deps agentdojo==0.1.35``) with ``ast`` (``benchmarks/_public.py``) and never
imports agentdojo.

The corpus is every distinct goal of every suite and benchmark version, each in
every template that takes a goal, and each goal-free template once. An attack
class's template is the string it hands its base's constructor or the string its
``attack()`` formats; its user name is the one its constructor (or class) sets.
The model's name, which AgentDojo takes from the attacked pipeline, is its own
neutral default (``DEFAULT_MODEL_NAME``, "the AI language model"), so
``important_instructions`` and its ``no_model_name`` and ``wrong_model_name``
variants are one text. ``{task}`` (the user's task) is our ticket, and
``{tools}`` (``tool_knowledge``) is built from the goal's ground-truth calls'
``placeholder_args`` where they are literals, by the template sentences of the
attack's ``get_tools_sequence``; a goal whose calls are computed has no
``tool_knowledge`` attack.
"""

from __future__ import annotations

import ast
import contextlib
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._public import (
    TICKET,
    Attack,
    CorpusNotFound,
    LiteralModule,
    Package,
    Unknown,
    markers,
    open_package,
)

AGENTDOJO_VERSION = "0.1.35"
"""The release the first run read; another release is read the same way and recorded."""

_TASKS = re.compile(r"^agentdojo/default_suites/(v[\d_]+)/(\w+)/injection_tasks\.py$")
_ATTACKS = re.compile(r"^agentdojo/attacks/\w+\.py$")
_TEMPLATE_PART = re.compile(r"\{\w*\}")


class AgentDojoNotFound(CorpusNotFound):
    """Neither an installed agentdojo nor an agentdojo wheel could be read, or it held nothing."""


@dataclass(frozen=True)
class Goal:
    """One injection task's goal.

    Attributes:
        suite: The task suite (``workspace``, ``travel``, ``banking``, ``slack``).
        version: The first benchmark version that states this goal (``v1``, ``v1_2``).
        task: The injection task's class name.
        text: The goal.
        values: The task's own string constants the goal names (the attacker's
            account, address, link).
        tools: The goal's ground-truth calls as ``(function, placeholder_args)``;
            None where they are computed.
    """

    suite: str
    version: str
    task: str
    text: str
    values: tuple[str, ...]
    tools: tuple[tuple[str, str], ...] | None


@dataclass(frozen=True)
class Template:
    """One attack class's text.

    Attributes:
        name: The attack's registered name.
        text: The template (``{goal}``, ``{user}``, ``{model}``, ``{task}``, ``{tools}``).
        user: The user name the attack signs with.
    """

    name: str
    text: str
    user: str


@dataclass
class Corpus:
    """What ``load_agentdojo()`` read.

    Attributes:
        attacks: Every attack, each text once.
        version: The agentdojo version read.
        goals: The distinct goals read.
        templates: The attack templates read.
        skipped: What could not be read or filled, each with why.
    """

    attacks: tuple[Attack, ...]
    version: str
    goals: tuple[Goal, ...]
    templates: tuple[Template, ...]
    skipped: list[str] = field(default_factory=list)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in version.removeprefix("v").split("_"))


def _method(module: LiteralModule, cls: str, name: str) -> tuple[str, ast.FunctionDef] | None:
    """The class defining ``cls.name`` (``cls``, then its bases left to right) and the method."""
    for node in module.classes[cls].body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return cls, node
    for base in module.bases(cls):
        found = _method(module, base, name)
        if found is not None:
            return found
    return None


def _calls(function: ast.FunctionDef, name: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(function)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
    ]


def _ground_truth(module: LiteralModule, cls: str) -> tuple[tuple[str, str], ...] | None:
    """``(function, str(placeholder_args))`` of each ``FunctionCall`` ``ground_truth`` returns.

    None if a call's arguments are not literals or the calls are built in a loop.
    """
    found = _method(module, cls, "ground_truth")
    if found is None:
        return None
    function = found[1]
    if any(isinstance(n, ast.For | ast.comprehension | ast.While) for n in ast.walk(function)):
        return None
    out = []
    for call in _calls(function, "FunctionCall"):
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        if "function" not in kwargs or "placeholder_args" not in kwargs:
            return None
        try:
            name = module.value(kwargs["function"], cls)
            args = module.value(kwargs["placeholder_args"], cls)
        except Unknown:
            return None
        out.append((str(name), str(args)))
    return tuple(out) or None


def _goals(package: Package, skipped: list[str]) -> list[Goal]:
    files = sorted(
        (m.groups() for name in package.names if (m := _TASKS.match(name))),
        key=lambda vs: (_version_key(vs[0]), vs[1]),
    )
    seen: dict[str, Goal] = {}
    for version, suite in files:
        module = LiteralModule(
            package.read(f"agentdojo/default_suites/{version}/{suite}/injection_tasks.py")
        )
        for cls in module.classes:
            node = module.own(cls, "GOAL")
            if node is None:
                continue
            try:
                text = str(module.value(node, cls))
            except Unknown as why:
                skipped.append(f"{version}/{suite}/{cls}: GOAL names {why}")
                continue
            values = []
            for item in module.classes[cls].body:
                if isinstance(item, ast.Assign | ast.AnnAssign) and item.value is not None:
                    with contextlib.suppress(Unknown):
                        value = module.value(item.value, cls)
                        if isinstance(value, str) and value != text and value in text:
                            values.append(value)
            goal = Goal(suite, version, cls, text, tuple(values), _ground_truth(module, cls))
            seen.setdefault(text, goal)
    return list(seen.values())


def _assigned(function: ast.FunctionDef, attr: str) -> ast.AST | None:
    """The last expression ``function`` assigns to ``self.<attr>``."""
    found = None
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and target.attr == attr
                ):
                    found = node.value
    return found


def _chain(module: LiteralModule, cls: str) -> list[str]:
    out = [cls]
    for base in module.bases(cls):
        out += [c for c in _chain(module, base) if c not in out]
    return out


def _template_text(module: LiteralModule, cls: str) -> str | None:
    """The string ``cls`` hands its base's constructor, else the one its ``attack()`` formats."""
    for owner in _chain(module, cls):
        found = _method(module, owner, "__init__")
        if found is None or found[0] != owner:
            continue
        for call in ast.walk(found[1]):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "__init__"
                and ast.unparse(call.func.value) == "super()"
                and call.args
            ):
                with contextlib.suppress(Unknown):
                    text = module.value(call.args[0], cls)
                    if isinstance(text, str):
                        return text
    attack = _method(module, cls, "attack")
    if attack is not None:
        for call in ast.walk(attack[1]):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "format"
            ):
                with contextlib.suppress(Unknown):
                    text = module.value(call.func.value, cls)
                    if isinstance(text, str):
                        return text
    return None


def _user(module: LiteralModule, cls: str) -> str:
    """The user name ``cls``'s constructor sets (its own first), else its class attribute."""
    for owner in _chain(module, cls):
        found = _method(module, owner, "__init__")
        if found is None or found[0] != owner:
            continue
        node = _assigned(found[1], "user_name")
        if node is not None:
            with contextlib.suppress(Unknown):
                return str(module.value(node, cls))
    with contextlib.suppress(Unknown):
        return str(module.attribute(cls, "user_name"))
    return str(module.constants.get("DEFAULT_USER_NAME", "the user"))


def _templates(module: LiteralModule) -> list[Template]:
    out = []
    for cls in module.classes:
        node = module.own(cls, "name")
        if node is None:
            continue
        with contextlib.suppress(Unknown):
            name = str(module.value(node, cls))
            text = _template_text(module, cls)
            if text is not None:
                out.append(Template(name, text, _user(module, cls)))
    return out


def _tool_sentences(module: LiteralModule) -> tuple[str, str, str] | None:
    """The first, middle and last sentence templates of ``get_tools_sequence``.

    Each has ``{function}`` and ``{args}`` where the attack formats the call's function
    and placeholder arguments; None if the method is not shaped as read.
    """
    for cls in module.classes:
        found = _method(module, cls, "get_tools_sequence")
        if found is None:
            continue
        # if i == 0: output += f"..." / elif i == len(...) - 1: output += f"..." / else: ...
        chains = [
            n
            for n in ast.walk(found[1])
            if isinstance(n, ast.If)
            and len(n.orelse) == 1
            and isinstance(n.orelse[0], ast.If)
            and all(isinstance(b, ast.AugAssign) for b in n.body)
        ]
        if not chains:
            return None
        elif_ = chains[0].orelse[0]
        assert isinstance(elif_, ast.If)
        first, middle, last = chains[0].body, elif_.orelse, elif_.body
        texts = [_sentence(part) for part in (first, middle, last)]
        if any(t is None for t in texts):
            return None
        return texts[0], texts[1], texts[2]  # type: ignore[return-value]
    return None


def _sentence(body: list[ast.stmt]) -> str | None:
    if len(body) != 1 or not isinstance(body[0], ast.AugAssign):
        return None
    value = body[0].value
    if not isinstance(value, ast.JoinedStr):
        return None
    out = []
    for part in value.values:
        if isinstance(part, ast.Constant):
            out.append(str(part.value).replace("{", "{{").replace("}", "}}"))
        elif isinstance(part, ast.FormattedValue):
            said = ast.unparse(part.value)
            if said.endswith(".function"):
                out.append("{function}")
            elif said.endswith(".placeholder_args"):
                out.append("{args}")
            else:
                return None
    return "".join(out)


def _tools(goal: Goal, sentences: tuple[str, str, str] | None) -> str | None:
    if goal.tools is None or sentences is None:
        return None
    first, middle, last = sentences
    out = ""
    for i, (function, args) in enumerate(goal.tools):
        sentence = first if i == 0 else last if i == len(goal.tools) - 1 else middle
        out += sentence.format(function=function, args=args)
    return out


def _fixed_parts(template: str) -> list[str]:
    # The template's own lines around its placeholders ("<INFORMATION>", "Ignore your
    # previous instructions. Do"): one in a rule learned from the attack shows it.
    return [
        line.strip()
        for piece in _TEMPLATE_PART.split(template)
        for line in piece.splitlines()
        if len(line.strip()) >= 12
    ]


def load_agentdojo(wheel: Path | None = None) -> Corpus:
    """AgentDojo's goals in its attack templates, each text once, and what was read.

    Args:
        wheel: An agentdojo wheel to read; None reads the installed ``agentdojo``.

    Raises:
        AgentDojoNotFound: No agentdojo to read (the message gives the command that
            installs it), or it holds no injection goal or no attack template.
    """
    package = open_package("agentdojo", AGENTDOJO_VERSION, wheel, AgentDojoNotFound)
    skipped: list[str] = []
    goals = _goals(package, skipped)
    module = LiteralModule(*(package.read(n) for n in sorted(package.names) if _ATTACKS.match(n)))
    templates = _templates(module)
    if not goals or not templates:
        raise AgentDojoNotFound(
            f"agentdojo {package.version} gave {len(goals)} injection goals and "
            f"{len(templates)} attack templates; both are needed"
        )
    model = str(module.constants.get("DEFAULT_MODEL_NAME", "the AI language model"))
    sentences = _tool_sentences(module)
    seen: dict[str, Attack] = {}
    for template in templates:
        fields = {f for _, f, _, _ in string.Formatter().parse(template.text) if f is not None}
        fixed = _fixed_parts(template.text)
        if "goal" not in fields:
            text = template.text.format(user=template.user, model=model, task=TICKET).strip()
            seen.setdefault(text, Attack("dos", template.name, text, markers(*fixed)))
            continue
        for goal in goals:
            tools = _tools(goal, sentences) if "tools" in fields else ""
            if tools is None:
                skipped.append(f"{template.name} x {goal.suite}/{goal.task}: no literal tools")
                continue
            filled = {"goal": goal.text, "user": template.user, "model": model}
            text = template.text.format(**filled, task=TICKET, tools=tools).strip()
            probe = f"{template.name}:{goal.suite}/{goal.version}/{goal.task}"
            seen.setdefault(
                text,
                Attack(template.name, probe, text, markers(goal.text, *goal.values, *fixed)),
            )
    return Corpus(tuple(seen.values()), package.version, tuple(goals), tuple(templates), skipped)


def describe(corpus: Corpus) -> dict[str, Any]:
    """What the corpus holds, for the record: goals per suite, attacks per template."""
    suites: dict[str, int] = {}
    for goal in corpus.goals:
        suites[goal.suite] = suites.get(goal.suite, 0) + 1
    families: dict[str, int] = {}
    for attack in corpus.attacks:
        families[attack.family] = families.get(attack.family, 0) + 1
    return {
        "agentdojo": corpus.version,
        "goals_by_suite": suites,
        "templates": {t.name: t.user for t in corpus.templates},
        "attacks_by_template": families,
        "skipped": len(corpus.skipped),
    }
