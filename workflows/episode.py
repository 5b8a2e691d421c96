"""EpisodeWorkflow: one general-agent trajectory on one task, durable.

Per step: `agent_step` on the policy pool (the same rollout core as chat turns;
tokens and log-probs kept in Redis) -> `env_step` on the env worker that holds
the environment -> `step_vote` x m on the judge pool, in the background while
the next step runs -> ... -> the outcome check. The environment lives on one
env worker: `env_open` on the shared env queue answers with that worker's own
queue, and every later call goes there. If that worker dies, its queue goes
quiet: the call times out (schedule-to-start, or the heartbeat of a step in
progress) and the episode starts over, from `env_open`, on another worker,
under a fresh attempt key so the attempts' data never mix.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from contracts.activity import ActivityDef
    from contracts.episodes import (
        AGENT_STEP,
        ENV_CLOSE,
        ENV_OPEN,
        ENV_OUTCOME,
        ENV_STEP,
        EPISODE_WORKFLOW,
        STEP_VOTE,
        AgentStepInput,
        AgentStepOutput,
        EnvOpened,
        EnvOpenInput,
        EnvRef,
        EnvStepInput,
        EnvStepResult,
        EpisodeInput,
        EpisodeProgress,
        EpisodeResult,
        Outcome,
        StepRecord,
        StepVote,
        StepVoteInput,
    )
    from contracts.errors import ErrorType
    from openclaw_rl.search_attributes import OUTCOME, POLICY_VERSION, SETTING, TASK_ID
    from store import keys
    from workflows.activity_calls import execute
    from workflows.store_outage import waiting_out_store_outages


class EnvLost(Exception):
    """The env worker holding this attempt's environment stopped answering."""


