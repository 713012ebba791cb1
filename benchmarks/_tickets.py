"""Synthetic ticket-routing traces: distinct failures with ground truth, and their rules.

Every trace is a support ticket the agent misrouted to ``GENERAL``; its ground truth
is a desk code that depends on the issue, the product and the region. The reflector
rule (``ticket_rule``, for ``fake_learner(insight=...)``) names all three, so every
trace teaches a DISTINCT rule that survives lexical de-duplication (pairwise
similarity stays at or below 0.6, under the 0.7 merge threshold) and the playbook
grows by one bullet per trace, as it would for a learner facing new failures.
"""

from __future__ import annotations

import re

from langgraph_combee import Feedback, Trace

# (product, unique desk code)
PRODUCTS: tuple[tuple[str, str], ...] = (
    ("Aurora router", "AUR"),
    ("Nimbus camera", "NIM"),
    ("Quartz laptop", "QTZ"),
    ("Falcon drone", "FAL"),
    ("Orchid speaker", "ORC"),
    ("Tundra fridge", "TUN"),
    ("Velvet headset", "VEL"),
    ("Beacon doorbell", "BEA"),
    ("Cobalt tablet", "COB"),
    ("Harbor thermostat", "HAR"),
    ("Lumen projector", "LUM"),
    ("Meridian watch", "MER"),
    ("Pioneer scooter", "PIO"),
    ("Saffron blender", "SAF"),
    ("Juniper printer", "JUN"),
    ("Kestrel monitor", "KES"),
    ("Obsidian console", "OBS"),
    ("Willow e-reader", "WIL"),
    ("Zephyr purifier", "ZEP"),
    ("Atlas treadmill", "ATL"),
    ("Cedar keyboard", "CED"),
    ("Delta smart lock", "DLT"),
    ("Ember space heater", "EMB"),
    ("Fjord dishwasher", "FJO"),
    ("Granite NAS drive", "GRA"),
    ("Hazel baby monitor", "HAZ"),
    ("Indigo robot vacuum", "IND"),
    ("Jasper dashcam", "JAS"),
    ("Kite fitness band", "KIT"),
    ("Lotus rice cooker", "LOT"),
    ("Maple webcam", "MAP"),
    ("Nova phone", "NOV"),
    ("Onyx gaming mouse", "ONY"),
    ("Pebble power bank", "PEB"),
    ("Quill stylus", "QUI"),
    ("Raven soundbar", "RAV"),
    ("Sierra e-bike", "SIE"),
    ("Topaz air fryer", "TOP"),
    ("Umber mesh wifi", "UMB"),
    ("Vesper smart bulb", "VES"),
)

# (issue, desk prefix)
ISSUES: tuple[tuple[str, str], ...] = (
    ("firmware update loops on reboot", "FW"),
    ("refund for a returned unit not received", "REFUND"),
    ("charged twice for one order", "BILLING"),
    ("parcel stuck in customs", "LOGISTICS"),
    ("account locked after password reset", "ACCESS"),
    ("device overheats while charging", "SAFETY"),
    ("warranty claim rejected without reason", "WARRANTY"),
    ("companion app crashes at login", "APP"),
    ("missing accessories in the box", "FULFIL"),
    ("subscription renewed after cancellation", "SUBS"),
    ("screen shows dead pixels", "RMA"),
    ("voice assistant pairing fails", "INTEG"),
)

REGIONS: tuple[str, ...] = ("EU", "US", "APAC", "LATAM")

MAX_TRACES = len(PRODUCTS) * len(ISSUES)

_TICKET = re.compile(r"about the (?P<product>.+?) \(region (?P<region>\w+)\): (?P<issue>.+?)\.")


def make_traces(n: int) -> list[Trace]:
    """``n`` distinct misrouted tickets (every product x issue pair at most once).

    Raises:
        ValueError: ``n`` is not in ``1..MAX_TRACES``.
    """
    if not 1 <= n <= MAX_TRACES:
        raise ValueError(f"n={n!r} is not allowed: expected an int in 1..{MAX_TRACES}")
    traces = []
    for i in range(n):
        # Consecutive tickets differ in product AND issue; each pair appears once.
        product, code = PRODUCTS[i % len(PRODUCTS)]
        issue, desk = ISSUES[(i // len(PRODUCTS) + i % len(PRODUCTS)) % len(ISSUES)]
        region = REGIONS[i % len(REGIONS)]
        traces.append(
            Trace(
                id=f"ticket-{i:04d}",
                input=(
                    f"Ticket #{1000 + i} about the {product} (region {region}): {issue}. "
                    "The customer asks who can help."
                ),
                output="GENERAL",
                feedback=Feedback(correct=False, ground_truth=f"{desk}-{code}-{region}"),
            )
        )
    return traces


def ticket_rule(task_input: str, ground_truth: str | None, output: str) -> str:
    """What a good reflector concludes from one misrouted ticket ("" when it was right)."""
    if ground_truth is None or ground_truth.strip() == output.strip():
        return ""
    wrong = output.strip() or "GENERAL"
    match = _TICKET.search(task_input)
    if match is None:
        words = " ".join(task_input.split()[:6])
        return f"Tickets starting '{words}' belong to {ground_truth}, not {wrong}."
    return (
        f"{match['region']} tickets about the {match['product']} reporting "
        f"'{match['issue']}' go to {ground_truth}, not {wrong}."
    )
