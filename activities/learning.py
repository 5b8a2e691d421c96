"""Activities that turn a paired turn into a training sample.

judge pool:  `prm_vote` and `hint` (one vote per call, so votes retry
             independently) and `publish_sample` (advantages, then the sample,
             its record and the audit summary in one atomic Redis step).
policy pool: `teacher_logprobs` (the response scored under the hint-enhanced context), on the frozen teacher
             server when one is configured, else on the policy (traffic through its router).
"""

from __future__ import annotations

import asyncio
import contextlib
import os

import redis.asyncio as aioredis
import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.store_errors import store_outage_is_retryable
from contracts.chat import StoredChatRequest
from contracts.errors import ErrorType
from contracts.learning import (
    HINT_VOTE,
    PRM_VOTE,
    PUBLISH_SAMPLE,
    TEACHER_LOGPROBS,
    JudgementRecord,
    NextState,
    PublishInput,
    PublishResult,
    TeacherInput,
    TeacherResult,
    VoteInput,
    VoteResult,
)
from contracts.summary import JUDGE_RAW_CHARS
from judges import Judge, JudgeCallError, JudgeContext, make_judge
from openclaw_rl import redis_keys
from openclaw_rl.samples import SampleMeta, TrainingSample, encode_sample
from openclaw_rl.settings import Settings
from openclaw_rl.turn_data import TurnTokens, load_floats, load_turn_tokens, save_floats
from policy_client import PolicyClient
from policy_client.chat import message_text, renderer_for
from policy_client.chat_output import split_reasoning
from rlmath.signals import dispatch, parse_boxed, parse_hint_vote, teacher_messages

log = structlog.get_logger(__name__)


def _advantages(
    reward: float, teacher: list[float] | None, old: list[float], w_binary: float, w_opd: float, loss_mask: int
) -> list[float]:
    """The sample's token-level advantages (zeros when the rules mask its loss out).

    torch is imported here, not with the module: the policy pool imports this module for `teacher_logprobs` only
    and starts over a second sooner without it (the judge pool loads it at start, workers/pools.py)."""
    import torch

    from rlmath.advantages import combined_advantages

    adv = combined_advantages(
        reward, torch.tensor(teacher) if teacher is not None else None, torch.tensor(old), w_binary, w_opd
    )
    return (torch.zeros_like(adv) if loss_mask == 0 else adv).tolist()


# Everything a judged turn writes, at once and only once: a retried activity
# or a replayed workflow finds the idempotency key and writes nothing.
_PUBLISH = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[11]) == false then return 0 end
if ARGV[2] == '1' then
  redis.call('XADD', KEYS[2], '*', 'id', ARGV[1], 'meta', ARGV[4], 'prompt_ids', ARGV[5], 'response_ids', ARGV[6],
             'rollout_logprobs', ARGV[7], 'advantages', ARGV[8], 'teacher_logprobs', ARGV[9])
