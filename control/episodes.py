"""General-agent episodes, task groups and rollouts: their configuration from settings, their workflow ids, and
starting them."""

from __future__ import annotations

import time
import uuid
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair

from contracts.chat import tenant_of
from contracts.client_episodes import FREE_FORM_SETTING
from contracts.episodes import (
    ClientDriven,
    EpisodeConfig,
    EpisodeInput,
    RolloutInput,
    RolloutPart,
    TaskGroupInput,
    episode_workflow_id,
)
from envs.registry import setting_config
from openclaw_rl.search_attributes import USER_ID, of_task
from openclaw_rl.settings import Pool, Settings
from workflows.episode import EpisodeWorkflow
from workflows.rollout import RolloutWorkflow
from workflows.task_group import TaskGroupWorkflow


def episode_config(settings: Settings, setting: str, **overrides: Any) -> EpisodeConfig:
    """Everything an episode of `setting` needs to know, fixed when it starts (`overrides`: fields to replace)."""
    cfg, t = setting_config(settings, setting), settings.temporal
    base = EpisodeConfig(
        max_steps=cfg.max_steps,
        prm_votes=cfg.prm_votes,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        judge_name=settings.judge().type,
        policy_task_queue=t.task_queue(Pool.POLICY),
        judge_task_queue=t.task_queue(Pool.JUDGE),
        env_task_queue=t.task_queue(Pool.ENV),
        attempts=settings.envs.episode_attempts,
        env_lost_after_s=settings.envs.env_lost_after_s,
        step_timeout_s=settings.envs.step_timeout_s,
        vote_timeout_s=settings.learning.vote_timeout_s,
        attributes_at_start_and_end=True,
        finish_in_one=True,
        votes_in_one=True,
    )
    return base.model_copy(update=overrides) if overrides else base


def _stamp() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"


def _queue(settings: Settings) -> str:
    return settings.temporal.task_queue(Pool.WORKFLOW)


async def start_episode(
    client: Client,
    settings: Settings,
    inp: EpisodeInput,
    *,
    workflow_id: str | None = None,
    task_queue: str | None = None,
    **options: Any,
) -> WorkflowHandle:
    """One episode (`inp.config` as given; build it with `episode_config`). `options`: start_workflow's own (memo,
    static_summary)."""
    wf_id = workflow_id or f"episode/{inp.setting}-{inp.task_id}-{_stamp()}".replace(" ", "_")
    queue = task_queue or _queue(settings)
    if inp.config.attributes_at_start_and_end and "search_attributes" not in options:
        options["search_attributes"] = of_task(inp.setting, inp.task_id)
    return await client.start_workflow(EpisodeWorkflow.run, inp, id=wf_id, task_queue=queue, **options)


async def start_task_group(
    client: Client,
    settings: Settings,
    setting: str,
    task_id: str,
    *,
    samples: int,
    publish: bool = True,
    config: EpisodeConfig | None = None,
) -> WorkflowHandle:
    group_id = f"{setting}-{task_id}-{_stamp()}"
    config = config or episode_config(settings, setting)
    return await client.start_workflow(
        TaskGroupWorkflow.run,
        TaskGroupInput(
            group_id=group_id,
            setting=setting,
            task_id=task_id,
            samples=samples,
            config=config,
            publish=publish,
        ),
        id=f"group/{group_id}",
        task_queue=_queue(settings),
        search_attributes=of_task(setting, task_id) if config.attributes_at_start_and_end else None,
    )


