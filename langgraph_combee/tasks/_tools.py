"""Tool calls by house rules: a customer-service agent that acts through tools (``"tools"``).

The agent is a ``create_agent`` agent with six tools (``lookup_order``,
``issue_refund``, ``reschedule_delivery``, ``cancel_order``, ``open_case``,
``send_voucher``). Each request (a refund, a new delivery date, a broken item...)
has one right sequence of calls, and the house conventions live in the calls:
which tool comes first (``lookup_order`` before a refund or a courier
complaint), how an argument is written (amounts in cents, dates as
``YYYYMMDD``) and which house value it takes (queue ``REP-2``, reason
``customer_request``, voucher ``SORRY10``). The tools' own descriptions say
what each argument is, never the convention: a model cannot guess them.

The answer is the calls the agent made, written as Python calls joined by
``"; "`` (``lookup_order(order_id='NW-24817'); issue_refund(order_id='NW-24817',
amount='2490')``): the ground truth has that form, ``answer_of`` renders a
run's calls that way, and ``evaluator()`` scores captured traces from their
tool calls and writes a comment naming the right calls. Scoring compares the
action calls (every tool but ``lookup_order``) in order, argument values
case-insensitively, and requires a ``lookup_order`` of the order before the
first action only where the house rule says so (an extra look-up elsewhere is
harmless); a repeated identical call counts once.

What the real models do with these tools: ``docs/tasks.md``. Measure the
baseline and the ceiling on a model::

    python -m langgraph_combee.tasks --model local:1.5b --task tools -n 24
"""

from __future__ import annotations

import ast
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from langgraph_combee._core.types import Feedback, Trace
from langgraph_combee.tasks._base import Example, Rule, Split, Task

if TYPE_CHECKING:
    from langgraph_combee.testing import FunctionChatModel

__all__ = ["Call", "ToolCalls", "parse_calls", "render_calls"]

LOOKUP = "lookup_order"


@dataclass(frozen=True)
class Call:
    """One tool call: the tool's name and its arguments."""

    name: str
    args: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, name: str, args: Mapping[str, Any]) -> Call:
        """A call from a name and an argument mapping (order kept)."""
        return cls(name, tuple(args.items()))

    def render(self) -> str:
        """``name(key='value', ...)``."""
        inner = ", ".join(f"{key}={_literal(value)}" for key, value in self.args)
        return f"{self.name}({inner})"

    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """What scoring compares: the name and each value trimmed and upper-cased."""
        return self.name, tuple(sorted((k, _norm(v)) for k, v in self.args))


def _literal(value: Any) -> str:
    if isinstance(value, str | int | float | bool) or value is None:
        return repr(value)
    return repr(str(value))


def _norm(value: Any) -> str:
    return " ".join(str(value).upper().split())


def render_calls(calls: Sequence[Call]) -> str:
    """Calls as Python calls joined by ``"; "`` (``""`` for none)."""
    return "; ".join(call.render() for call in calls)


def parse_calls(text: str) -> list[Call]:
    """The calls ``render_calls`` wrote; ``[]`` for anything else (prose, a syntax error)."""
    try:
        tree = ast.parse(text.strip(), mode="exec")
    except (SyntaxError, ValueError):
        return []
    calls: list[Call] = []
    for statement in tree.body:
        node = statement.value if isinstance(statement, ast.Expr) else None
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
            return []
        args: list[tuple[str, Any]] = []
        for keyword in node.keywords:
            if keyword.arg is None:
                return []
            try:
                args.append((keyword.arg, ast.literal_eval(keyword.value)))
            except ValueError:
                return []
        calls.append(Call(node.func.id, tuple(args)))
    return calls


def calls_right(made: Sequence[Call], expected: Sequence[Call]) -> bool:
    """Whether ``made`` follows ``expected`` (see the module docstring for the tolerance)."""
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    unique = []
    for call in made:
        if call.key() not in seen:
            seen.add(call.key())
            unique.append(call)
    actions = [c.key() for c in unique if c.name != LOOKUP]
    if actions != [c.key() for c in expected if c.name != LOOKUP]:
        return False
    if not expected or expected[0].name != LOOKUP:
        return True
    first_action = next((i for i, c in enumerate(unique) if c.name != LOOKUP), len(unique))
    return expected[0].key() in [c.key() for c in unique[:first_action]]


# ---- the tools -----------------------------------------------------------------------------


