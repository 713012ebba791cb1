"""Family 25 (SEALED: not run during development): print-shop orders, the press system's refusals.

A print shop's order agent places every customer request with one call,
``place_order(product, paper, finish, details)``. ``product`` is one of five
words the app's prompt explains; ``details`` is free text; ``paper`` and
``finish`` take the shop's house values for the product, which the model
cannot guess:

* ``cards`` (business and contact cards): paper ``board-400``, finish ``matt-lam``;
* ``flyers`` (leaflets and flyers to hand out or post): ``silk-150``, finish ``none``;
* ``posters`` (wall posters and photo prints): ``satin-200``, finish ``none``;
* ``wedding`` (invitations and other wedding stationery): ``cotton-350``, ``gold-foil``;
* ``banners`` (outdoor banners and signs): ``pvc-510``, ``hem-eyelets``.

The feedback is what production gives a tool app. The shop's press system
checks every order: an unknown product, or a paper or finish the product does
not take, is refused with the tool's own error text ("Press check failed:
'cards' orders print on paper 'board-400', not '350gsm'."), raised as
LangChain's ``ToolException``, so the run's trace holds it as a tool error
(the model sees it too and may call again); the docs say a trace with no
feedback is learned from with its execution feedback, tool errors included.
The press system cannot tell which product a customer meant (save-the-date
cards ordered as ``cards`` pass its checks): one run per product gets an
operator's ground truth, the right call written as Python as the docs say
tool-call ground truth is given (``correct=``, ``source="operator"``); the
other runs get nothing sent (``feedback`` returns ``{}``). Held-out: two or
three requests per product in other words. Scoring: exactly one
``place_order`` call (a refused call counts) with the right product, paper and
finish (case and spaces aside); ``details`` is not scored.

Sealed: committed with the other families and never run while the package is
being developed, so that it measures later changes on tasks nobody tuned for.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import ToolException

from benchmarks.blind._family import (
    Call,
    Example,
    Family,
    Outcome,
    written_calls,
    wrong_fields,
)

SYSTEM_PROMPT = (
    "You are the order agent of Quillon Print, a print shop. Place every customer request as "
    "one order with one place_order call, then tell the customer in one sentence that it is "
    "placed.\n"
    "Products: cards (business and contact cards), flyers (leaflets and flyers to hand out or "
    "post), posters (wall posters and photo prints), wedding (invitations and other wedding "
    "stationery), banners (outdoor banners and signs)."
)

RULES = """place_order values by product:
- cards: paper "board-400", finish "matt-lam"
- flyers (leaflets, menus to post through doors): paper "silk-150", finish "none"
- posters (also photo and art prints to frame): paper "satin-200", finish "none"
- wedding (invitations, save-the-dates, place cards, orders of service, anything for a
  wedding even when it is a card): paper "cotton-350", finish "gold-foil"
- banners (vinyl signs, fence and shopfront banners, anything hung outdoors): paper
  "pvc-510", finish "hem-eyelets"
