"""The replay evidence a learned rule carries, and the replay record of a step.

Verified adoption (``_adoption/replay.py``) replays the model call of runs of
the batch under the candidate playbook before the candidate goes to the
acceptance policy. What it found is kept in two places: on each bullet it
judged and kept (``Bullet.replay``, stored with the version), and for the whole
step, kept and dropped rules alike, in ``StepReport.replay``. Plain data here:
no I/O, no LLM.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, BeforeValidator, Field

ReplayStatus = Literal["verified", "unverified", "narrowed", "rejected"]
"""``verified``: replays of runs it was learned from turned right, none was broken;
``unverified``: nothing could be concluded (no scorable replay, failed calls, off);
``narrowed``: it broke or pulled runs only through alternatives of its situation
that those runs name; kept without them;
``rejected``: the replays showed it harmful, over-general or ineffective (dropped)."""


def _known_status(value: object) -> object:
    # A status written by a newer release ("narrowed" was new once) reads as
    # "unverified": the evidence is a record, and a stored version must still load.
    return value if value in get_args(ReplayStatus) else "unverified"


class ReplayEvidence(BaseModel):
    """What replaying runs under the candidate playbook showed about one rule.

    Attributes:
        status: The verdict (see ``ReplayStatus``); a status this release does
            not know, written by a newer one, reads as ``"unverified"``.
        version: The version whose learning step judged the rule; a bullet
            updated later carries evidence about its earlier text until judged again.
        fixed: Failing runs the rule was learned from whose replay turned right.
        still_wrong: Failing runs it was learned from whose replay stayed wrong.
        broken: Previously right runs whose replay it turned wrong.
        pulled: Runs with another right answer whose replay took the rule's answer.
        reason: One line saying why the verdict was reached.
    """

    status: Annotated[ReplayStatus, BeforeValidator(_known_status)] = "unverified"
    version: int = 0
    fixed: list[str] = Field(default_factory=list)
    still_wrong: list[str] = Field(default_factory=list)
    broken: list[str] = Field(default_factory=list)
    pulled: list[str] = Field(default_factory=list)
    reason: str = ""


class RuleVerdict(BaseModel):
    """The replay verdict on one rule a learning step added or changed."""

    bullet_id: str
    content: str
    kept: bool
    evidence: ReplayEvidence


class ReplayReport(BaseModel):
    """Verified adoption in one learning step: what ran, what it cost, what it decided.

    Attributes:
        enabled: Whether replay ran in this step.
        reason: Why it did not run, or a one-line summary of what it did.
        calls: Replay calls made to the agent's model.
        failed: Replay calls that raised or timed out (their runs stay unscored).
        unscored: Replies the evaluator (or ground truth) could not judge.
        input_tokens: Prompt tokens of the replay calls.
        output_tokens: Completion tokens of the replay calls.
        replayed: Ids of the runs replayed.
        turned_right: Replayed runs that were wrong and came out right.
        turned_wrong: Replayed runs that were right and came out wrong.
        rules: The verdict on every rule the step added or changed.
        focus_embed_errors: Replays whose focus by meaning failed and were
            served the rules their words name only (``focus_embedder``).
    """

    enabled: bool = False
    reason: str = ""
    calls: int = 0
    failed: int = 0
    unscored: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    replayed: list[str] = Field(default_factory=list)
    turned_right: list[str] = Field(default_factory=list)
    turned_wrong: list[str] = Field(default_factory=list)
    rules: list[RuleVerdict] = Field(default_factory=list)
    focus_embed_errors: int = 0

    @property
    def dropped(self) -> list[RuleVerdict]:
        """The rules the replays rejected (taken out of the candidate)."""
        return [rule for rule in self.rules if not rule.kept]