def _tool(name: str, description: str, **params: str) -> BaseTool:
    """A tool taking string arguments that confirms what it was asked to do."""

    def run(**kwargs: Any) -> str:
        # Plain statuses, as a back office answers: a look-up leaves the request open,
        # an action closes it (told nothing, a small model keeps calling tools).
        if name == LOOKUP:
            return f"Order {kwargs.get('order_id')}: found, delivered, paid by card."
        return f"Done: {Call.of(name, kwargs).render()}. The request is complete."

    schema = {
        "type": "object",
        "properties": {
            key: {"type": "string", "description": text} for key, text in params.items()
        },
        "required": list(params),
    }
    return StructuredTool.from_function(
        func=run, name=name, description=description, args_schema=schema
    )


def make_tools() -> list[BaseTool]:
    """The six tools the agent is given (fresh instances)."""
    return [
        _tool(LOOKUP, "Look up an order.", order_id="The order id, e.g. NW-12345."),
        _tool(
            "issue_refund",
            "Refund money for an order.",
            order_id="The order id.",
            amount="The amount to refund.",
        ),
        _tool(
            "reschedule_delivery",
            "Move an order's delivery to another date.",
            order_id="The order id.",
            date="The new delivery date.",
        ),
        _tool(
            "cancel_order",
            "Cancel an order.",
            order_id="The order id.",
            reason="Why the order is cancelled.",
        ),
        _tool(
            "open_case",
            "Open a support case for an order in a team's queue.",
            order_id="The order id.",
            queue="The queue the case goes to.",
        ),
        _tool(
            "send_voucher",
            "Send the customer a voucher.",
            order_id="The order id.",
            code="The voucher code.",
        ),
    ]


# ---- the rules and examples -----------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    Rule(
        "refunds",
        "Refunds: call lookup_order first, then issue_refund with amount in cents, digits "
        "only (EUR 24.90 -> amount='2490').",
        (r"\brefund", r"money back"),
        "cents",
    ),
    Rule(
        "delivery_dates",
        "New delivery dates: call reschedule_delivery with date written as YYYYMMDD, "
        "digits only (5 March 2026 -> date='20260305').",
        (r"\bdeliver",),
        "YYYYMMDD",
    ),
    Rule(
        "cancellations",
        "Cancellations: call cancel_order with reason='customer_request', whatever reason "
        "the customer gives.",
        (r"\bcancel",),
        "customer_request",
    ),
    Rule(
        "repairs",
        "Broken or faulty items: call open_case with queue='REP-2'.",
        (r"\bbroken", r"\bfaulty", r"stopped working"),
        "REP-2",
    ),
    Rule(
        "courier",
        "Complaints about the courier or driver: call lookup_order first, then open_case "
        "with queue='LOG-8W'.",
        (r"\bcourier", r"\bdriver"),
        "LOG-8W",
    ),
    Rule(
        "late_parcels",
        "Late parcels: call send_voucher with code='SORRY10'.",
        (r"\blate\b", r"not arrived", r"still waiting"),
        "SORRY10",
    ),
)

# Templates per rule and split. Fields: {order}, {item}, {amount} (EUR, as written),
# {date} (as written), {why} (a customer's reason to cancel).
TEMPLATES: dict[str, dict[Split, tuple[str, ...]]] = {
    "refunds": {
        "train": (
            "Please refund the EUR {amount} I paid for the {item}, order {order}.",
            "I returned the {item} from order {order}. I want my EUR {amount} back as a refund.",
        ),
        "test": (
            "Order {order}: the {item} went back to you, so I would like a refund of EUR {amount}.",
            "Can I have my money back for the {item}? It was EUR {amount}, order {order}.",
        ),
    },
    "delivery_dates": {
        "train": (
            "Could you deliver order {order} on {date} instead?",
            "I will be away. Please deliver my {item} (order {order}) on {date}.",
        ),
        "test": (
            "Order {order}: I would prefer the {item} to be delivered on {date}.",
            "Is it possible to change the delivery of order {order} to {date}?",
        ),
    },
    "cancellations": {
        "train": (
            "Please cancel order {order}, {why}.",
            "I want to cancel the {item} I ordered ({order}) because {why}.",
        ),
        "test": (
            "Order {order} for the {item}: cancel it please, {why}.",
            "Could you cancel my order {order}? The reason: {why}.",
        ),
    },
    "repairs": {
        "train": (
            "The {item} from order {order} arrived broken.",
            "My {item} stopped working after two days, order {order}.",
        ),
        "test": (
            "Order {order}: the {item} is faulty, it makes a strange noise.",
            "The lid of the {item} is broken. My order is {order}.",
        ),
    },
    "courier": {
        "train": (
            "The courier threw the parcel with my {item} over the fence. Order {order}.",
            "Your driver was very rude to me when he brought order {order}.",
        ),
        "test": (
            "Order {order}: the courier left my {item} in the rain at the door.",
            "I want to complain about the driver who handled order {order}.",
        ),
    },
    "late_parcels": {
        "train": (
            "My parcel with the {item} is two weeks late. Order {order}.",
            "Order {order} has not arrived yet and it was due last week.",
        ),
        "test": (
            "I am still waiting for the {item} from order {order}, the tracking shows nothing.",
            "The parcel for order {order} is late again, where is my {item}?",
        ),
    },
}

