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


class PairwiseContext(BaseModel):
    """Two answers to one conversation, for a user's progress report (contracts.progress): which serves them
    better? Shown as A and B; the caller asks again with the two swapped."""

    conversation: str
    """The conversation the answers are to, as text (its last user message last)."""
    answer_a: str
    answer_b: str


class JudgeCallError(Exception):
    """The judge endpoint failed this vote (the vote is ignored, never fatal)."""


class StepView(BaseModel):
    """One step of a general-agent episode as the step judge reads it (the paper's C.4 fields)."""

    turn_idx: int
    assistant_text: str
    tool_calls: str
    """The step's tool calls as JSON text (or the parse error of a malformed call)."""
    tool_results: str
    """What came back: tool outputs with exit codes, or the next user turn."""
    parse_error: str | None = None
    errors: int = 0
    """Tool results that were errors (non-zero exit codes, refused calls)."""
    screenshot: str | None = None
    """gui: the PNG of the state after the step (a path in the data directory)."""


class StepJudgeContext(BaseModel):
    """What a step judge sees of one general-agent step: the task, the history, the step and its next state."""

    setting: str
    task_instruction: str
    history: list[StepView]
    current: StepView
    opening_screenshot: str | None = None
    """gui: the PNG of the state the agent first saw."""


class Judge(Protocol):
    name: str

    async def prm(self, ctx: JudgeContext) -> str:
        """One PRM vote: reasoning, then \\boxed{1|-1|0}."""
        ...

    async def hint(self, ctx: JudgeContext) -> str:
        """One hint vote: \\boxed{1} with [HINT_START]hint[HINT_END], or \\boxed{-1}."""
        ...

    async def step(self, ctx: StepJudgeContext) -> str:
        """One general-agent step vote: reasoning, then \\boxed{1} or \\boxed{-1} (the paper's C.4 prompts)."""
        ...

    async def pairwise(self, ctx: PairwiseContext) -> str:
        """One comparison: reasoning, then \\boxed{A}, \\boxed{B} or \\boxed{tie}."""
        ...

    async def aclose(self) -> None: ...
