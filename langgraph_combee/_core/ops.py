"""Delta operations: the only way a playbook changes.

Curators propose them, the aggregator merges them, and ``Playbook.apply`` applies
them deterministically, with no LLM involved.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field


class Add(BaseModel):
    """Add a new bullet to a section."""

    type: Literal["ADD"] = "ADD"
    section: str
    content: str
    sources: list[str] = Field(default_factory=list, description="Trace ids behind the op.")


class Update(BaseModel):
    """Replace the content of an existing bullet (its id and counters are kept)."""

    type: Literal["UPDATE"] = "UPDATE"
    id: str
    content: str
    sources: list[str] = Field(default_factory=list)


class Remove(BaseModel):
    """Remove an existing bullet."""

    type: Literal["REMOVE"] = "REMOVE"
    id: str
    reason: str = ""
    sources: list[str] = Field(default_factory=list)


class Tag(BaseModel):
    """Add to a bullet's helpful and harmful counters."""

    type: Literal["TAG"] = "TAG"
    id: str
    helpful: int = 0
    harmful: int = 0
    sources: list[str] = Field(default_factory=list)


DeltaOp = Annotated[Add | Update | Remove | Tag, Field(discriminator="type")]

OP_KINDS = ("add", "update", "remove", "tag")