end
redis.call('XADD', KEYS[3], '*', 'id', ARGV[1], 'record', ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[11])  -- the audit copy ages out with the turn's data; the JSONL mirror stays
redis.call('SET', KEYS[4], ARGV[3], 'EX', ARGV[11])
if ARGV[10] == '1' then redis.call('SET', KEYS[5], '1', 'EX', ARGV[11]) end
return 1
"""
_EMPTY_SAMPLE = {
    "prompt_ids": b"",
    "response_ids": b"",
    "rollout_logprobs": b"",
    "advantages": b"",
    "teacher_logprobs": b"",
    "meta": "{}",
}


class LearningActivities:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.redis = aioredis.from_url(settings.redis.target())
        self._publish = self.redis.register_script(_PUBLISH)
        self._judge: Judge | None = None
        self._teacher: PolicyClient | None = None
        teacher = settings.learning.teacher
        # The teacher's own budget per worker process; the policy bounds its own work (engine batch slots).
        self._teacher_slots = (
            asyncio.Semaphore(teacher.max_concurrency) if teacher is not None else contextlib.nullcontext()
        )

    async def aclose(self) -> None:
        if self._judge is not None:
            await self._judge.aclose()
        if self._teacher is not None:
            await self._teacher.aclose()
        await self.redis.aclose()

    # ---- judge pool ---------------------------------------------------------
    @activity.defn(name=PRM_VOTE.name)
    @store_outage_is_retryable
    async def prm_vote(self, inp: VoteInput) -> VoteResult:
        return await self._vote(inp.model_copy(update={"kind": "prm"}))

    @activity.defn(name=HINT_VOTE.name)
    @store_outage_is_retryable
    async def hint(self, inp: VoteInput) -> VoteResult:
        return await self._vote(inp.model_copy(update={"kind": "hint"}))

    async def _vote(self, inp: VoteInput) -> VoteResult:
        if self._judge is None:
            self._judge = make_judge(self.settings)
        ctx = await self._context(inp.turn_id, inp.next_state)
        try:
            raw = await (self._judge.prm(ctx) if inp.kind == "prm" else self._judge.hint(ctx))
        except JudgeCallError as exc:
            raise ApplicationError(str(exc), type=ErrorType.JUDGE_CALL_FAILED) from exc
        if inp.kind == "prm":
            return VoteResult(kind="prm", vote=inp.vote, score=parse_boxed(raw), raw=raw[:JUDGE_RAW_CHARS])
        hv = parse_hint_vote(raw)
        return VoteResult(kind="hint", vote=inp.vote, score=hv.score, hint=hv.hint, raw=raw[:JUDGE_RAW_CHARS])

    async def _context(self, turn_id: str, ns: NextState) -> JudgeContext:
        response = await self.redis.hget(
            redis_keys.turn_data(turn_id), "response_text"
        )  # the judge needs only the text
        if response is None:
            raise ApplicationError(
                f"turn {turn_id} has no token data", type=ErrorType.TURN_DATA_MISSING, non_retryable=True
            )
        later = await self._request(ns.request_key)
        own = await self._request(redis_keys.chat_request(turn_id))
        if not 0 <= ns.message_index < len(later.messages):
            raise ApplicationError(
                f"next state index {ns.message_index} is outside its request",
                type=ErrorType.TURN_DATA_MISSING,
                non_retryable=True,
            )
        previous_user = next(
            (message_text(m.get("content")) for m in reversed(own.messages) if m.get("role") == "user"), ""
        )
        return JudgeContext(
            response=split_reasoning(response.decode())[1],
            next_state_role=ns.role,
            next_state=message_text(later.messages[ns.message_index].get("content")),
            previous_user=previous_user,
        )

    async def _request(self, key: str) -> StoredChatRequest:
        raw = await self.redis.get(key)
        if raw is None:
            raise ApplicationError(f"{key} is gone from Redis", type=ErrorType.TURN_DATA_MISSING, non_retryable=True)
        return StoredChatRequest.model_validate_json(raw)

    async def _tokens(self, turn_id: str) -> TurnTokens:
        tokens = await load_turn_tokens(self.redis, turn_id)
        if tokens is None:
            raise ApplicationError(
                f"turn {turn_id} has no token data", type=ErrorType.TURN_DATA_MISSING, non_retryable=True
            )
        return tokens

    @activity.defn(name=PUBLISH_SAMPLE.name)
    @store_outage_is_retryable
    async def publish_sample(self, inp: PublishInput) -> PublishResult:
        tokens = await self._tokens(inp.turn_id)
        effective = bool(await self.redis.exists(redis_keys.session_effective(inp.session_key)))
        teacher = await load_floats(self.redis, inp.teacher_key) if inp.teacher_key else None
        # A hint counts only with its teacher log-probs (the teacher pass may have failed or expired).
        rule = dispatch(
            inp.method,
            has_next_state=inp.has_next_state,
            eval_score=inp.judge.eval_score,
            hint=inp.judge.hint if teacher is not None else None,
            session_has_effective_sample=effective,
        )
        if rule is None or not rule.use_teacher:
            teacher = None
        result = PublishResult(
            published=False, reason=rule.reason if rule else "dropped by the rules", tokens=len(tokens.response_ids)
        )
        fields = _EMPTY_SAMPLE
        if rule is not None and tokens.response_ids:
            adv = _advantages(rule.reward, teacher, tokens.response_logprobs, inp.w_binary, inp.w_opd, rule.loss_mask)
            fields = encode_sample(
                TrainingSample(
                    meta=SampleMeta(
                        sample_id=inp.sample_id,
                        source=inp.source,
                        method=inp.method.value,
                        user_id=inp.user_id,
                        session_id=inp.session_id,
                        turn_id=inp.turn_id,
                        turn_index=inp.turn_index,
                        policy_version=inp.policy_version,
                        temperature=tokens.temperature,
                        reward=rule.reward,
                        loss_mask=rule.loss_mask,
                        use_teacher=teacher is not None,
                        reason=rule.reason,
                        judge=inp.judge,
                    ),
                    prompt_ids=tokens.prompt_ids,
                    response_ids=tokens.response_ids,
                    rollout_logprobs=tokens.response_logprobs,
                    advantages=adv,
                    teacher_logprobs=teacher,
                )
            )
            result = result.model_copy(
                update=dict(
                    published=True,
                    reward=rule.reward,
                    loss_mask=rule.loss_mask,
                    advantage_mean=sum(adv) / len(adv),
                    advantage_min=min(adv),
                    advantage_max=max(adv),
                )
            )
        record = JudgementRecord(
            sample_id=inp.sample_id,
            user_id=inp.user_id,
            session_id=inp.session_id,
            turn_id=inp.turn_id,
            turn_index=inp.turn_index,
            policy_version=inp.policy_version,
            method=inp.method,
            judge=inp.judge,
            result=result,
        )
        record_json = record.model_dump_json()
        version = inp.policy_version or "unknown"
        effective_now = (
            result.published and result.loss_mask == 1 and rule is not None and (rule.reward != 0 or rule.use_teacher)
        )
        wrote = await self._publish(
            keys=[
                redis_keys.sample_published(inp.sample_id),
                redis_keys.sample_stream(inp.source),
                redis_keys.record_stream(inp.source, version),
                redis_keys.judgement(inp.turn_id),
                redis_keys.session_effective(inp.session_key),
            ],
            args=[
                inp.sample_id,
                "1" if result.published else "0",
                record_json,
                fields["meta"],
                fields["prompt_ids"],
                fields["response_ids"],
                fields["rollout_logprobs"],
                fields["advantages"],
                fields["teacher_logprobs"],
                "1" if effective_now else "0",
                self.settings.redis.data_ttl_s,
            ],
        )
        if not wrote:
            return result.model_copy(update=dict(published=False, duplicate=True))
        self._append_jsonl(inp.source, version, record_json)
        return result

    def _append_jsonl(self, source: str, version: str, record_json: str) -> None:
        """Append the record to records/policy-<version>/<source>.jsonl (kept per version, never wiped).

        The Redis record stream is the complete copy (written atomically with the
        sample); this file is its human-readable mirror, written once the
        stream entry exists.
        """
        folder = self.settings.records_dir / f"policy-{version}"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"{source}.jsonl", "a", encoding="utf-8") as f:
            f.write(record_json + "\n")
            f.flush()
            os.fsync(f.fileno())

    # ---- policy pool --------------------------------------------------------
    @activity.defn(name=TEACHER_LOGPROBS.name)
    @store_outage_is_retryable
    async def teacher_logprobs(self, inp: TeacherInput) -> TeacherResult:
        tokens = await self._tokens(inp.turn_id)
        if not tokens.response_ids:
            raise ApplicationError(
                "the turn has no response tokens to score", type=ErrorType.TURN_DATA_MISSING, non_retryable=True
            )
        req = await self._request(redis_keys.chat_request(inp.turn_id))
        renderer = renderer_for(str(self.settings.tokenizer_path()))
        enhanced = renderer.render(teacher_messages(req.messages, inp.hint), req.tools)
        # Scored at the sampling temperature, so teacher and rollout log-probs compare like with like.
        async with self._teacher_slots:
            lps = await self._teacher_client().score(
                enhanced + tokens.response_ids, len(enhanced), temperature=tokens.temperature or 1.0
            )
        key = redis_keys.teacher_logprobs(inp.turn_id)
        await save_floats(self.redis, key, lps, ttl_s=self.settings.redis.data_ttl_s)
        return TeacherResult(key=key, tokens=len(lps), mean_logprob=sum(lps) / len(lps))

    def _teacher_client(self) -> PolicyClient:
        if self._teacher is None:
            t = self.settings.learning.teacher
            self._teacher = (
                PolicyClient(
                    [t.url],
                    request_timeout_s=t.timeout_s,
                    connect_timeout_s=self.settings.policy.connect_timeout_s,
                    max_attempts=t.max_attempts,
                    backoff_s=self.settings.policy.backoff_s,
                    api_key=t.api_key.get_secret_value(),
                )
                if t is not None
                else PolicyClient.from_settings(self.settings)
            )
        return self._teacher
