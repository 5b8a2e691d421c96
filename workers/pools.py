"""What each pool runs. Later issues add their workflows and activities here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from activities.health import make_ping
from openclaw_rl.settings import Pool, Settings
from workflows.stack_probe import StackProbeWorkflow


@dataclass
class PoolComponents:
    workflows: list[type] = field(default_factory=list)
    activities: list[Callable[..., Any]] = field(default_factory=list)


def components_for(pool: Pool, settings: Settings) -> PoolComponents:
    parts = PoolComponents(activities=[make_ping(pool.value)])
    if pool is Pool.WORKFLOW:
        parts.workflows += [StackProbeWorkflow]
    return parts
