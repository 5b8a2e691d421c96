"""The tool-call setting's tasks: generated math problems (`math/<n>`) and BFCL v4 multi-turn entries (`bfcl/<id>`).

The prefixes keep the two families' ids apart, and `make` dispatches on them.
BFCL tasks need the `bfcl-eval` package (installed without its dependencies);
`bfcl=True` where it is missing raises `BfclUnavailable` with the install command
rather than quietly serving only math, which would train on a different task set
than configured.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from envs.base import Environment, TaskInfo, UnknownTask
from envs.sandbox import SandboxPool
from envs.toolcall.bfcl import PREFIX as BFCL_PREFIX
from envs.toolcall.bfcl import BfclTasks
from envs.toolcall.bfcl_data import CATEGORIES
from envs.toolcall.math_env import MathEnv
from envs.toolcall.math_tasks import SEED, generate

MATH_PREFIX = "math/"
_CANONICAL_INDEX = re.compile(r"0|[1-9][0-9]*")


class ToolCallConfig(BaseModel):
    """What `ToolCallTasks` serves: its constructor's arguments, validated (bounds, known BFCL categories)."""

    math_count: int = Field(200, ge=0, le=100_000)
    """Generated math problems (the first `math_count` of the fixed seed's sequence)."""
    bfcl: bool = True
    """Serve BFCL v4 multi-turn entries too."""
    bfcl_categories: tuple[str, ...] = CATEGORIES
    max_steps: int = Field(16, ge=1, le=200)
    """A math episode's step limit (the reference: 16 turns)."""
    bfcl_steps_per_turn: int = Field(4, ge=2, le=20)
    """A BFCL episode's step limit per user turn (its calls, then a reply without calls, at least)."""
    tool_bonus: float = Field(0.0, ge=0.0, lt=1.0)
    """Math: the outcome of a wrong answer after at least one python run (the reference's shaping; see MathEnv)."""
    python_wall_s: float = Field(10.0, gt=0, le=600)
    """Math: the wall-clock limit of one python call."""
    seed: int = SEED


class ToolCallTasks:
    setting = "toolcall"

    def __init__(
        self,
        math_count: int = 200,
        bfcl: bool = True,
        *,
        bfcl_categories: tuple[str, ...] = CATEGORIES,
        max_steps: int = 16,
        bfcl_steps_per_turn: int = 4,
        tool_bonus: float = 0.0,
        python_wall_s: float = 10.0,
        seed: int = SEED,
    ):
        self.config = ToolCallConfig(
            math_count=math_count,
            bfcl=bfcl,
            bfcl_categories=bfcl_categories,
            max_steps=max_steps,
            bfcl_steps_per_turn=bfcl_steps_per_turn,
            tool_bonus=tool_bonus,
            python_wall_s=python_wall_s,
            seed=seed,
        )
        self.bfcl = (
            BfclTasks(self.config.bfcl_categories, self.config.bfcl_steps_per_turn) if self.config.bfcl else None
        )

    def tasks(self) -> list[TaskInfo]:
        math = [
            TaskInfo(
                setting=self.setting,
                task_id=p.task_id,
                title=p.question.splitlines()[0][:100],
                category=f"math_{p.kind}",
                max_steps=self.config.max_steps,
            )
            for p in generate(self.config.math_count, self.config.seed)
        ]
        return math + (self.bfcl.tasks() if self.bfcl is not None else [])

    def make(self, task_id: str, sandboxes: SandboxPool | None) -> Environment:
        if task_id.startswith(MATH_PREFIX):
            index = task_id.removeprefix(MATH_PREFIX)
            if not _CANONICAL_INDEX.fullmatch(index) or int(index) >= self.config.math_count:
                raise UnknownTask(task_id)  # one id per problem: no `math/05`, no non-ASCII digits
            return MathEnv(
                generate(self.config.math_count, self.config.seed)[int(index)],
                sandboxes,
                max_steps=self.config.max_steps,
                tool_bonus=self.config.tool_bonus,
                python_wall_s=self.config.python_wall_s,
            )
        if task_id.startswith(BFCL_PREFIX) and self.bfcl is not None:
            return self.bfcl.make(task_id, sandboxes)
        raise UnknownTask(task_id)
