"""General-agent episodes: EpisodeWorkflow, TaskGroupWorkflow, RolloutWorkflow and the activities they call.

Histories carry ids, counts and summaries; messages, observations and token
data live in Redis under the episode attempt's keys (store.keys).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints, model_validator

from contracts.activity import ActivityDef, Retry
from contracts.errors import ErrorType

EPISODE_WORKFLOW = "EpisodeWorkflow"
TASK_GROUP_WORKFLOW = "TaskGroupWorkflow"
ROLLOUT_WORKFLOW = "RolloutWorkflow"
SETTINGS = ("terminal", "toolcall", "swe", "gui")
"""The built-in settings; environment plugins add their own (`envs.plugins`)."""
SettingName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
"""A setting: a built-in one or a plugin's; the env pool says whether it knows it."""


def episode_workflow_id(group_id: str, index: int) -> str:
    return f"episode/{group_id}/{index}"


def step_sample_id(episode_id: str, step: int) -> str:
    """One per step of a finished episode, ever: the idempotency key of its sample."""
    return f"{episode_id}#{step}"


# ---- configuration fixed when a rollout, group or episode starts ------------------------------------------
class EpisodeConfig(BaseModel):
    """How an episode runs; built from settings by whoever starts it (workflow code reads no settings)."""

    max_steps: int = Field(10, ge=1, le=200)
    """Used when the task has no step limit of its own (env_open reports the task's, which the agent is told)."""
    prm_votes: int = Field(1, ge=0, le=16)
    temperature: float = 1.0
    max_tokens: int = Field(1024, ge=1)
    judge_name: str = "heuristic"
    policy_task_queue: str = "openclaw-rl-policy"
    judge_task_queue: str = "openclaw-rl-judge"
    env_task_queue: str = "openclaw-rl-env"
    """The shared env queue: an episode opens its environment there, then talks to that worker's own queue."""
    attempts: int = Field(3, ge=1, le=10)
    """Attempts at the whole episode when its env worker is lost."""
    env_lost_after_s: float = Field(30.0, gt=0)
    step_timeout_s: float = Field(600.0, gt=0)
    vote_timeout_s: float = Field(180.0, gt=0)
    attributes_at_start_and_end: bool = False
    """The episode's (and its group's) OpenclawSetting and OpenclawTask come with its start, set by whoever starts
    it, and its OpenclawPolicyVersion (the newest that served a step) with OpenclawOutcome in one upsert at the end:
    two or more billable actions fewer an episode than an upsert for each (the policy version's again whenever it
    moved on). False: those upserts, as episodes started before this field did (their histories replay so)."""
    finish_in_one: bool = False
    """The outcome checked and the environment closed in one call (`env_finish`), where `env_outcome` and `env_close`
    were two: a billable action fewer an episode. False: two calls, as episodes started before this field did."""
    votes_in_one: bool = False
    """Every step's PRM votes in one judge-pool call once the last step is done (`step_votes`, its requests in
    parallel, each retried on its own), where each vote of each step was a call: an episode of n steps and m votes
    costs 1 action for its judging instead of n x m. The votes are needed only when the episode's group computes its
    advantages, so nothing waits longer than for the last step's vote before. False: one call a vote, as episodes
    started before this field did."""


class ClientDriven(BaseModel):
    """An episode an outside agent drives: it sends its model calls to the API under the episode's id, runs the
    task's tools through the API, and ends the episode (contracts.client_episodes)."""

    owner: str
    """The user whose API key opened the episode: only that key may drive it."""
    free_form: bool = False
    """No task environment: the client posts the outcome. Else the task's checker gives it."""
    idle_timeout_s: float = Field(600.0, gt=0, le=86_400)
    """An episode with no call from its client for this long is abandoned: it fails, and trains nothing."""
    outcome_min: float = 0.0
    outcome_max: float = 1.0
    """The bounds of an outcome a client may post (free-form episodes)."""


class EpisodeInput(BaseModel):
    setting: SettingName
    task_id: str
    config: EpisodeConfig = Field(default_factory=EpisodeConfig)
    client: ClientDriven | None = None
    """Set: the episode is driven by an outside agent through the API, not by the policy pool's loop."""
    group_id: str | None = None
    """Set when the episode belongs to a task group (the group publishes its samples)."""
    retry_of: str | None = None
    """The workflow id of the failed episode this one retries (`openclaw-rl episodes retry`)."""


class StepRecord(BaseModel):
    """One step as the history and `episodes show` keep it: summaries; the full text is in Redis."""

    index: int
    step_id: str
    """Key of the step's token data (prompt ids, response ids, rollout log-probs)."""
    action: str
    """The action, summarised: tool calls with their arguments, or the final text."""
    tool_calls: int = 0
    parse_error: str | None = None
    observation: str = ""
    done_reason: str = ""
    votes: list[int | None] = Field(default_factory=list)
    weight_version: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


