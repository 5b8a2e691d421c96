"""What each pool runs, and what it must close when it stops."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from activities.generate import GenerateActivities
from activities.health import make_ping
from activities.learning import LearningActivities
from activities.training import TrainingActivities
from activities.turn_log import TurnLogActivities
from openclaw_rl.settings import Pool, Settings
from workflows.judge_turn import JudgeTurnWorkflow
from workflows.session import SessionWorkflow
from workflows.stack_probe import StackProbeWorkflow
from workflows.training import TrainingWorkflow


@dataclass
class PoolComponents:
    workflows: list[type] = field(default_factory=list)
    activities: list[Callable[..., Any]] = field(default_factory=list)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Release clients (Redis, HTTP, judges) once the worker has stopped."""


def components_for(pool: Pool, settings: Settings) -> PoolComponents:
    parts = PoolComponents(activities=[make_ping(pool.value)])
    if pool is Pool.WORKFLOW:
        parts.workflows += [StackProbeWorkflow, SessionWorkflow, JudgeTurnWorkflow, TrainingWorkflow]
        # Bookkeeping runs beside the workflows: same task queue, so it is dispatched eagerly.
        turn_log = TurnLogActivities(settings)
        parts.activities += [turn_log.archive_turns]
        parts.closers.append(turn_log.aclose)
    elif pool is Pool.POLICY:
        generate, teacher = GenerateActivities(settings), LearningActivities(settings)
        parts.activities += [generate.generate, teacher.teacher_logprobs]
        parts.closers += [generate.aclose, teacher.aclose]
    elif pool is Pool.JUDGE:
        learning = LearningActivities(settings)
        parts.activities += [learning.prm_vote, learning.hint, learning.publish_sample]
        parts.closers.append(learning.aclose)
    elif pool is Pool.TRAINER:
        training = TrainingActivities(settings)
        parts.activities += [
            training.claim_batch,
            training.train_step,
            training.publish_weights,
            training.export_checkpoint,
            training.ack_batch,
        ]
        parts.closers.append(training.aclose)
    return parts
