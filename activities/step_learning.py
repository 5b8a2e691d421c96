"""Judge-pool activities of general-agent episodes: step votes (the paper's C.4 prompts) and step samples.

`step_vote` is one PRM vote on (a_t, s_{t+1}), `step_votes` every vote of an episode's steps in one call;
`publish_step_samples` turns a
finished task group's step advantages into training samples on
`oc:samples:<setting>`, each exactly once (store.samples publishes a sample and
what lands with it in one atomic step, keyed by the step's sample id).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.episode_data import vote_window
from activities.heartbeat import heartbeating
from activities.store_errors import store_outage_is_retryable
from contracts.chat import tenant_of
from contracts.episodes import (
    PUBLISH_STEP_SAMPLES,
    STEP_VOTE,
    STEP_VOTES,
    PublishStepsInput,
    PublishStepsResult,
    StepSampleRef,
    StepVote,
    StepVoteInput,
    StepVotes,
    StepVotesInput,
    step_sample_id,
)
from contracts.errors import ErrorType
from contracts.summary import JUDGE_RAW_CHARS, clip
from judges import Judge, JudgeCallError, make_judge
from judges.base import StepJudgeContext, StepView
from openclaw_rl.settings import Settings
from rlmath.signals import parse_boxed
from store import keys
from store.client import Store
from store.episodes import EpisodeStepData, advantage_write
from store.samples import EpisodeStep, TrainingSample
from store.turns import TurnTokens

log = structlog.get_logger(__name__)

STEP_SCORES = frozenset({1, -1})
HISTORY_STEPS = 8
"""Earlier steps shown to the step judge (the most recent ones): enough context, bounded prompt."""


class StepLearningActivities:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.store = Store.from_settings(settings)
        self._judge: Judge | None = None

    async def aclose(self) -> None:
        if self._judge is not None:
            await self._judge.aclose()
        await self.store.aclose()

    @activity.defn(name=STEP_VOTE.name)
    @store_outage_is_retryable
    async def step_vote(self, inp: StepVoteInput) -> StepVote:
        if self._judge is None:
            self._judge = make_judge(self.settings)
        ctx = await self._context(inp)
        try:
            raw = await self._judge.step(ctx)
        except JudgeCallError as exc:
            raise ApplicationError(str(exc), type=ErrorType.JUDGE_CALL_FAILED) from exc
        return StepVote(score=parse_boxed(raw, STEP_SCORES), raw=raw[:JUDGE_RAW_CHARS])

    @activity.defn(name=STEP_VOTES.name)
    @store_outage_is_retryable
    async def step_votes(self, inp: StepVotesInput) -> StepVotes:
        """Every vote of every step in `inp.steps` at once (EpisodeConfig.votes_in_one): one context per step, the
        judge's requests in parallel, each vote retried on its own and None when it failed every try (as a
        `step_vote` that failed for good is no vote)."""
        if self._judge is None:
            self._judge = make_judge(self.settings)
        judge = self._judge
        contexts = [
            await self._context(StepVoteInput(attempt_key=inp.attempt_key, setting=inp.setting, step=t, vote=0))
            for t in inp.steps
        ]

        async def one(ctx: StepJudgeContext, step: int, vote: int) -> int | None:
            for attempt in range(inp.attempts):
                try:
                    raw = await asyncio.wait_for(judge.step(ctx), inp.vote_timeout_s)
                    return parse_boxed(raw, STEP_SCORES)
                except (JudgeCallError, asyncio.TimeoutError) as exc:
                    log.warning("step vote failed", attempt_key=inp.attempt_key, step=step, vote=vote,
                                attempt=attempt, error=str(exc) or type(exc).__name__)  # fmt: skip
                    if attempt + 1 < inp.attempts:
                        await asyncio.sleep(min(10.0, 2.0**attempt))
            return None

        async with heartbeating(10.0):  # a third of STEP_VOTES' heartbeat timeout
            flat = await asyncio.gather(
                *(one(ctx, t, v) for ctx, t in zip(contexts, inp.steps, strict=True) for v in range(inp.votes))
            )
        return StepVotes(scores=[list(flat[i * inp.votes : (i + 1) * inp.votes]) for i in range(len(inp.steps))])

    async def _context(self, inp: StepVoteInput) -> StepJudgeContext:
        opening, window = await vote_window(self.store.episodes, inp.attempt_key, inp.step, HISTORY_STEPS)
        instruction = next((m.get("content", "") for m in opening.messages if m.get("role") == "user"), "")
        views = [_view(s) for s in window]
        shots = [v.screenshot for v in views if v.screenshot]
        return StepJudgeContext(
            setting=inp.setting,
            task_instruction=instruction,
            history=views[:-1],
            current=views[-1],
            # gui: the opening state's PNG lies beside the steps' (envs.gui.env.OPENING_SCREENSHOT)
            opening_screenshot=str(Path(shots[0]).with_name("reset.png")) if shots else None,
        )

    @activity.defn(name=PUBLISH_STEP_SAMPLES.name)
    @store_outage_is_retryable
    async def publish_step_samples(self, inp: PublishStepsInput) -> PublishStepsResult:
        published = duplicates = missing = 0
        # A client-driven group's user forgotten meanwhile (their tombstone) gets nothing written back
        # (control.user_data); the check is atomic with each publication.
        guard = keys.forgotten(tenant_of(inp.owner)) if inp.owner else None
        for ref in inp.steps:
            tokens = await self.store.turns.load(ref.step_id)
            if tokens is None or not tokens.response_ids:
                missing += 1
                continue
            sample = step_sample(inp, ref, tokens)
            wrote = await self.store.samples.publish_once(
                sample.sample_id,
                inp.setting,
                sample,
                also=[advantage_write(ref.episode_id, ref.step, ref.reward, ref.advantage)],
                guard=guard,
            )
            published += int(wrote)
            duplicates += int(not wrote)
        if missing:
            log.warning("step samples without token data were skipped", group_id=inp.group_id, missing=missing)
        return PublishStepsResult(published=published, duplicates=duplicates, missing=missing)


def step_sample(inp: PublishStepsInput, ref: StepSampleRef, tokens: TurnTokens) -> TrainingSample:
    """A step's sample: its tokens, the step's standardised advantage on every response token, and where it came
    from."""
    return TrainingSample(
        sample_id=step_sample_id(ref.episode_id, ref.step),
        source=inp.setting,
        policy_version=tokens.weight_version,
        temperature=tokens.temperature,
        reward=ref.reward,
        loss_mask=1,
        prompt_ids=tokens.prompt_ids,
        response_ids=tokens.response_ids,
        rollout_logprobs=tokens.response_logprobs,
        advantages=[ref.advantage] * len(tokens.response_ids),
        provenance=EpisodeStep(
            episode_id=ref.episode_id,
            step=ref.step,
            step_id=ref.step_id,
            task_id=inp.task_id,
            group_id=inp.group_id,
            outcome=ref.outcome,
            judge=inp.judge_name,
            votes=ref.votes,
        ),
    )


def _view(step: EpisodeStepData) -> StepView:
    """One step as the step judge reads it."""
    action, obs = step.action.action, step.observation.observation
    calls = [{"name": c.name, "arguments": c.arguments} for c in action.tool_calls]
    results = [
        f"[{r.name} exit={r.exit_code}] {r.content}" if r.exit_code is not None else f"[{r.name}] {r.content}"
        for r in obs.tool_results
    ]
    if obs.user_message:
        results.append(f"[user] {obs.user_message}")
    return StepView(
        turn_idx=step.index,
        assistant_text=clip(action.text, JUDGE_RAW_CHARS),
        tool_calls=action.parse_error and f"parse error: {action.parse_error}" or json.dumps(calls, ensure_ascii=False),
        tool_results=clip("\n".join(results), JUDGE_RAW_CHARS * 2),
        parse_error=action.parse_error,
        errors=sum(bool(r.error) for r in obs.tool_results),
        screenshot=obs.screenshot,
    )
