"""What each pool runs. Later issues add their workflows and activities here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

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


def components_for(pool: Pool, settings: Settings) -> PoolComponents:
    parts = PoolComponents(activities=[make_ping(pool.value)])
    if pool is Pool.WORKFLOW:
        parts.workflows += [StackProbeWorkflow, SessionWorkflow, JudgeTurnWorkflow, TrainingWorkflow]
        # Bookkeeping runs beside the workflows: same task queue, so it is dispatched eagerly.
        parts.activities += [TurnLogActivities(settings).archive_turns]
    elif pool is Pool.POLICY:
        parts.activities += [GenerateActivities(settings).generate, LearningActivities(settings).teacher_logprobs]
    elif pool is Pool.JUDGE:
        learning = LearningActivities(settings)
        parts.activities += [learning.prm_vote, learning.hint, learning.publish_sample]
    elif pool is Pool.TRAINER:
        training = TrainingActivities(settings)
        parts.activities += [training.claim_batch, training.train_step, training.publish_weights, training.export_checkpoint, training.ack_batch]
    return parts
