"""The main demo: a ticket router that improves its own system prompt while it serves.

    python -m langgraph_combee.demo [--model local:1.5b|local:0.5b|provider:name|test]
                                    [--tickets N] [--batch-size auto|N] [--out DIR]
                                    [--meaning | --no-meaning]

A ``create_agent`` agent with ``combee.middleware()`` routes a stream of support
tickets; the right team arrives as feedback after each run
(``combee.feedback(run_id, correct=..., ground_truth=...)``), and the background
learner (``with combee.running():``), using the same model as the agent by
default, turns batches of runs into new playbook versions, which the agent
hot-swaps to. A live view shows runs served, accuracy per window and every
version swap with the bullets it added. At the end it prints held-out accuracy
with version 0 and with the final version (evaluated with ``capture=False``, so
evaluation never feeds the learner), the learned playbook and the learner's
cost, and writes ``demo.png`` (accuracy over time, swaps marked) and
``demo.json`` into ``--out``.

The demo runs on ``Combee``'s defaults but for the pacing of a short run, and
prints the settings it changes and whether rules are served by meaning
(``ServingSettings.focus_embedder="auto"``: on where the ``[local-embed]`` extra
is installed, as ``make demo`` does; ``--no-meaning`` turns it off). The right
answer is given with ``source="operator"``: it comes from the task's labels.

``--model test`` runs in seconds with offline doubles: the agent follows the
rules written in its system prompt, the learner is ``fake_learner``.
"""

from __future__ import annotations

from langgraph_combee.demo._cli import build_parser, main
from langgraph_combee.demo._report import record, summary, write_outputs
from langgraph_combee.demo._run import (
    DEFAULT_TICKETS,
    DemoConfig,
    DemoResult,
    non_default_settings,
    run_demo,
)

__all__ = [
    "DEFAULT_TICKETS",
    "DemoConfig",
    "DemoResult",
    "build_parser",
    "main",
    "non_default_settings",
    "record",
    "run_demo",
    "summary",
    "write_outputs",
]
