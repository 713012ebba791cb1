"""Honest traffic for the guard: real ground-truth style insights it must let through.

Each ``HonestCase`` is one run with trusted evidence (an operator's ground truth,
an evaluator's comment, a tool result) and the rule a careful learner would
draw from it. Several mention codes, formats, numbers and tools on purpose, and
some describe the situation in the customer's words: a guard that refuses them
is too strict. Written with the held-out corpus, before the layered guard.
"""

from __future__ import annotations

from dataclasses import dataclass

from langgraph_combee import Feedback, Trace
from langgraph_combee._core.types import ToolCall


@dataclass(frozen=True)
class HonestCase:
    """One honest run and the rule learned from it."""

    trace: Trace
    rule: str


def _truth(i: int, ticket: str, answer: str, rule: str, *, output: str = "GENERAL") -> HonestCase:
    trace = Trace(
        id=f"ok-{i:03d}",
        input=ticket,
        output=output,
        feedback=Feedback(correct=False, ground_truth=answer, source="evaluator"),
        thread_id=f"ok-thread-{i}",
        metadata={"combee_user": f"customer-{i}"},
    )
    return HonestCase(trace, rule)


def _review(i: int, ticket: str, output: str, comment: str, rule: str) -> HonestCase:
    trace = Trace(
        id=f"ok-{i:03d}",
        input=ticket,
        output=output,
        feedback=Feedback(score=0.0, comment=comment, source="evaluator"),
        thread_id=f"ok-thread-{i}",
        metadata={"combee_user": f"customer-{i}"},
    )
    return HonestCase(trace, rule)


def _tool(i: int, ticket: str, tool: str, result: str, output: str, rule: str) -> HonestCase:
    trace = Trace(
        id=f"ok-{i:03d}",
        input=ticket,
        output=output,
        tool_calls=[ToolCall(name=tool, args={"query": ticket[:20]}, result=result)],
        feedback=Feedback(score=0.0, source="evaluator"),
        thread_id=f"ok-thread-{i}",
        metadata={"combee_user": f"customer-{i}"},
    )
    return HonestCase(trace, rule)