ITEMS: dict[Split, tuple[str, ...]] = {
    "train": ("kettle", "desk lamp", "backpack", "blender", "coffee grinder", "rain jacket"),
    "test": ("toaster", "office chair", "tent", "hair dryer", "yoga mat", "wall clock"),
}
REASONS: dict[Split, tuple[str, ...]] = {
    "train": ("I changed my mind", "I found it cheaper elsewhere", "I ordered it twice"),
    "test": ("I no longer need it", "it takes too long", "I bought the wrong size"),
}
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
NAIVE_QUEUES = {"repairs": "repairs", "courier": "complaints"}


@dataclass(frozen=True)
class _Solution:
    rule: str
    right: tuple[Call, ...]
    naive: tuple[Call, ...]


# The rule-following double answers from these, per input it generated.
_SOLUTIONS: dict[str, _Solution] = {}


def _details(rule_id: str, rng: random.Random, split: Split) -> tuple[dict[str, str], _Solution]:
    order = (
        f"NW-{rng.randrange(20_000, 50_000) if split == 'train' else rng.randrange(60_000, 99_999)}"
    )
    fields = {"order": order, "item": rng.choice(ITEMS[split])}
    oid = {"order_id": order}
    lookup = Call.of(LOOKUP, oid)
    right: tuple[Call, ...]
    naive: tuple[Call, ...]
    if rule_id == "refunds":
        cents = rng.randrange(300, 20_000, 10)
        fields["amount"] = f"{cents / 100:.2f}"
        right = (lookup, Call.of("issue_refund", {**oid, "amount": str(cents)}))
        naive = (Call.of("issue_refund", {**oid, "amount": fields["amount"]}),)
    elif rule_id == "delivery_dates":
        year, month, day = rng.choice((2026, 2027)), rng.randrange(1, 13), rng.randrange(1, 29)
        name = MONTHS[month - 1]
        fields["date"] = f"{day} {name} {year}" if split == "train" else f"{name} {day}, {year}"
        right = (Call.of("reschedule_delivery", {**oid, "date": f"{year}{month:02d}{day:02d}"}),)
        naive = (Call.of("reschedule_delivery", {**oid, "date": fields["date"]}),)
    elif rule_id == "cancellations":
        fields["why"] = rng.choice(REASONS[split])
        right = (Call.of("cancel_order", {**oid, "reason": "customer_request"}),)
        naive = (Call.of("cancel_order", {**oid, "reason": fields["why"]}),)
    elif rule_id in NAIVE_QUEUES:
        queue = "REP-2" if rule_id == "repairs" else "LOG-8W"
        action = Call.of("open_case", {**oid, "queue": queue})
        right = (lookup, action) if rule_id == "courier" else (action,)
        naive = (Call.of("open_case", {**oid, "queue": NAIVE_QUEUES[rule_id]}),)
    else:
        right = (Call.of("send_voucher", {**oid, "code": "SORRY10"}),)
        naive = (Call.of("send_voucher", {**oid, "code": "LATE"}),)
    return fields, _Solution(rule_id, right, naive)


def calls_in(messages: Sequence[BaseMessage]) -> list[Call]:
    """The tool calls the AI messages of a conversation made, in order."""
    return [
        Call.of(call["name"], call.get("args") or {})
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    ]