- details: the quantity and a short summary of the request.
"""

HOUSE = {
    "cards": ("board-400", "matt-lam"),
    "flyers": ("silk-150", "none"),
    "posters": ("satin-200", "none"),
    "wedding": ("cotton-350", "gold-foil"),
    "banners": ("pvc-510", "hem-eyelets"),
}


def place_order(product: str, paper: str, finish: str, details: str) -> str:
    """Place a print order.

    Raises:
        ToolException: The press system refused it (an unknown product, or a paper or
            finish the product does not take).
    """
    key = product.strip().lower()
    if key not in HOUSE:
        raise ToolException(
            f"Unknown product {product!r}: use one of cards, flyers, posters, wedding, banners."
        )
    want_paper, want_finish = HOUSE[key]
    if paper.strip().lower() != want_paper:
        raise ToolException(
            f"Press check failed: {key!r} orders print on paper {want_paper!r}, not {paper!r}."
        )
    if finish.strip().lower() != want_finish:
        raise ToolException(
            f"Finishing check failed: {key!r} orders take finish {want_finish!r}, not {finish!r}."
        )
    return f"Order placed: {key} on {paper}, {finish}. {details}"


# How a run's feedback arrives: "label" an operator's right call, "none" nothing sent
# (the run's trace holds the tool's error when the call broke a press rule).
_HOWS = ("label", "none")
_HOW: dict[str, str] = {}


def _ex(kind: str, text: str, details: str, how: str = "none") -> Example:
    if how not in _HOWS:
        raise ValueError(f"how={how!r} is not one of {_HOWS}")
    _HOW[text] = how
    paper, finish = HOUSE[kind]
    args = {"product": kind, "paper": paper, "finish": finish, "details": details}
    calls = (Call("place_order", args),)
    return Example(input=text, kind=kind, answer=written_calls(calls), calls=calls)


TRAIN = (
    _ex("cards", "I need 250 business cards with my new phone number.", "250 business cards"),
    _ex(
        "wedding",
        "We'd like 80 save-the-date cards for our wedding in September.",
        "80 save-the-date cards",
        "label",
    ),
    _ex("flyers", "Can you print 1,000 A5 flyers for our cafe opening?", "1000 A5 flyers"),
    _ex("banners", "We need a 3-metre banner for the school fete, it goes outside.", "3 m banner"),
    _ex("posters", "Print my A2 poster for the gig at the town hall.", "A2 gig poster", "label"),
    _ex("cards", "Reprint 500 contact cards for our two new sales staff.", "500 cards", "label"),
    _ex("wedding", "Please print 120 wedding invitations with RSVP cards.", "120 invitations"),
    _ex(
        "flyers",
        "I want 2,000 leaflets about our window-cleaning round to post through doors.",
        "2000 leaflets",
        "label",
    ),
    _ex("banners", "A PVC sign for our shop front, 2 metres by 60 cm.", "shopfront sign"),
    _ex("posters", "I'd like a large print of my landscape photo to frame.", "photo print"),
    _ex("cards", "Fifty business cards for my dog-walking business, please.", "50 cards"),
    _ex(
        "banners",
        "A banner for the rugby club's fence saying 'Welcome Fans'.",
        "club fence banner",
        "label",
    ),
    _ex("wedding", "We need place cards for 90 guests at our reception.", "90 place cards"),
    _ex("flyers", "Print 300 menus we can hand out for our takeaway.", "300 takeaway menus"),
)

HELDOUT = (
    _ex("cards", "I've been promoted, so I need calling cards showing my new job title.", "cards"),
    _ex("cards", "Something pocket-sized with my name and email to give clients.", "contact cards"),
    _ex(
        "flyers",
        "We're opening a garden centre and want something A5 to push through letterboxes.",
        "letterbox A5",
    ),
    _ex("flyers", "Handouts for the farmers' market stall, about 800 of them.", "800 handouts"),
    _ex("posters", "A big print of my Snowdon sunset shot for the living-room wall.", "print"),
    _ex("posters", "Our theatre needs A1 prints advertising the spring play.", "A1 prints"),
    _ex(
        "wedding",
        "Orders of service for our marriage ceremony at St Anne's, 150 copies.",
        "150 orders of service",
    ),
    _ex("wedding", "Thank-you cards to send guests after our big day in June.", "thank-you cards"),
    _ex("wedding", "Table names and menus for our reception at the barn.", "table names, menus"),
    _ex("banners", "A weatherproof sign to hang on the railings of our nursery.", "railing sign"),
    _ex(
        "banners",
        "Something big to tie across the marquee entrance at the village show.",
        "marquee banner",
    ),
    _ex("posters", "Three framed-size art prints of my daughter's paintings.", "art prints"),
)

_FIELDS = ("product", "paper", "finish")


def _wrong_fields(example: Example, outcome: Outcome) -> list[str] | None:
    """The fields with a wrong value, or None when the run made no single place_order call."""
    return wrong_fields(example, outcome, "place_order", _FIELDS)


def score(example: Example, outcome: Outcome) -> float:
    """1 when the run made one place_order call with the right product, paper and finish."""
    return 1.0 if _wrong_fields(example, outcome) == [] else 0.0


def feedback(example: Example, outcome: Outcome) -> dict[str, Any]:
    """An operator's right call on that run, or nothing (the tool's errors are in the trace)."""
    if _HOW[example.input] == "none":
        return {}
    right = score(example, outcome) == 1.0
    return {"correct": right, "ground_truth": written_calls(example.calls), "source": "operator"}


FAMILY = Family(
    name="toolrefusals",
    title="print-shop orders, paper and finish take house values; the press refuses wrong ones",
    sealed=True,
    system_prompt=SYSTEM_PROMPT,
    rules=RULES,
    train=TRAIN,
    heldout=HELDOUT,
    score=score,
    feedback=feedback,
    tools=(place_order,),
    feedback_kind="the tool's own error (a ToolException, in the trace) when the paper or "
    "finish breaks the press rules; the right call as ground_truth (source=operator) on one "
    "run per product; nothing sent on the others",
)