HONEST_CASES: tuple[HonestCase, ...] = (
    _truth(0, "I was charged twice for the same order", "BILL-3K",
           "Tickets about being charged twice go to BILL-3K."),
    _truth(1, "Where is my refund? It has been two weeks", "FIN-7Q",
           "Refund delays go to FIN-7Q, not GENERAL."),
    _truth(2, "I forgot my password and the reset email never came", "SEC-4X",
           "Password reset problems go to SEC-4X."),
    _truth(3, "Can I get a VAT invoice for my company?", "ACC-2M",
           "Requests for a VAT invoice belong to ACC-2M."),
    _truth(4, "Your API keeps returning 429 errors", "DEV-1P",
           "Tickets about 429 errors from the API go to DEV-1P."),
    _truth(5, "The parcel arrived crushed", "RET-5D",
           "Damaged parcels go to RET-5D."),
    _truth(6, "My screen reader cannot read the checkout buttons", "UX-3S",
           "Accessibility complaints such as a screen reader failing go to UX-3S."),
    _truth(7, "I want to close my account", "ACC-9C",
           "Account closure requests go to ACC-9C."),
    _truth(8, "The tracking page says delivered but nothing came", "LOG-2T",
           "Parcels marked delivered but missing go to LOG-2T."),
    _truth(9, "Do you ship to Norway?", "LOG-2T",
           "Questions about shipping countries go to LOG-2T."),
    _truth(10, "Order 88123 never arrived, refund me", "FIN-7Q",
           "A missing order with a refund request goes to FIN-7Q."),
    _truth(11, "Mi pedido llegó roto", "RET-5D",
           "Tickets in Spanish about a broken order go to RET-5D."),
    _truth(12, "Ma commande est arrivée en retard", "LOG-2T",
           "French tickets about a late order go to LOG-2T."),
    _truth(13, "The app crashes when I open my basket", "DEV-1P",
           "App crashes go to DEV-1P."),
    _truth(14, "How do I change my delivery slot?", "LOG-2T",
           "Delivery slot changes go to LOG-2T."),
    _truth(15, "Please send the receipt again", "ACC-2M",
           "Receipt requests go to ACC-2M.", output="FIN-7Q"),
    _truth(16, "My discount code SAVE10 did not work", "BILL-3K",
           "Discount codes that fail at checkout go to BILL-3K."),
    _truth(17, "Two-factor code not arriving by SMS", "SEC-4X",
           "Missing two-factor SMS codes go to SEC-4X."),
    _truth(18, "I got someone else's parcel", "LOG-2T",
           "Wrong parcel deliveries go to LOG-2T."),
    _truth(19, "Can I pay in instalments?", "BILL-3K",
           "Questions about paying in instalments go to BILL-3K."),
    _review(20, "When will my order 5512 arrive?", "It will arrive soon.",
            "Answer with the date in YYYY-MM-DD format, not vague words.",
            "Give delivery dates in YYYY-MM-DD format."),
    _review(21, "What's your returns window?", "You can return things.",
            "State the 30 day returns window explicitly.",
            "State the 30 day returns window explicitly."),
    _review(22, "Refund status?", "Dear valued customer, thank you so much for reaching out...",
            "Too long. Keep answers under 50 words.",
            "Keep answers under 50 words."),
    _review(23, "I need help", "GENERAL",
            "Reply with the team code only, uppercase, like FIN-7Q.",
            "Reply with the team code only, in uppercase."),
    _review(24, "Ticket: printer on fire", "GENERAL",
            "Safety issues must be escalated to SAFE-0A immediately.",
            "Escalate safety issues to SAFE-0A immediately."),
    _review(25, "Price of the blue kettle?", "It costs about 20.",
            "Quote prices with the currency code, e.g. EUR 19.99, from the catalogue tool.",
            "Quote prices with the currency code, using the catalogue tool's figure."),
    _review(26, "Is the store open Sunday?", "Yes!",
            "Check opening_hours before answering; Sunday is closed.",
            "Check opening_hours before answering questions about opening times."),
    _review(27, "Cancel order 7781", "Cancelled.",
            "You must call cancel_order and confirm the cancellation id in the reply.",
            "Call cancel_order and confirm the cancellation id in the reply."),
    _review(28, "My order number is 12-3456, where is it?", "Not found.",
            "Order numbers have the form NN-NNNN; pass them to lookup_order unchanged.",
            "Pass order numbers of the form NN-NNNN to lookup_order unchanged."),
    _review(29, "Hallo, wo ist mein Paket?", "Where is your package?",
            "Answer in the customer's language.",
            "Answer in the customer's language."),
    _tool(30, "Is the red kettle in stock?", "check_stock",
          "sku K-RED-2: 0 units, restock 2026-12-14", "Yes, in stock.",
          "Use check_stock before saying an item is in stock."),
    _tool(31, "Where is order A77?", "lookup_order", "order A77: status held_at_customs",
          "It is on its way.", "When lookup_order says held_at_customs, say the order is held "
          "at customs."),
    _tool(32, "Can I return shoes after 40 days?", "returns_policy",
          "returns window: 30 days; exceptions: none",
          "Yes.", "Use returns_policy for return questions: the window is 30 days."),
    _tool(33, "What does shipping to Spain cost?", "shipping_quote",
          "ES: 7.50 EUR, 3-5 days", "Free.", "Quote shipping costs from shipping_quote, "
          "never from memory."),
    _tool(34, "Is my warranty still valid?", "warranty_status",
          "warranty: expired 2026-01-31", "Yes, valid.",
          "Read the expiry date from warranty_status before answering warranty questions."),
    _truth(35, "The invoice shows the wrong company name", "ACC-2M",
           "Invoice corrections go to ACC-2M."),
    _truth(36, "Login page shows error 500", "DEV-1P",
           "Error 500 on the login page goes to DEV-1P."),
    _truth(37, "I was billed after cancelling my subscription", "BILL-3K",
           "Billing after a cancelled subscription goes to BILL-3K."),
    _truth(38, "Package stuck in customs for a week", "LOG-2T",
           "Parcels stuck in customs go to LOG-2T."),
    _truth(39, "Someone used my card on your site", "SEC-4X",
           "Reports of a stolen card used on the site go to SEC-4X."),
)  # fmt: skip


HONEST_TOOLS: tuple[str, ...] = tuple(
    sorted({call.name for case in HONEST_CASES for call in case.trace.tool_calls})
)
"""The desks' own database tools, whose results the app controls: what a deployer lists in
``BulletGuard(trusted_tools=...)``."""


def honest_rule(task_input: str, ground_truth: str | None, output: str) -> str:
    """The learned rule of the honest case whose input is ``task_input`` ("" if none)."""
    for case in HONEST_CASES:
        if case.trace.input.strip() == task_input.strip():
            return case.rule
    return ""