async def start_client_group(
    client: Client,
    settings: Settings,
    owner: str,
    *,
    setting: str | None,
    task_id: str | None,
    samples: int,
    label: str | None = None,
) -> tuple[str, list[str]]:
    """Episodes an outside agent drives (`EpisodeInput.client`), as one task group: a task of `setting` (its checker
    gives the outcome) or, with no setting, free-form ones whose outcome the client posts, in the stream `label`.
    Returns the group id and the episodes' workflow ids. UnknownSetting / ValueError for what cannot start."""
    c = settings.envs.client
    free_form = setting is None
    if free_form:
        name = label or FREE_FORM_SETTING
        config = episode_config_for_free_form(settings, c.max_steps, c.prm_votes)
    else:
        name = setting
        config = episode_config(settings, setting)  # UnknownSetting for a setting no environment provides
    group_id = f"client-{uuid.uuid4().hex[:16]}"
    driven = ClientDriven(
        owner=owner,
        free_form=free_form,
        idle_timeout_s=c.idle_timeout_s,
        outcome_min=c.outcome_min,
        outcome_max=c.outcome_max,
    )
    await client.start_workflow(
        TaskGroupWorkflow.run,
        TaskGroupInput(
            group_id=group_id,
            setting=name,
            task_id=task_id or "free-form",
            samples=samples,
            config=config,
            client=driven,
        ),
        id=f"group/{group_id}",
        task_queue=_queue(settings),
        # Findable by its user (control.user_data: export and forget), as their sessions are: by pseudonym, so
        # Temporal's records of it name no one once the user is forgotten (control.sessions).
        search_attributes=of_task(name, task_id or "free-form", SearchAttributePair(USER_ID, tenant_of(owner))),
        static_summary=f"driven by {tenant_of(owner)}: {name} {task_id or 'free-form'} x{samples}",
    )
    return group_id, [episode_workflow_id(group_id, k) for k in range(samples)]


def episode_config_for_free_form(settings: Settings, max_steps: int, prm_votes: int) -> EpisodeConfig:
    """A free-form episode's configuration: no setting's, the client episodes' own limits."""
    t = settings.temporal
    return EpisodeConfig(
        max_steps=max_steps,
        prm_votes=prm_votes,
        judge_name=settings.judge().type,
        policy_task_queue=t.task_queue(Pool.POLICY),
        judge_task_queue=t.task_queue(Pool.JUDGE),
        env_task_queue=t.task_queue(Pool.ENV),
        attempts=1,
        env_lost_after_s=settings.envs.env_lost_after_s,
        step_timeout_s=settings.envs.step_timeout_s,
        vote_timeout_s=settings.learning.vote_timeout_s,
        attributes_at_start_and_end=True,
    )


async def start_rollout(
    client: Client,
    settings: Settings,
    setting: str,
    task_ids: list[str],
    *,
    samples_per_task: int,
    parallel: int,
    passes: int = 1,
    publish: bool = True,
    config: EpisodeConfig | None = None,
) -> WorkflowHandle:
    """A rollout over `task_ids` of one setting (empty: every task of it)."""
    rollout_id = f"{setting}-{_stamp()}"
    return await client.start_workflow(
        RolloutWorkflow.run,
        RolloutInput(
            rollout_id=rollout_id,
            setting=setting,
            task_ids=task_ids,
            samples_per_task=samples_per_task,
            parallel=parallel,
            passes=passes,
            config=config or episode_config(settings, setting),
            publish=publish,
        ),
        id=f"rollout/{rollout_id}",
        task_queue=_queue(settings),
    )


def mixed_names(parts: list[RolloutPart]) -> str:
    return "+".join(dict.fromkeys(p.setting for p in parts))


async def start_mixed_rollout(
    client: Client,
    settings: Settings,
    parts: list[tuple[str, list[str], int | None]],
    *,
    samples_per_task: int,
    parallel: int,
    passes: int = 1,
    publish: bool = True,
) -> WorkflowHandle:
    """A rollout over tasks of several settings: `parts` are (setting, task ids (empty: all), episodes per task or
    None), each part with its own setting's EpisodeConfig."""
    rollout_parts = [
        RolloutPart(setting=setting, task_ids=ids, samples_per_task=n, config=episode_config(settings, setting))
        for setting, ids, n in parts
    ]
    names = mixed_names(rollout_parts)
    rollout_id = f"mixed-{_stamp()}"
    return await client.start_workflow(
        RolloutWorkflow.run,
        RolloutInput(
            rollout_id=rollout_id,
            parts=rollout_parts,
            samples_per_task=samples_per_task,
            parallel=parallel,
            passes=passes,
            config=rollout_parts[0].config,
            publish=publish,
        ),
        id=f"rollout/{rollout_id}",
        task_queue=_queue(settings),
        static_summary=f"mixed rollout: {names}",
    )