# Unsandboxed, like SessionWorkflow: the sandbox's per-task cost is on every step's path, and this code is
# deterministic by construction (no I/O, time or randomness but workflow.*).
@workflow.defn(name=EPISODE_WORKFLOW, sandboxed=False)
class EpisodeWorkflow:
    @workflow.init
    def __init__(self, inp: EpisodeInput) -> None:
        self.attempt = 0
        self.steps: list[StepRecord] = []
        self.outcome: float | None = None
        self.phase = "starting"
        self._cfg = inp.config
        self._policy_version: int | None = None

    @workflow.run
    async def run(self, inp: EpisodeInput) -> EpisodeResult:
        workflow.upsert_search_attributes([SETTING.value_set(inp.setting), TASK_ID.value_set(inp.task_id)])
        for attempt in range(1, inp.config.attempts + 1):
            self.attempt, self.steps, self.outcome = attempt, [], None
            try:
                return await self._attempt(inp, attempt)
            except EnvLost as exc:
                workflow.logger.warning(
                    "env worker lost; the episode starts over", extra={"attempt": attempt, "why": str(exc)}
                )
        self.phase = "failed"
        raise ApplicationError(
            f"the env worker was lost in each of {inp.config.attempts} attempts",
            type=ErrorType.ENV_LOST,
            non_retryable=True,
        )

    async def _attempt(self, inp: EpisodeInput, attempt: int) -> EpisodeResult:
        cfg, wf_id = inp.config, workflow.info().workflow_id
        key = keys.episode_attempt(wf_id, attempt)
        self._details(inp, "opening the environment")
        try:
            opened: EnvOpened = await execute(
                ENV_OPEN,
                EnvOpenInput(attempt_key=key, setting=inp.setting, task_id=inp.task_id),
                task_queue=cfg.env_task_queue,
            )
        except ActivityError as exc:
            raise _cause_as_application_error(exc, "the environment could not be opened") from exc
        votes: list[asyncio.Task] = []
        end = "step_limit"
        max_steps = opened.max_steps or cfg.max_steps
        try:
            for t in range(max_steps):
                self._details(inp, f"step {t + 1}/{max_steps}: policy")
                step_id = keys.episode_step_id(wf_id, attempt, t)
                try:
                    out: AgentStepOutput = await execute(
                        AGENT_STEP,
                        AgentStepInput(
                            attempt_key=key,
                            step=t,
                            step_id=step_id,
                            temperature=cfg.temperature,
                            max_tokens=cfg.max_tokens,
                        ),
                        task_queue=cfg.policy_task_queue,
                    )
                except ActivityError as exc:
                    if _error_type(exc) == ErrorType.PROMPT_TOO_LONG:
                        end = "context_full"
                        break
                    raise _cause_as_application_error(exc, f"the policy failed at step {t}") from exc
                rec = StepRecord(
                    index=t,
                    step_id=step_id,
                    action=out.action,
                    tool_calls=out.tool_calls,
                    parse_error=out.parse_error,
                    weight_version=out.weight_version,
                    prompt_tokens=out.prompt_tokens,
                    completion_tokens=out.completion_tokens,
                )
                self.steps.append(rec)
                self._note_policy_version(out.weight_version)
                self._details(inp, f"step {t + 1}/{max_steps}: environment")
                res: EnvStepResult = await self._on_env(
                    ENV_STEP, EnvStepInput(attempt_key=key, step=t), opened, cfg.step_timeout_s
                )
                rec.observation, rec.done_reason = res.observation, res.done_reason
                if cfg.prm_votes:  # judging never holds up the next step
                    votes.append(asyncio.ensure_future(self._vote(inp, key, rec)))
                if res.done:
                    end = res.done_reason or "answered"
                    break
            self._details(inp, "checking the outcome")
            result: Outcome = await self._on_env(ENV_OUTCOME, EnvRef(attempt_key=key), opened, cfg.step_timeout_s)
        except EnvLost:
            raise  # the worker took the environment with it: nothing to close
        except BaseException:
            await self._close(key, opened)
            raise
        await self._close(key, opened)
        self.outcome = result.outcome
        self._details(inp, "judging the last steps")
        await asyncio.gather(*votes)
        workflow.upsert_search_attributes([OUTCOME.value_set(result.outcome)])
        self.phase = "done"
        self._details(inp, f"outcome {result.outcome:g}")
        return EpisodeResult(
            episode_id=wf_id,
            setting=inp.setting,
            task_id=inp.task_id,
            attempt=attempt,
            attempt_key=key,
            outcome=result.outcome,
            steps=self.steps,
            end=end,
            group_id=inp.group_id,
        )

    async def _on_env(self, defn: ActivityDef, arg, opened: EnvOpened, timeout_s: float):
        """A call to the env worker that holds the environment; its silence means the worker is gone."""
        lost = timedelta(seconds=self._cfg.env_lost_after_s)
        try:
            return await execute(
                defn,
                arg,
                task_queue=opened.worker_queue,
                start_to_close=timedelta(seconds=timeout_s),
                heartbeat=lost,
                schedule_to_start=lost,
            )
        except ActivityError as exc:
            if isinstance(exc.cause, TimeoutError) or _error_type(exc) == ErrorType.ENV_MISSING:
                raise EnvLost(str(exc.cause or exc)) from exc
            raise _cause_as_application_error(exc, f"{defn.name} failed") from exc

    async def _close(self, key: str, opened: EnvOpened) -> None:
        lost = timedelta(seconds=self._cfg.env_lost_after_s)
        try:
            await execute(ENV_CLOSE, EnvRef(attempt_key=key), task_queue=opened.worker_queue, schedule_to_start=lost)
        except ActivityError:
            pass  # a lost worker took the environment with it; a live one closes idle environments itself

    async def _vote(self, inp: EpisodeInput, key: str, rec: StepRecord) -> None:
        async def one(i: int) -> int | None:
            try:
                vote: StepVote = await waiting_out_store_outages(
                    lambda: execute(
                        STEP_VOTE,
                        StepVoteInput(attempt_key=key, setting=inp.setting, step=rec.index, vote=i),
                        task_queue=self._cfg.judge_task_queue,
                        start_to_close=timedelta(seconds=self._cfg.vote_timeout_s),
                    )
                )
                return vote.score
            except ActivityError:
                return None  # a failed vote is no vote, never fatal

        rec.votes = list(await asyncio.gather(*(one(i) for i in range(self._cfg.prm_votes))))

    def _details(self, inp: EpisodeInput, what: str) -> None:
        self.phase = what
        attempt = f" (attempt {self.attempt})" if self.attempt > 1 else ""
        workflow.set_current_details(f"{inp.setting} {inp.task_id}{attempt}: {what}")

    def _note_policy_version(self, version: str | None) -> None:
        if version is None or not version.isdigit() or int(version) == self._policy_version:
            return
        self._policy_version = int(version)
        workflow.upsert_search_attributes([POLICY_VERSION.value_set(int(version))])

    @workflow.query
    def progress(self) -> EpisodeProgress:
        return EpisodeProgress(attempt=self.attempt, steps=self.steps, outcome=self.outcome, phase=self.phase)


def _error_type(exc: ActivityError) -> str | None:
    cause = exc.cause
    return cause.type if isinstance(cause, ApplicationError) else None


def _cause_as_application_error(exc: ActivityError, what: str) -> ApplicationError:
    cause = exc.cause
    message = getattr(cause, "message", None) or str(cause or exc)
    kind = _error_type(exc) or "ActivityFailed"
    return ApplicationError(f"{what}: {message}", type=kind, non_retryable=True)
