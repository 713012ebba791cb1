"""Quarantined and held operations: proposed edits the guard stopped, with why and whence.

A quarantined op is never applied. A held op (a policy change) is applied only
in a separate candidate version that a person must approve. Both are recorded
(with the trace ids they came from and every reason) in the step's report and
in the stored version, so that a reviewer can see what the learner was asked
to write.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from langgraph_combee._core.ops import DeltaOp


class QuarantinedOp(BaseModel):
    """One proposed operation the guard refused (or held), with its provenance and reasons.

    Attributes:
        op: The operation as proposed (never applied).
        reasons: Why it was refused, one ``"check: detail"`` string per finding.
        sources: The trace ids the operation was credited to.
        trust: How to make the untrusted fields its reasons name trusted evidence,
            where a setting may (``"the result of tool 'lookup': add 'lookup' to
            BulletGuard(trusted_tools=[...]) if your app controls what it
            returns"``); empty when none may (the user's own text).
    """

    op: DeltaOp
    reasons: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    trust: list[str] = Field(default_factory=list)

    def describe(self, limit: int = 120) -> str:
        """One line: the op's kind, its text (cut to ``limit`` characters), its reasons."""
        text = getattr(self.op, "content", "") or getattr(self.op, "id", "")
        if len(text) > limit:
            text = text[: limit - 3] + "..."
        return f"{self.op.type} {text!r}: {'; '.join(self.reasons)}"
