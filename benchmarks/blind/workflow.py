"""Family 2 (dev): a multi-step tool workflow whose conventions are the order of calls.

A shop's back-office agent has six tools (plain Python functions). Three kinds of
request each need two calls, and the house convention is the first one: look the
order up (``get_order``) before a refund, verify the customer
(``verify_identity``) before an address change, check stock (``check_stock``)
before reserving an item. Feedback is an operator's: right or wrong, with the
right call sequence as ``ground_truth`` (``source="operator"``). Scoring: the
names of the calls made, a call repeated at once counted once, must be exactly
the right sequence.
"""

from __future__ import annotations

from typing import Any

from benchmarks.blind._family import Call, Example, Family, Outcome, made_calls, written_calls

SYSTEM_PROMPT = (
    "You are the back-office agent of Harbor Home, an online homeware shop. "
    "Use the tools to handle the customer's request, then confirm what you did in one sentence."
)

RULES = """House workflow:
- Refunds: call get_order(order_id) first, then issue_refund(order_id, reason).
- Address changes: call verify_identity(email) first, then update_address(email, address).
- Reservations: call check_stock(sku) first, then reserve_item(sku, email).
Never skip the first call; never call tools a request does not need.
"""


def get_order(order_id: str) -> str:
    """Look up an order by its id."""
    return f"Order {order_id}: 2 items, delivered 3 days ago, paid 54.00 EUR."


def issue_refund(order_id: str, reason: str) -> str:
    """Refund an order."""
    return f"Refund for {order_id} queued ({reason})."


def verify_identity(email: str) -> str:
    """Verify the customer's identity by the email on their account."""
    return f"Identity verified for {email}."


def update_address(email: str, address: str) -> str:
    """Change the delivery address of the customer's account."""
    return f"Address of {email} set to {address}."


def check_stock(sku: str) -> str:
    """Check how many units of an item are in stock."""
    return f"{sku}: 14 units in stock."


def reserve_item(sku: str, email: str) -> str:
    """Reserve one unit of an item for a customer."""
    return f"One {sku} reserved for {email}."


def _refund(text: str, order: str, reason: str) -> Example:
    calls = (
        Call("get_order", {"order_id": order}),
        Call("issue_refund", {"order_id": order, "reason": reason}),
    )
    return Example(input=text, kind="refund", answer=written_calls(calls), calls=calls)


def _address(text: str, email: str, address: str) -> Example:
    calls = (
        Call("verify_identity", {"email": email}),
        Call("update_address", {"email": email, "address": address}),
    )
    return Example(input=text, kind="address", answer=written_calls(calls), calls=calls)


def _reserve(text: str, sku: str, email: str) -> Example:
    calls = (Call("check_stock", {"sku": sku}), Call("reserve_item", {"sku": sku, "email": email}))
    return Example(input=text, kind="reserve", answer=written_calls(calls), calls=calls)


TRAIN = (
    _refund("Please refund order A-1042, the vase arrived cracked.", "A-1042", "damaged"),
    _refund("Order B-2210 never showed up, I want a refund.", "B-2210", "not delivered"),
    _refund("Refund A-3301 please, wrong colour sent.", "A-3301", "wrong item"),
    _refund("I'd like my money back for order C-0877, it's faulty.", "C-0877", "faulty"),
    _address(
        "Change my address to 4 Elm Road, Leeds. My email is ana@example.com.",
        "ana@example.com",
        "4 Elm Road, Leeds",
    ),
    _address(
        "Please update my delivery address to 19 High St, York (account tom@example.com).",
        "tom@example.com",
        "19 High St, York",
    ),
    _address(
        "New address: 7 Park Lane, Bath. Email li@example.com.",
        "li@example.com",
        "7 Park Lane, Bath",
    ),
    _address(
        "I moved to 2 Quay St, Hull, update it please - sam@example.com",
        "sam@example.com",
        "2 Quay St, Hull",
    ),
    _reserve("Can you reserve SKU LMP-220 for me? jo@example.com", "LMP-220", "jo@example.com"),
    _reserve("Hold one RUG-118 for max@example.com please.", "RUG-118", "max@example.com"),
    _reserve("Reserve a MUG-007 for eve@example.com.", "MUG-007", "eve@example.com"),
    _reserve("Please put aside TBL-450 for kim@example.com.", "TBL-450", "kim@example.com"),
)

HELDOUT = (
    _refund(
        "The blender from order D-5521 stopped working, money back please.", "D-5521", "faulty"
    ),
    _refund(
        "I was charged for E-9013 but want to return it for a reimbursement.", "E-9013", "return"
    ),
    _refund("Give me a refund on F-3130, half the plates were smashed.", "F-3130", "damaged"),
    _refund("Could I get my payment back for G-7788? Never arrived.", "G-7788", "not delivered"),
    _address(
        "Ship to my new flat from now on: 88 Canal Walk, Derby. I'm rio@example.com.",
        "rio@example.com",
        "88 Canal Walk, Derby",
    ),
    _address(
        "Account pat@example.com - my home is now 3 Birch Close, Ely.",
        "pat@example.com",
        "3 Birch Close, Ely",
    ),
    _address(
        "Deliveries should go to 51 Station Rd, Wells. Login: ola@example.com",
        "ola@example.com",
        "51 Station Rd, Wells",
    ),
    _address(
        "Swap the shipping address on ned@example.com to 6 Mill Row, Ayr.",
        "ned@example.com",
        "6 Mill Row, Ayr",
    ),
    _reserve("Could you keep a CSH-310 aside for zoe@example.com?", "CSH-310", "zoe@example.com"),
    _reserve(
        "I want to book one BLK-902 - my email is ian@example.com.", "BLK-902", "ian@example.com"
    ),
    _reserve("Save a PLT-015 for me, una@example.com.", "PLT-015", "una@example.com"),
    _reserve("Set aside one unit of VSE-640 for leo@example.com.", "VSE-640", "leo@example.com"),
)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the calls made are, by name and in order, exactly the right sequence."""
    names = [call.name for call in made_calls(outcome)]
    return 1.0 if names == [call.name for call in example.calls] else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """An operator's check: right or wrong, with the right sequence of calls."""
    right = score(example, outcome) == 1.0
    sequence = ", then ".join(call.name for call in example.calls)
    return {"correct": right, "ground_truth": f"call {sequence}", "source": "operator"}


FAMILY = Family(
    name="workflow",
    title="tool workflow, conventions in the order of calls (look up / verify / check first)",
    sealed=False,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    tools=(get_order, issue_refund, verify_identity, update_address, check_stock, reserve_item),
    feedback_kind="correct=bool with the right call sequence as ground_truth (source=operator)",
)
