"""Blind benchmark: thirty-four task families written by an outside user, from the docs alone.

Each family (a module here) is inputs, right answers, the feedback a production
app would give, a held-out set in other words, and the rules a competent
engineer would write in the system prompt. ``python -m benchmarks.blind run
FAMILY --out FILE.json`` scores four arms on the held-out set: no rules, the
hand-written rules, few-shot retrieval of the training runs, and the prompt
Combee learned from the training runs in one pass.

Families 1-4 (``replies``, ``workflow``, ``mixed``, ``router``) are the dev set;
5-34 (``codes``, ``extraction``, ``house_args``, ``thumbs``, ``notes``, ``labels``,
``intents``, ``formats``, ``remarks``, ``plainwords``, ``mixedsignals``, ``toolconv``,
``approvals``, ``confirmations``, ``toolnotes``, ``sorting``, ``housestyle``,
``toolerrors``, ``dispatch``, ``frontdesk``, ``toolrefusals``, ``railway``,
``campsite``, ``carhire``, ``staffing``, ``nursery``, ``driving``, ``museum``,
``brewery``, ``marina``) are sealed: kept to measure later changes and not run during
development.
"""

from __future__ import annotations

from benchmarks.blind import (
    approvals,
    brewery,
    campsite,
    carhire,
    codes,
    confirmations,
    dispatch,
    driving,
    extraction,
    formats,
    frontdesk,
    house_args,
    housestyle,
    intents,
    labels,
    marina,
    mixed,
    mixedsignals,
    museum,
    notes,
    nursery,
    plainwords,
    railway,
    remarks,
    replies,
    router,
    sorting,
    staffing,
    thumbs,
    toolconv,
    toolerrors,
    toolnotes,
    toolrefusals,
    workflow,
)
from benchmarks.blind._family import Family

FAMILIES: dict[str, Family] = {
    module.FAMILY.name: module.FAMILY
    for module in (
        replies,
        workflow,
        mixed,
        router,
        codes,
        extraction,
        house_args,
        thumbs,
        notes,
        labels,
        intents,
        formats,
        remarks,
        plainwords,
        mixedsignals,
        toolconv,
        approvals,
        confirmations,
        toolnotes,
        sorting,
        housestyle,
        toolerrors,
        dispatch,
        frontdesk,
        toolrefusals,
        railway,
        campsite,
        carhire,
        staffing,
        nursery,
        driving,
        museum,
        brewery,
        marina,
    )
}
"""Every family by name: the dev ones first, then the sealed ones."""

__all__ = ["FAMILIES", "Family"]