class EpisodeResult(BaseModel):
    episode_id: str
    setting: str
    task_id: str
    attempt: int
    """Which attempt finished it (1 unless an env worker was lost)."""
    attempt_key: str
    """Redis prefix of the finishing attempt's data."""
    outcome: float
    steps: list[StepRecord]
    end: Literal["submitted", "answered", "no_more_turns", "step_limit", "context_full", "client_finished"]
    group_id: str | None = None


class EpisodeProgress(BaseModel):
    attempt: int
    steps: list[StepRecord]
    outcome: float | None
    phase: str


# ---- env pool ----------------------------------------------------------------------------------------------
class EnvOpenInput(BaseModel):
    attempt_key: str
    setting: str
    task_id: str


class EnvOpened(BaseModel):
    worker_queue: str
    """The task queue of the env worker that holds the environment: every later call goes there."""
    instruction: str
    """The task's instruction, summarised."""
    tools: int
    max_steps: int | None = None
    """The task's own step limit (a multi-turn task needs more); None: the setting's."""


class EnvStepInput(BaseModel):
    attempt_key: str
    step: int


class EnvStepResult(BaseModel):
    done: bool
    done_reason: str = ""
    observation: str
    """Summary of the observation (full text in Redis)."""
    errors: int = 0
    """Tool results that were errors (non-zero exit codes, refused calls)."""


class EnvRef(BaseModel):
    attempt_key: str


class Outcome(BaseModel):
    outcome: float
    detail: str = ""


# ---- policy and judge pools --------------------------------------------------------------------------------
class AgentStepInput(BaseModel):
    attempt_key: str
    step: int
    step_id: str
    temperature: float
    max_tokens: int


class AgentStepOutput(BaseModel):
    action: str
    tool_calls: int
    parse_error: str | None = None
    finish_reason: str
    weight_version: str | None = None
    prompt_tokens: int
    completion_tokens: int


class StepVoteInput(BaseModel):
    attempt_key: str
    setting: str
    step: int
    vote: int


class StepVote(BaseModel):
    score: int | None
    """+1 / -1 from the judge's last \\boxed{}; None when it gave neither."""
    raw: str


class StepVotesInput(BaseModel):
    attempt_key: str
    setting: str
    steps: list[int]
    votes: int = Field(ge=1, le=16)
    vote_timeout_s: float = Field(gt=0)
    """Each vote's own bound; a vote past it is retried (`attempts` in all), then counts as no vote."""
    attempts: int = Field(3, ge=1, le=10)


class StepVotes(BaseModel):
    scores: list[list[int | None]]
    """Per step of the input, in its order: each vote's +1 / -1, None where the judge gave neither or failed."""


class ListTasksInput(BaseModel):
    setting: str


class TaskList(BaseModel):
    task_ids: list[str]


class StepSampleRef(BaseModel):
    episode_id: str
    step: int
    step_id: str
    reward: float
    advantage: float
    votes: list[int | None] = Field(default_factory=list)
    outcome: float
    weight_version: str | None = None


class PublishStepsInput(BaseModel):
    setting: str
    task_id: str
    group_id: str
    judge_name: str
    steps: list[StepSampleRef]
    owner: str | None = None
    """A client-driven group's user: nothing is published once they are forgotten (their tombstone)."""


class PublishStepsResult(BaseModel):
    published: int
    duplicates: int
    missing: int
    """Steps whose token data was gone (expired): skipped, counted."""


# ---- group and rollout ---------------------------------------------------------------------------------------
class TaskGroupInput(BaseModel):
    group_id: str
    setting: SettingName
    task_id: str
    samples: int = Field(8, ge=1, le=64)
    config: EpisodeConfig = Field(default_factory=EpisodeConfig)
    publish: bool = True
    """Publish step samples to `oc:samples:<setting>` (False: evaluate only)."""
    client: ClientDriven | None = None
    """Set: every episode of the group is driven by an outside agent (EpisodeInput.client)."""


class TaskGroupResult(BaseModel):
    group_id: str
    task_id: str
    outcomes: list[float]
    failed: int
    """Episodes that failed after all their attempts (left out of the group)."""
    published: int
    dropped_steps: int
    """Steps in constant (group, step) buckets: no signal, no sample."""
    weight_versions: list[str] = Field(default_factory=list)
    """The weight versions its episodes' steps were generated with, sorted (an evaluation checks they are the
    version it scores)."""


class RolloutPart(BaseModel):
    """One setting's share of a mixed rollout (`RolloutInput.parts`)."""

    setting: SettingName
    task_ids: list[str] = Field(default_factory=list)
    """Empty: every task of the setting."""
    samples_per_task: int | None = Field(None, ge=1, le=64)
    """None: the rollout's `samples_per_task`."""
    config: EpisodeConfig | None = None
    """None: the rollout's `config` (the CLI builds one per setting, from that setting's settings)."""


