"""Judge-pool activities of general-agent episodes: step votes (the paper's C.4 prompts) and step samples.

`step_vote` is one PRM vote on (a_t, s_{t+1}); `publish_step_samples` turns a
finished task group's step advantages into training samples on
`oc:samples:<setting>`, each exactly once (an idempotency key per step, set in
the same Lua step as the stream entry).
"""

from __future__ import annotations

import json
from pathlib import Path

import redis.asyncio as aioredis
import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import episode_data
from activities.store_errors import store_outage_is_retryable
from contracts.episodes import (
    PUBLISH_STEP_SAMPLES,
    STEP_VOTE,
    PublishStepsInput,
    PublishStepsResult,
    StepVote,
    StepVoteInput,
    step_sample_id,
)
from contracts.errors import ErrorType
from contracts.learning import JudgeSummary
from contracts.summary import JUDGE_RAW_CHARS, clip
from judges import Judge, JudgeCallError, make_judge
from judges.base import StepJudgeContext, StepView
from openclaw_rl import redis_keys
from openclaw_rl.samples import SampleMeta, TrainingSample, encode_sample
from openclaw_rl.settings import Settings
from openclaw_rl.turn_data import load_turn_tokens
from rlmath.signals import parse_boxed

log = structlog.get_logger(__name__)

STEP_SCORES = frozenset({1, -1})
HISTORY_STEPS = 8
"""Earlier steps shown to the step judge (the most recent ones): enough context, bounded prompt."""

_PUBLISH = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX') == false then return 0 end
redis.call('EXPIRE', KEYS[1], ARGV[8])
redis.call('XADD', KEYS[2], '*', 'id', ARGV[1], 'meta', ARGV[2], 'prompt_ids', ARGV[3], 'response_ids', ARGV[4],
           'rollout_logprobs', ARGV[5], 'advantages', ARGV[6], 'teacher_logprobs', ARGV[7])
return 1
"""


class StepLearningActivities:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.redis = aioredis.from_url(settings.redis.target())
        self._publish = self.redis.register_script(_PUBLISH)
        self._judge: Judge | None = None

    async def aclose(self) -> None:
        if self._judge is not None:
            await self._judge.aclose()
        await self.redis.aclose()

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

    async def _context(self, inp: StepVoteInput) -> StepJudgeContext:
        opening = await episode_data.opening(self.redis, inp.attempt_key)
        instruction = next((m.get("content", "") for m in opening["messages"] if m.get("role") == "user"), "")
        views = [await self._view(inp.attempt_key, t) for t in range(max(0, inp.step - HISTORY_STEPS), inp.step + 1)]
        shots = [v.screenshot for v in views if v.screenshot]
        return StepJudgeContext(
            setting=inp.setting,
            task_instruction=instruction,
            history=views[:-1],
            current=views[-1],
            # gui: the opening state's PNG lies beside the steps' (envs.gui.env.OPENING_SCREENSHOT)
            opening_screenshot=str(Path(shots[0]).with_name("reset.png")) if shots else None,
        )

    async def _view(self, attempt_key: str, step: int) -> StepView:
        act = await episode_data.action(self.redis, attempt_key, step)
        obs = (await episode_data.observation(self.redis, attempt_key, step))["observation"]
        action = act["action"]
        calls = [{"name": c["name"], "arguments": c["arguments"]} for c in action["tool_calls"]]
        results = [
            f"[{r['name']} exit={r['exit_code']}] {r['content']}"
            if r.get("exit_code") is not None
            else f"[{r['name']}] {r['content']}"
            for r in obs["tool_results"]
        ]
        if obs.get("user_message"):
            results.append(f"[user] {obs['user_message']}")
        return StepView(
            turn_idx=step,
            assistant_text=clip(action["text"], JUDGE_RAW_CHARS),
            tool_calls=action["parse_error"]
            and f"parse error: {action['parse_error']}"
            or json.dumps(calls, ensure_ascii=False),
            tool_results=clip("\n".join(results), JUDGE_RAW_CHARS * 2),
            parse_error=action["parse_error"],
            errors=sum(bool(r.get("error")) for r in obs["tool_results"]),
            screenshot=obs.get("screenshot"),
        )

    @activity.defn(name=PUBLISH_STEP_SAMPLES.name)
    @store_outage_is_retryable
    async def publish_step_samples(self, inp: PublishStepsInput) -> PublishStepsResult:
        published = duplicates = missing = 0
        stream = redis_keys.sample_stream(inp.setting)
        for ref in inp.steps:
            tokens = await load_turn_tokens(self.redis, ref.step_id)
            if tokens is None or not tokens.response_ids:
                missing += 1
                continue
            sample_id = step_sample_id(ref.episode_id, ref.step)
            sample = TrainingSample(
                meta=SampleMeta(
                    sample_id=sample_id,
                    source=inp.setting,
                    method="stepwise",
                    user_id="",
                    session_id=ref.episode_id,
                    turn_id=ref.step_id,
                    turn_index=ref.step,
                    policy_version=tokens.weight_version,
                    temperature=tokens.temperature,
                    reward=ref.reward,
                    loss_mask=1,
                    use_teacher=False,
                    reason=f"step {ref.step} of {inp.task_id}, outcome {ref.outcome:g}",
                    judge=JudgeSummary(judge=inp.judge_name, prm_votes=ref.votes),
                ),
                prompt_ids=tokens.prompt_ids,
                response_ids=tokens.response_ids,
                rollout_logprobs=tokens.response_logprobs,
                advantages=[ref.advantage] * len(tokens.response_ids),
            )
            f = encode_sample(sample)
            wrote = await self._publish(
                keys=[redis_keys.sample_published(sample_id), stream],
                args=[
                    sample_id,
                    f["meta"],
                    f["prompt_ids"],
                    f["response_ids"],
                    f["rollout_logprobs"],
                    f["advantages"],
                    f["teacher_logprobs"],
                    self.settings.redis.data_ttl_s,
                ],
            )
            published += int(wrote)
            duplicates += int(not wrote)
            adv_key = redis_keys.episode_advantages(ref.episode_id)
            await self.redis.hset(adv_key, str(ref.step), f"{ref.reward} {ref.advantage}")
            await self.redis.expire(adv_key, self.settings.redis.data_ttl_s)
        if missing:
            log.warning("step samples without token data were skipped", group_id=inp.group_id, missing=missing)
        return PublishStepsResult(published=published, duplicates=duplicates, missing=missing)
