"""Task priority and fair shares on the task queues: the one table of ranks.

Temporal dispatches a backlogged task queue's tasks by `Priority.priority_key` first (1 goes first, 5 last, 3 when
none is set), then, within one rank, by fairness key in proportion to each key's weight (with
`matching.enableFairness` on the server; without it, first come, first served). Ranks only matter when a queue
has a backlog: an idle worker takes whatever comes.

| rank | work                                                       | set where                                  |
|------|------------------------------------------------------------|--------------------------------------------|
| 1    | chat: the SessionWorkflow and its `generate`               | control.sessions.session_start             |
| 2    | judging a chat turn: votes, teacher scoring, publishing    | workflows.session (the judge child)        |
| 3    | episodes: rollouts, task groups, their episodes' steps     | the server's default; key: task_group      |
| 4    | training: the TrainingWorkflow and its trainer steps       | control.training.start_training            |
| 5    | evaluation: the EvaluationWorkflow and everything under it | control.evaluation (schedule and runs)     |
| 5    | users' progress reports (ProgressReport/RoundWorkflow)     | control.progress (schedule and runs)       |
| 5    | users' canaries (CanaryWorkflow)                           | activities.canary_start                    |

A child workflow and an activity inherit their parent's priority and fairness key where they set none (server
side). Every activity call also names its rank explicitly (`workflows.activity_calls.execute`): the workflow's own
rank as it was started, else its type's rank below (runs started before ranks existed). Continue-as-new sets no
priority (the SDK's `continue_as_new` takes none); the server carries the run's priority to the next run.

Fairness keys: the user's pseudonym for chat and its judging (each user gets a fair share of the policy and judge
queues whatever another sends), the rollout for episodes (one big rollout does not starve another). Weights come
from `temporal.fairness` in the settings (default 1.0).
"""

from __future__ import annotations

import hashlib
from enum import IntEnum
from typing import Mapping

from contracts.canary import CANARY_WORKFLOW
from contracts.episodes import EPISODE_WORKFLOW, ROLLOUT_WORKFLOW, TASK_GROUP_WORKFLOW
from contracts.evaluation import EVALUATION_WORKFLOW
from contracts.learning import JUDGE_TURN_WORKFLOW
from contracts.progress import PROGRESS_REPORT_WORKFLOW, PROGRESS_ROUND_WORKFLOW
from contracts.session import SESSION_WORKFLOW
from contracts.training import TRAINING_WORKFLOW


class Rank(IntEnum):
    """Temporal's `priority_key`: lower goes first (1..5; the server's default is 3)."""

    CHAT = 1
    JUDGE = 2
    EPISODE = 3
    TRAINING = 4
    EVALUATION = 5


WORKFLOW_RANKS: Mapping[str, Rank] = {
    SESSION_WORKFLOW: Rank.CHAT,
    JUDGE_TURN_WORKFLOW: Rank.JUDGE,
    ROLLOUT_WORKFLOW: Rank.EPISODE,
    TASK_GROUP_WORKFLOW: Rank.EPISODE,
    EPISODE_WORKFLOW: Rank.EPISODE,
    TRAINING_WORKFLOW: Rank.TRAINING,
    EVALUATION_WORKFLOW: Rank.EVALUATION,
    PROGRESS_REPORT_WORKFLOW: Rank.EVALUATION,
    PROGRESS_ROUND_WORKFLOW: Rank.EVALUATION,
    CANARY_WORKFLOW: Rank.EVALUATION,
}
"""The rank of a workflow type's own work, for a run that carries no priority of its own (started before ranks
existed, or by a client that set none). A child of an evaluation inherits 5 from it instead."""

DEFAULT_RANK = Rank.EPISODE
"""What the server assumes when no rank is set anywhere (3)."""

MAX_FAIRNESS_KEY_BYTES = 64


def rank_of(workflow_type: str, started_with: int | None) -> int:
    """The rank a workflow's activities run at: the one it was started with (or inherited), else its type's."""
    return started_with or WORKFLOW_RANKS.get(workflow_type, DEFAULT_RANK)


def fairness_key(name: str) -> str:
    """`name` when it fits Temporal's 64-byte limit, else a short digest of it (stable: the same name, the same
    key)."""
    if len(name.encode()) <= MAX_FAIRNESS_KEY_BYTES:
        return name
    return "h-" + hashlib.sha256(name.encode()).hexdigest()[:40]


def rollout_fairness_key(workflow_id: str) -> str:
    """The fairness key of a rollout's episodes: the rollout's (or the evaluation's, or the lone task group's)
    workflow id."""
    return fairness_key(workflow_id)