class RolloutInput(BaseModel):
    rollout_id: str
    setting: SettingName | None = None
    """The setting of a single-setting rollout; None when `parts` is given."""
    task_ids: list[str] = Field(default_factory=list)
    """Empty: every task of the setting."""
    samples_per_task: int = Field(8, ge=1, le=64)
    parallel: int = Field(8, ge=1, le=4096)
    """Episodes kept running at once (rounded to whole groups, at least one group)."""
    passes: int = Field(1, ge=1)
    """Times over the task set."""
    config: EpisodeConfig = Field(default_factory=EpisodeConfig)
    publish: bool = True
    parts: list[RolloutPart] = Field(default_factory=list)
    """A mixed rollout: tasks of several settings, their groups interleaved round-robin across the parts (the
    single-setting fields `setting` and `task_ids` are then unused). Empty: a single-setting rollout."""
    cursor: int = 0
    """Groups started so far (carried over continue-as-new)."""
    done: list[TaskGroupResult] = Field(default_factory=list)
    """Recent group results (the last few, carried over)."""
    totals: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _setting_or_parts(self) -> RolloutInput:
        if self.setting is None and not self.parts:
            raise ValueError("a rollout needs a setting, or parts (one per setting) for a mixed rollout")
        return self


class SettingProgress(BaseModel):
    """One setting's share of a mixed rollout's progress."""

    groups_total: int
    groups_done: int = 0
    episodes_done: int = 0
    mean_outcome: float | None = None
    published: int = 0


class RolloutProgress(BaseModel):
    rollout_id: str
    setting: str
    """The setting; a mixed rollout's settings joined with "+"."""
    groups_total: int
    groups_started: int
    groups_done: int
    running: int
    episodes_done: int
    mean_outcome: float | None
    published: int
    recent: list[TaskGroupResult]
    settings: list[str] = Field(default_factory=list)
    per_setting: dict[str, SettingProgress] = Field(default_factory=dict)
    """A mixed rollout's progress per setting (empty for a single-setting rollout)."""


# ---- activity definitions -------------------------------------------------------------------------------------
POLICY_STEP_RETRY = Retry(
    initial_interval=timedelta(milliseconds=500),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=5,
    non_retryable=(ErrorType.PROMPT_TOO_LONG, ErrorType.INVALID_REQUEST, ErrorType.EPISODE_DATA_MISSING),
)
"""A policy step of an episode (the policy's own loop, or an outside agent's call)."""
ENV_RETRY = Retry(
    initial_interval=timedelta(milliseconds=500),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=3,
    non_retryable=(ErrorType.UNKNOWN_TASK, ErrorType.ENV_MISSING, ErrorType.TASK_SETUP_FAILED),
)
# Timeouts on the env worker's own queue come from EpisodeConfig (env_lost_after_s, step_timeout_s) at the call.
ENV_OPEN = ActivityDef("env_open", EnvOpenInput, EnvOpened, start_to_close=timedelta(minutes=5), retry=ENV_RETRY)
"""On the shared env queue: whichever env worker takes it holds the environment for the whole episode."""
ENV_STEP = ActivityDef("env_step", EnvStepInput, EnvStepResult, retry=ENV_RETRY)
ENV_OUTCOME = ActivityDef("env_outcome", EnvRef, Outcome, retry=ENV_RETRY)
ENV_CLOSE = ActivityDef("env_close", EnvRef, None, start_to_close=timedelta(minutes=1), retry=Retry(maximum_attempts=3))
ENV_FINISH = ActivityDef("env_finish", EnvRef, Outcome, retry=ENV_RETRY)
"""The outcome, then the environment closed (EpisodeConfig.finish_in_one); a retry gets the outcome it checked."""
LIST_TASKS = ActivityDef(
    "list_tasks",
    ListTasksInput,
    TaskList,
    start_to_close=timedelta(minutes=1),
    retry=Retry(maximum_attempts=3, non_retryable=(ErrorType.UNKNOWN_TASK,)),
)
AGENT_STEP = ActivityDef(
    "agent_step",
    AgentStepInput,
    AgentStepOutput,
    start_to_close=timedelta(minutes=10),
    heartbeat=timedelta(seconds=30),
    retry=POLICY_STEP_RETRY,
)
"""The policy's step (policy pool): render the episode so far, generate, keep the tokens, parse the action."""
_VOTE_RETRY = Retry(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable=(ErrorType.EPISODE_DATA_MISSING,),
)
STEP_VOTE = ActivityDef("step_vote", StepVoteInput, StepVote, retry=_VOTE_RETRY)
"""One PRM vote on (a_t, s_{t+1}) with the setting's prompt (judge pool); vote timeout at the call."""
STEP_VOTES = ActivityDef(
    "step_votes",
    StepVotesInput,
    StepVotes,
    heartbeat=timedelta(seconds=30),
    retry=_VOTE_RETRY,  # each vote retries itself inside; these retries are for a worker lost mid-way
)
"""Every PRM vote of an episode's steps at once (EpisodeConfig.votes_in_one); start-to-close at the call."""
PUBLISH_STEP_SAMPLES = ActivityDef(
    "publish_step_samples",
    PublishStepsInput,
    PublishStepsResult,
    start_to_close=timedelta(minutes=2),
    # Until it lands, however long the store is down (idempotent per sample id, so never a double).
    retry=Retry(
        initial_interval=timedelta(milliseconds=500), maximum_interval=timedelta(seconds=30), maximum_attempts=0
    ),
)
