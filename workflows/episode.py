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
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from contracts.activity import ActivityDef
    from contracts.client_episodes import (
        CLIENT_CLOSING,
        CLIENT_EXEC_UPDATE,
        CLIENT_FINISH_UPDATE,
        CLIENT_STEP,
        CLIENT_STEP_UPDATE,
        CLIENT_TOOL_UPDATE,
        END_FORGOTTEN_SIGNAL,
        ENV_EXEC,
        ENV_FINAL_ANSWER,
        ENV_TOOL,
        ClientCall,
        ClientEpisodeView,
        ClientExecInput,
        ClientExecResult,
        ClientFinished,
        ClientFinishInput,
        ClientStepActivityInput,
        ClientStepActivityOutput,
        ClientStepInput,
        ClientStepOutput,
        ClientToolInput,
        ClientToolResult,
        ClosingInput,
        EnvExecInput,
        EnvFinalAnswerInput,
        EnvToolInput,
    )
    from contracts.episodes import (
        AGENT_STEP,
        ENV_CLOSE,
        ENV_FINISH,
        ENV_OPEN,
        ENV_OUTCOME,
        ENV_STEP,
        EPISODE_WORKFLOW,
        STEP_VOTE,
        STEP_VOTES,
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
        StepVotes,
        StepVotesInput,
    )
    from contracts.errors import ErrorType
    from contracts.summary import clip
    from openclaw_rl import tracing
    from openclaw_rl.search_attributes import OUTCOME, POLICY_VERSION, SETTING, TASK_ID, missing
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
        # a client-driven episode (inp.client): its calls arrive as updates, one at a time
        self._client_lock = asyncio.Lock()
        self._client_calls = 0
        self._key = keys.episode_attempt(workflow.info().workflow_id, 1)
        self._opened: EnvOpened | None = None
        self._ready = False
        self._failed: str | None = None
        self._env_lost = False
        self._finished: ClientFinished | None = None
        self._posted: float | None = None
        self._tools_since: list[tuple[str, ClientToolResult]] = []
        self._votes: list[asyncio.Task] = []
        self._inp = inp

    @workflow.run
    async def run(self, inp: EpisodeInput) -> EpisodeResult:
        if not inp.config.attributes_at_start_and_end or missing(TASK_ID):  # a starter that did not set them
            workflow.upsert_search_attributes([SETTING.value_set(inp.setting), TASK_ID.value_set(inp.task_id)])
        if inp.client is not None:
            return await self._client_driven(inp)
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
                heartbeat=timedelta(seconds=cfg.env_lost_after_s),  # a worker that dies mid-open: retried elsewhere
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
                with self._step_trace("EpisodeStep", step_id, t):  # each step a trace of its own
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
                    if cfg.prm_votes and not cfg.votes_in_one:  # judging never holds up the next step
                        votes.append(asyncio.ensure_future(self._vote(inp, key, rec)))
                    if res.done:
                        end = res.done_reason or "answered"
                        break
            if cfg.prm_votes and cfg.votes_in_one and self.steps:  # beside the outcome's check
                votes.append(asyncio.ensure_future(self._votes_in_one(inp, key, list(self.steps))))
            self._details(inp, "checking the outcome")
            finish = ENV_FINISH if cfg.finish_in_one else ENV_OUTCOME
            result: Outcome = await self._on_env(finish, EnvRef(attempt_key=key), opened, cfg.step_timeout_s)
        except EnvLost:
            raise  # the worker took the environment with it: nothing to close
        except BaseException:
            await self._close(key, opened)
            raise
        if not cfg.finish_in_one:
            await self._close(key, opened)
        self.outcome = result.outcome
        self._details(inp, "judging the last steps")
        await asyncio.gather(*votes)
        self._upsert_outcome(result.outcome)
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

    async def _votes_in_one(self, inp: EpisodeInput, key: str, records: list[StepRecord]) -> None:
        """Every vote of the attempt's steps in one call (EpisodeConfig.votes_in_one); a failed call is no vote."""
        cfg = self._cfg
        try:
            got: StepVotes = await waiting_out_store_outages(
                lambda: execute(
                    STEP_VOTES,
                    StepVotesInput(
                        attempt_key=key,
                        setting=inp.setting,
                        steps=[r.index for r in records],
                        votes=cfg.prm_votes,
                        vote_timeout_s=cfg.vote_timeout_s,
                    ),
                    task_queue=cfg.judge_task_queue,
                    # every vote at once, but a vote retried to its last try takes about three of its bounds
                    start_to_close=timedelta(seconds=3 * cfg.vote_timeout_s + 30),
                )
            )
        except ActivityError:  # no votes, as when each vote of its own failed: the steps are judged on the outcome
            for rec in records:
                rec.votes = [None] * cfg.prm_votes
            return
        for rec, scores in zip(records, got.scores, strict=True):
            rec.votes = scores

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

    # ---- driven by an outside agent (contracts.client_episodes) -----------------------------------------------
    async def _client_driven(self, inp: EpisodeInput) -> EpisodeResult:
        client = inp.client
        assert client is not None
        self.attempt = 1
        if not client.free_form:
            self._details(inp, "opening the environment")
            try:
                self._opened = await execute(
                    ENV_OPEN,
                    EnvOpenInput(attempt_key=self._key, setting=inp.setting, task_id=inp.task_id),
                    task_queue=inp.config.env_task_queue,
                    heartbeat=timedelta(seconds=inp.config.env_lost_after_s),
                )
            except ActivityError as exc:
                self._failed = "the environment could not be opened"
                await workflow.wait_condition(workflow.all_handlers_finished)  # calls waiting for it are refused
                raise _cause_as_application_error(exc, self._failed) from exc
        self._ready = True
        self._details(inp, "waiting for the agent's first call")
        idle = timedelta(seconds=client.idle_timeout_s)
        while self._finished is None and self._failed is None:
            seen = self._client_calls
            try:
                await workflow.wait_condition(
                    lambda: self._client_calls != seen or self._finished is not None or self._failed is not None,
                    timeout=idle,
                )
            except asyncio.TimeoutError:
                if not self._client_lock.locked():  # a long call in progress is not silence
                    self._failed = f"abandoned: no call from its client for {client.idle_timeout_s:g} s"
        if self._failed is not None:  # abandoned, or its environment lost during a call
            self._details(inp, self._failed)
            if self._opened is not None and not self._env_lost:
                await self._close(self._key, self._opened)
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise ApplicationError(
                f"episode {workflow.info().workflow_id}: {self._failed}; it trains nothing",
                type=ErrorType.ENV_LOST if self._env_lost else ErrorType.EPISODE_ABANDONED,
                non_retryable=True,
            )
        assert self._finished is not None
        if self._opened is not None:
            await self._close(self._key, self._opened)
        self._details(inp, "judging the last steps")
        await asyncio.gather(*self._votes)
        await workflow.wait_condition(workflow.all_handlers_finished)
        self._upsert_outcome(self._finished.outcome)
        self.phase = "done"
        self._details(inp, f"outcome {self._finished.outcome:g}")
        return EpisodeResult(
            episode_id=workflow.info().workflow_id,
            setting=inp.setting,
            task_id=inp.task_id,
            attempt=1,
            attempt_key=self._key,
            outcome=self._finished.outcome,
            steps=self.steps,
            end=self._finished.end,
            group_id=inp.group_id,
        )

    @contextlib.asynccontextmanager
    async def _client_call(self, call: ClientCall, name: str, *, after_end: bool = False):
        """One call of the episode's client, after the ones before it: refused when it cannot run (another user's
        key, after the end or a failure); the idle clock starts again when it ends; failures become the
        ApplicationErrors the API maps to statuses. What it runs joins the trace of the API request that made it."""
        client = self._inp.client
        if client is None or call.caller != client.owner:  # an agent-driven episode takes no client calls
            raise ApplicationError("no such episode for this key", type=ErrorType.EPISODE_NOT_YOURS)
        await workflow.wait_condition(lambda: self._ready or self._failed is not None)
        async with self._client_lock:
            if self._failed is not None:
                raise ApplicationError(f"the episode is over: {self._failed}", type=ErrorType.EPISODE_CONFLICT)
            if self._finished is not None and not after_end:
                raise ApplicationError(
                    f"the episode has ended (outcome {self._finished.outcome:g})", type=ErrorType.EPISODE_CONFLICT
                )
            self._client_calls += 1
            try:
                with self._step_trace(f"EpisodeCall:{name}", f"c{self._client_calls}", parent=call.traceparent):
                    yield
            except EnvLost as exc:  # the env worker holding the task is gone: a client's steps cannot be replayed
                self._env_lost = True
                self._failed = f"its environment was lost ({exc})"
                raise ApplicationError(
                    f"the episode is over: {self._failed}", type=ErrorType.ENV_LOST, non_retryable=True
                ) from exc
            except ActivityError as exc:
                raise _cause_as_application_error(exc, "the call failed") from exc
            finally:
                self._client_calls += 1

    @workflow.update(name=CLIENT_STEP_UPDATE)
    async def client_step(self, call: ClientStepInput) -> ClientStepOutput:
        inp = self._inp
        async with self._client_call(call, "step"):
            t = len(self.steps)
            limit = (self._opened.max_steps if self._opened else None) or inp.config.max_steps
            if t >= limit:
                raise ApplicationError(
                    f"the episode has used its {limit} steps: end it (POST .../outcome)",
                    type=ErrorType.EPISODE_CONFLICT,
                )
            self._details(inp, f"step {t + 1}/{limit}: policy")
            step_id = keys.episode_step_id(workflow.info().workflow_id, 1, t)
            out: ClientStepActivityOutput = await execute(
                CLIENT_STEP,
                ClientStepActivityInput(
                    attempt_key=self._key,
                    setting=inp.setting,
                    step=t,
                    step_id=step_id,
                    request_key=call.request_key,
                    sampling=call.sampling,
                ),
                task_queue=inp.config.policy_task_queue,
            )
            if t > 0:  # this request carries the previous step's next state: it can be judged now
                prev = self.steps[t - 1]
                prev.observation = out.previous_observation or ""
                self._tools_since = []
                if inp.config.prm_votes:
                    self._votes.append(asyncio.ensure_future(self._vote(inp, self._key, prev)))
            o = out.output
            self.steps.append(
                StepRecord(
                    index=t,
                    step_id=step_id,
                    action=out.action,
                    tool_calls=len(o.tool_calls),
                    weight_version=o.weight_version,
                    prompt_tokens=o.prompt_tokens,
                    completion_tokens=o.completion_tokens,
                )
            )
            self._note_policy_version(o.weight_version)
            self._details(inp, f"step {t + 1}/{limit}: waiting for the agent")
            return ClientStepOutput(step=t, output=o)

    def _environment(self) -> EnvOpened:
        if self._opened is None:
            raise ApplicationError(
                "a free-form episode has no environment: run tools and commands yourself",
                type=ErrorType.EPISODE_CONFLICT,
            )
        return self._opened

    @workflow.update(name=CLIENT_TOOL_UPDATE)
    async def client_tool(self, call: ClientToolInput) -> ClientToolResult:
        async with self._client_call(call, "tool"):
            result: ClientToolResult = await self._on_env(
                ENV_TOOL,
                # the call's id is its number in this history: a retried activity answers, it does not run again
                EnvToolInput(
                    attempt_key=self._key, call_id=f"c{self._client_calls}", name=call.name, arguments=call.arguments
                ),
                self._environment(),
                self._cfg.step_timeout_s,
            )
            self._tools_since.append((call.name, result.model_copy(update={"content": clip(result.content)})))
            return result

    @workflow.signal(name=END_FORGOTTEN_SIGNAL)
    def end_forgotten(self) -> None:
        """Its user is being forgotten: end as failed, closing the environment (a signal no earlier history holds,
        so replays are unchanged)."""
        if self._finished is None and self._failed is None:
            self._failed = "its user was forgotten"

    @workflow.update(name=CLIENT_EXEC_UPDATE)
    async def client_exec(self, call: ClientExecInput) -> ClientExecResult:
        async with self._client_call(call, "exec"):
            result: ClientExecResult = await self._on_env(
                ENV_EXEC,
                EnvExecInput(attempt_key=self._key, call_id=f"c{self._client_calls}", command=call.command),
                self._environment(),
                self._cfg.step_timeout_s,
            )
            self._tools_since.append(
                ("exec", ClientToolResult(content=clip(result.output), exit_code=result.returncode))
            )
            return result

    @workflow.update(name=CLIENT_FINISH_UPDATE)
    async def client_finish(self, call: ClientFinishInput) -> ClientFinished:
        inp = self._inp
        async with self._client_call(call, "outcome", after_end=True):
            assert inp.client is not None  # _client_call refuses agent-driven episodes
            if self._finished is not None:  # posted again: the same answer, or a conflict
                if call.outcome is not None and call.outcome != self._posted:
                    raise ApplicationError(
                        f"the episode already ended with outcome {self._finished.outcome:g}",
                        type=ErrorType.EPISODE_CONFLICT,
                    )
                return self._finished
            if not self.steps:
                raise ApplicationError("the episode has no step yet: nothing to end", type=ErrorType.EPISODE_CONFLICT)
            if inp.client.free_form:
                outcome = call.outcome
                if outcome is None:
                    raise ApplicationError("a free-form episode needs the outcome", type=ErrorType.INVALID_REQUEST)
                lo, hi = inp.client.outcome_min, inp.client.outcome_max
                if not lo <= outcome <= hi:
                    raise ApplicationError(
                        f"the outcome must be within [{lo:g}, {hi:g}], got {outcome:g}", type=ErrorType.INVALID_REQUEST
                    )
            else:
                if call.outcome is not None:
                    raise ApplicationError(
                        "a task episode's outcome is its checker's: post no outcome", type=ErrorType.INVALID_REQUEST
                    )
                opened = self._environment()
                self._details(inp, "checking the outcome")
                await self._on_env(
                    ENV_FINAL_ANSWER,
                    EnvFinalAnswerInput(attempt_key=self._key, step=self.steps[-1].index),
                    opened,
                    self._cfg.step_timeout_s,
                )
                checked: Outcome = await self._on_env(
                    ENV_OUTCOME, EnvRef(attempt_key=self._key), opened, self._cfg.step_timeout_s
                )
                outcome = checked.outcome
            last = self.steps[-1]
            await execute(
                CLIENT_CLOSING,
                ClosingInput(
                    attempt_key=self._key,
                    step=last.index,
                    tool_names=[n for n, _ in self._tools_since],
                    tool_results=[r for _, r in self._tools_since],
                ),
                task_queue=inp.config.policy_task_queue,
            )
            last.observation = clip("; ".join(r.content for _, r in self._tools_since))
            if inp.config.prm_votes:
                self._votes.append(asyncio.ensure_future(self._vote(inp, self._key, last)))
            self.outcome, self._posted = outcome, call.outcome
            self._finished = ClientFinished(outcome=outcome, steps=len(self.steps), end="client_finished")
            return self._finished

    @workflow.query
    def client_view(self) -> ClientEpisodeView:
        """An agent-driven episode has no owner: the API answers 404 for it."""
        inp = self._inp
        return ClientEpisodeView(
            owner=inp.client.owner if inp.client else "",
            setting=inp.setting,
            task_id=inp.task_id,
            free_form=bool(inp.client and inp.client.free_form),
            ready=self._ready,
            steps=len(self.steps),
            max_steps=(self._opened.max_steps if self._opened else None) or inp.config.max_steps,
            failed=self._failed,
            finished=self._finished,
        )

    def _step_trace(
        self, name: str, seed: str, step: int | None = None, parent: str | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """What a step (or a client's call) starts, as a trace of its own linked to the episode's; ids from the run
        id and `seed`, so a replay derives the same ones (openclaw_rl.tracing.step_trace)."""
        info = workflow.info()
        attributes: dict[str, str | int] = {"temporalWorkflowID": info.workflow_id}
        if step is not None:
            attributes["episode.step"] = step
        return tracing.step_trace(
            name,
            f"{info.run_id}/{seed}",
            clock=workflow.time_ns,
            replaying=workflow.unsafe.is_replaying,
            parent=parent,
            attributes=attributes,
        )

    def _details(self, inp: EpisodeInput, what: str) -> None:
        self.phase = what
        attempt = f" (attempt {self.attempt})" if self.attempt > 1 else ""
        workflow.set_current_details(f"{inp.setting} {inp.task_id}{attempt}: {what}")

    def _note_policy_version(self, version: str | None) -> None:
        if version is None or not version.isdigit() or int(version) == self._policy_version:
            return
        self._policy_version = int(version)
        if not self._inp.config.attributes_at_start_and_end:
            workflow.upsert_search_attributes([POLICY_VERSION.value_set(int(version))])

    def _upsert_outcome(self, outcome: float) -> None:
        """The outcome, and (attributes_at_start_and_end) the newest policy version that served a step: one upsert."""
        updates = [OUTCOME.value_set(outcome)]
        if self._inp.config.attributes_at_start_and_end and self._policy_version is not None:
            updates.append(POLICY_VERSION.value_set(self._policy_version))
        workflow.upsert_search_attributes(updates)

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
