"""The judge interface, what a judge sees, and how a failed call is reported (the factory is judges.factory).

Every backend answers in the paper's format (`\\boxed{...}`, `[HINT_START]...`),
so one parser (rlmath.signals) reads them all and the records look alike.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel


class JudgeContext(BaseModel):
    """What a judge sees of one turn: the assistant's output and the next state (the reference shows no earlier
    context)."""

    response: str
    """The assistant output as text, tool calls included."""
    next_state_role: str
    """`user` (a reply) or `tool` (a tool result)."""
    next_state: str
    previous_user: str = ""
    """The user message the turn answered (the heuristic judge spots a user asking the same thing again)."""


class JudgeCallError(Exception):
    """The judge endpoint failed this vote (the vote is ignored, never fatal)."""


class Judge(Protocol):
    name: str

    async def prm(self, ctx: JudgeContext) -> str:
        """One PRM vote: reasoning, then \\boxed{1|-1|0}."""
        ...

    async def hint(self, ctx: JudgeContext) -> str:
        """One hint vote: \\boxed{1} with [HINT_START]hint[HINT_END], or \\boxed{-1}."""
        ...

    async def aclose(self) -> None: ...