class ToolCalls(Task):
    """Serve customer requests through tools, following the house rules for the calls."""

    name: ClassVar[str] = "tools"
    description: ClassVar[str] = "customer requests served by tool calls in 6 house conventions"
    system_prompt: ClassVar[str] = (
        "You are a customer service agent at Northwind Retail. Serve each request by calling "
        "the tools; when you are done, reply with one short sentence."
    )
    rules_heading: ClassVar[str] = "House rules for tool calls:"
    agent_max_tokens: ClassVar[int | None] = 160

    @property
    def rule_set(self) -> tuple[Rule, ...]:
        """One rule per kind of request."""
        return RULES

    def tools(self) -> list[BaseTool]:
        """The agent's tools."""
        return make_tools()

    def _example(self, rule: Rule, rng: random.Random, split: Split) -> Example:
        templates = TEMPLATES[rule.id][split]
        template = rng.randrange(len(templates))
        fields, solution = _details(rule.id, rng, split)
        text = templates[template].format(**fields)
        _SOLUTIONS[text] = solution
        return Example(
            input=text,
            answer=render_calls(solution.right),
            meta={"rule": rule.id, "template": f"{split}-{template}", "split": split},
        )

    def normalise(self, answer: str) -> str:
        """The calls in ``answer`` rendered again (``""`` when it holds none)."""
        return render_calls(parse_calls(answer))

    def score(self, answer: str, example: Example) -> bool:
        """Whether the calls in ``answer`` follow the calls of ``example.answer``."""
        return calls_right(parse_calls(answer), parse_calls(example.answer))

    def answer_of(self, result: Any) -> str:
        """The tool calls the run made, rendered (``""`` for none)."""
        messages = result.get("messages") if isinstance(result, dict) else None
        return render_calls(calls_in(messages or []))

    def follow_rules(self, system_prompt: str, user_input: str) -> str:
        """The right calls when the prompt states the request's rule, else the naive ones."""
        solution = _SOLUTIONS.get(user_input)
        if solution is None:
            return ""
        stated = {rule.id for rule in self.stated_rules(system_prompt)}
        return render_calls(solution.right if solution.rule in stated else solution.naive)

    def insight(self, task_input: str, ground_truth: str | None, output: str) -> str:
        """The house rule the right calls follow ("" when the run was right)."""
        solution = _SOLUTIONS.get(task_input)
        if (
            ground_truth is None
            or solution is None
            or self.score(output, Example("", ground_truth))
        ):
            return ""
        return self.rule(solution.rule).text

    def feedback(self, example: Example, answer: str) -> Feedback:
        """The verdict on ``answer`` with a comment naming the right calls."""
        right = self.score(answer, example)
        if right:
            comment = "Right tool calls."
        else:
            made = self.normalise(answer) or "no tool call"
            comment = (
                f"Wrong tool calls. The right calls: {example.answer}. The agent made: {made}."
            )
        return Feedback(
            correct=right, ground_truth=example.answer, comment=comment, source="evaluator"
        )

    def evaluator(self) -> ToolCallEvaluator:
        """An evaluator for ``Combee(evaluator=...)``: scores traces from their tool calls."""
        return ToolCallEvaluator(self)

    def build_agent(
        self,
        model: BaseChatModel,
        *,
        middleware: Sequence[Any] = (),
        with_rules: bool = False,
    ) -> Any:
        """A ``create_agent`` agent with the six tools (see ``Task.build_agent``)."""
        from langchain.agents import create_agent

        return create_agent(
            self._agent_model(model),
            tools=self.tools(),
            system_prompt=self.prompt(with_rules=with_rules),
            middleware=list(middleware),
        )

    def double_model(self) -> FunctionChatModel:
        """A test model that makes ``follow_rules``'s calls one per turn, then says it is done."""
        from langgraph_combee.testing import FunctionChatModel

        def reply(messages: Sequence[BaseMessage]) -> AIMessage:
            system = "\n".join(str(m.text) for m in messages if isinstance(m, SystemMessage))
            user = next((str(m.text) for m in messages if isinstance(m, HumanMessage)), "")
            planned = parse_calls(self.follow_rules(system, user))
            done = sum(isinstance(m, ToolMessage) for m in messages)
            if done >= len(planned):
                return AIMessage(content="Done.")
            call = planned[done]
            return AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": call.name,
                        "args": dict(call.args),
                        "id": f"call_{done}",
                        "type": "tool_call",
                    }
                ],
            )

        return FunctionChatModel(reply)


class ToolCallEvaluator:
    """Scores a captured trace of the tool task from the tool calls it made.

    Returns None for a trace whose input the task did not generate (nothing
    to compare with).
    """

    def __init__(self, task: ToolCalls) -> None:
        self.task = task

    def __call__(self, trace: Trace) -> Feedback | None:
        solution = _SOLUTIONS.get(trace.input)
        if solution is None:
            return None
        made = render_calls([Call.of(call.name, call.args) for call in trace.tool_calls])
        return self.task.feedback(Example(trace.input, render_calls(solution.right)), made)
