"""What each pool runs, and what it must close when it stops.

Each pool imports only its own activities and workflows: `openclaw-rl up` starts six workers at once, and a pool
that never trains has no use for torch (over a second of a core per process at start)."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio.worker import FixedSizeSlotSupplier, WorkerTuner

from activities.health import make_ping
from openclaw_rl.settings import Pool, Settings


@dataclass
class PoolComponents:
    workflows: list[type] = field(default_factory=list)
    activities: list[Callable[..., Any]] = field(default_factory=list)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Release clients (Redis, HTTP, judges) once the worker has stopped."""
    own_queue: str | None = None
    """A task queue only this worker polls (env pool: the episodes whose environment it holds)."""
    shared_tuner: WorkerTuner | None = None
    """Slots of the pool's shared queue, when the default count of activities in flight is not the right limit."""
    own_queue_slots: int | None = None


def components_for(pool: Pool, settings: Settings) -> PoolComponents:
    parts = PoolComponents(activities=[make_ping(pool.value)])
    if pool is Pool.WORKFLOW:
        from activities.turn_log import TurnLogActivities
        from workflows.canary import CanaryWorkflow
        from workflows.episode import EpisodeWorkflow
        from workflows.evaluation import EvaluationWorkflow
        from workflows.judge_turn import JudgeTurnWorkflow
        from workflows.progress import ProgressReportWorkflow, ProgressRoundWorkflow
        from workflows.rollout import RolloutWorkflow
        from workflows.session import SessionWorkflow
        from workflows.stack_probe import StackProbeWorkflow
        from workflows.task_group import TaskGroupWorkflow
        from workflows.training import TrainingWorkflow
        from workflows.user_files import UserFilesWorkflow

        parts.workflows += [
            StackProbeWorkflow,
            SessionWorkflow,
            JudgeTurnWorkflow,
            TrainingWorkflow,
            EpisodeWorkflow,
            TaskGroupWorkflow,
            RolloutWorkflow,
            EvaluationWorkflow,
            UserFilesWorkflow,
            ProgressReportWorkflow,
            ProgressRoundWorkflow,
            CanaryWorkflow,
        ]
        # Bookkeeping runs beside the workflows: same task queue, so it is dispatched eagerly.
        turn_log = TurnLogActivities(settings)
        parts.activities += [turn_log.archive_turns]
        parts.closers.append(turn_log.aclose)
    elif pool is Pool.POLICY:
        from activities.agent_step import AgentActivities
        from activities.canary import CanaryActivities
        from activities.evaluation import EvalActivities
        from activities.generate import GenerateActivities
        from activities.learning import LearningActivities
        from activities.progress import ProgressActivities

        generate, teacher, agent = GenerateActivities(settings), LearningActivities(settings), AgentActivities(settings)
        parts.activities += [
            generate.generate,
            teacher.teacher_logprobs,
            agent.agent_step,
            agent.client_step,
            agent.client_closing,
        ]
        parts.closers += [generate.aclose, teacher.aclose, agent.aclose]
        # Evaluations generate through the policy client too, so they run beside chat turns' generation.
        evals = EvalActivities(settings)
        parts.activities += [evals.eval_plan, evals.evaluate_set, evals.eval_episode_tasks, evals.record_eval_scores]
        parts.closers.append(evals.aclose)
        answers = ProgressActivities(settings, policy=True)
        parts.activities.append(answers.progress_answers)
        parts.closers.append(answers.aclose)
        canary_answers = CanaryActivities(settings, policy=True)
        parts.activities.append(canary_answers.canary_answers)
        parts.closers.append(canary_answers.aclose)
    elif pool is Pool.JUDGE:
        from activities.canary import CanaryActivities
        from activities.learning import LearningActivities
        from activities.progress import ProgressActivities
        from activities.step_learning import StepLearningActivities
        from activities.user_files import JudgementMirrorFiles

        learning, steps = LearningActivities(settings), StepLearningActivities(settings)
        parts.activities += [
            JudgementMirrorFiles(settings).forget_judgement_lines,
            learning.judge_votes,
            learning.publish_sample,
            learning.judge_and_publish,
            steps.step_vote,
            steps.step_votes,
            steps.publish_step_samples,
        ]
        parts.closers += [learning.aclose, steps.aclose]
        reports = ProgressActivities(settings)
        parts.activities += [reports.progress_judge, reports.progress_users]
        parts.closers.append(reports.aclose)
        canaries = CanaryActivities(settings)
        parts.activities += [canaries.canary_judge, canaries.canary_decide]
        parts.closers.append(canaries.aclose)
    elif pool is Pool.TRAINER:
        from activities.training import TrainingActivities
        from activities.user_files import TrainerUserFiles

        # Its own queue too: the versions since the last durable checkpoint live in this process only, so the
        # training workflow sends every call about them here (and notices when this process is gone).
        parts.own_queue = own_worker_queue(settings, Pool.TRAINER)
        training = TrainingActivities(settings, parts.own_queue)
        parts.activities += [
            training.claim_batch,
            training.train_step,
            training.publish_weights,
            training.publish_version,
            training.start_checkpoint,
            training.finish_checkpoint,
            training.confirm_checkpoint,
            training.export_checkpoint,
            training.ack_batch,
            training.find_resume_point,
        ]
        # The files a user's data leaves here (trained.jsonl, adapter folders): the API exports and forgets them
        # through these, never by opening them (no shared disk).
        files = TrainerUserFiles(settings)
        parts.activities += [files.export_user_files, files.forget_user_files]
        parts.closers.append(training.aclose)
    elif pool is Pool.ENV:
        from activities.env_step import EnvActivities
        from workers.env_capacity import EnvCapacity

        parts.own_queue = own_worker_queue(settings, Pool.ENV)
        envs = EnvActivities(settings, parts.own_queue)
        capacity = settings.envs.envs_per_worker
        parts.shared_tuner = WorkerTuner.create_composite(
            workflow_supplier=FixedSizeSlotSupplier(1),
            activity_supplier=EnvCapacity(capacity, envs.held),
            local_activity_supplier=FixedSizeSlotSupplier(1),
            nexus_supplier=FixedSizeSlotSupplier(1),
        )
        parts.own_queue_slots = capacity
        parts.activities += [
            envs.list_tasks,
            envs.env_open,
            envs.env_step,
            envs.env_outcome,
            envs.env_close,
            envs.env_finish,
            envs.env_tool,
            envs.env_exec,
            envs.env_final_answer,
        ]
        parts.closers.append(envs.aclose)
    return parts


def own_worker_queue(settings: Settings, pool: Pool) -> str:
    """Unique per worker process: a restarted worker never receives calls meant for what it no longer holds
    (environments, a trainer's in-memory versions)."""
    return f"{settings.temporal.task_queue(pool)}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
