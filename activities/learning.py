"""Activities that turn a paired turn into a training sample.

judge pool:  `judge_votes` (a turn's votes in one call, each retried on its own inside), `publish_sample`
             (advantages, then the sample, its record and the audit summary in one atomic Redis step), and
             `judge_and_publish` (the two in one call when no hint is accepted).
policy pool: `teacher_logprobs` (the response scored under the hint-enhanced context), on the frozen teacher
             server when one is configured, else on the policy (traffic through its router).

The sample, its record, the turn's judgement and the session's flag land in one
store step, once (store.samples.SampleStreams.publish_once).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from activities.judgement_log import judgement_line
from activities.store_errors import store_outage_is_retryable
from contracts.chat import StoredChatRequest, tenant_of
from contracts.errors import ErrorType
from contracts.learning import (
    JUDGE_AND_PUBLISH,
    JUDGE_HEARTBEAT,
    JUDGE_VOTES,
    PUBLISH_SAMPLE,
    TEACHER_LOGPROBS,
    JudgeAndPublishInput,
    JudgedSample,
    JudgementRecord,
    NextState,
    PublishInput,
    PublishResult,
    TeacherInput,
    TeacherResult,
    VoteResult,
    Votes,
    VotesInput,
)
from contracts.progress import HeldOutTurn
from contracts.summary import JUDGE_RAW_CHARS
from evals.progress import is_held_out
from judges import Judge, JudgeCallError, JudgeContext, make_judge
from openclaw_rl.settings import Settings
from openclaw_rl.trained_log import records_lock
from policy_client import PolicyClient
from policy_client.chat import message_text, renderer_for
from policy_client.chat_output import split_reasoning
from policy_client.client import PolicyRequestError
from policy_client.weight_sync import WeightSyncClient
from rlmath.advantages import combined_advantages
from rlmath.signals import (
    AT_LEAST_ONE,
    Dispatch,
    dispatch,
    judge_summary,
    parse_boxed,
    parse_hint_vote,
    teacher_messages,
)
from store import keys
from store.adapters import AdapterRef
from store.client import Store
from store.errors import is_passing
from store.judgements import judged_turn_writes
from store.samples import PersonalTurn, TrainingSample
from store.turns import TurnTokens

log = structlog.get_logger(__name__)
VOTE_PHASE_ATTEMPTS = JUDGE_VOTES.retry.maximum_attempts
"""judge_and_publish's tries at its votes before they fail for good (judge_votes' own), a store outage aside."""

OPTED_OUT = "opted out of training"
"""The reason a judged turn of an opted-out user or key carries (its record says so; no sample is written)."""
HELD_OUT = "held out for the user's progress report"
"""The reason a judged turn kept aside from training carries (`eval.progress.held_out_share`; contracts.progress)."""


def _advantages(
    reward: float, teacher: list[float] | None, old: list[float], w_binary: float, w_opd: float, loss_mask: int
) -> list[float]:
    """The sample's token-level advantages (zeros when the rules mask its loss out)."""
    adv = combined_advantages(reward, teacher, old, w_binary, w_opd)
    return [0.0] * len(adv) if loss_mask == 0 else adv


class LearningActivities:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.store = Store.from_settings(settings)
        self._keyring = settings.keyring()
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
        await self.store.aclose()

    # ---- judge pool ---------------------------------------------------------
    async def _ask(self, kind: str, vote: int, ctx: JudgeContext) -> VoteResult:
        if self._judge is None:
            self._judge = make_judge(self.settings)
        raw = await (self._judge.prm(ctx) if kind == "prm" else self._judge.hint(ctx))
        if kind == "prm":
            return VoteResult(kind="prm", vote=vote, score=parse_boxed(raw), raw=raw[:JUDGE_RAW_CHARS])
        hv = parse_hint_vote(raw)
        return VoteResult(kind="hint", vote=vote, score=hv.score, hint=hv.hint, raw=raw[:JUDGE_RAW_CHARS])

    @activity.defn(name=JUDGE_VOTES.name)
    @store_outage_is_retryable
    async def judge_votes(self, inp: VotesInput) -> Votes:
        """Every vote of the turn at once (parallel requests, as the m vote activities were), the turn's context
        read once. A vote that fails or times out is tried again on its own, `attempts` times in all, then counts
        as no vote; the others stand."""
        return await self._votes(inp)

    @activity.defn(name=JUDGE_AND_PUBLISH.name)
    @store_outage_is_retryable
    async def judge_and_publish(self, inp: JudgeAndPublishInput) -> JudgedSample:
        """`judge_votes` then `publish_sample`, when nothing comes between them: no hint accepted. An accepted hint
        is returned unpublished; its teacher pass runs on the policy pool, then `publish_sample`."""
        attempt = activity.info().attempt
        if attempt > 1 and await self.store.samples.was_published(inp.sample.sample_id):
            # An earlier try published it and its answer was lost: asking the judge again would change nothing.
            done = PublishResult(published=False, duplicate=True, reason="published by an earlier try")
            return JudgedSample(judge=inp.sample.judge, result=done)
        no_votes = Votes(prm=[None] * inp.votes.prm, hints=[None] * inp.votes.hints)
        try:
            votes = await self._votes(inp.votes)
        except ApplicationError as exc:
            if exc.type != ErrorType.TURN_DATA_MISSING:
                raise
            # As a judge_votes that failed for good: no votes, and the publish decides (it fails too if the turn's
            # own tokens are gone; a next state's expired request alone leaves a sample judged 0).
            votes = no_votes
        except Exception as exc:
            if is_passing(exc) or attempt < VOTE_PHASE_ATTEMPTS:
                raise  # a store outage is waited out; anything else gets the tries judge_votes had
            # Retried for good it would hold the sample back forever (the publish retries until it lands): the
            # votes fail for good, as judge_votes' did, and the sample is published judged on none.
            log.error("the judge's votes failed on every try; published without votes", turn_id=inp.votes.turn_id,
                      attempts=attempt, error=f"{type(exc).__name__}: {exc}"[:400])  # fmt: skip
            votes = no_votes
        summary = judge_summary(inp.sample.judge.judge, votes.prm, votes.hints)
        if summary.hint is not None:
            return JudgedSample(judge=summary, result=None)
        result = await self._publish(inp.sample.model_copy(update={"judge": summary}))
        return JudgedSample(judge=summary, result=result)

    async def _votes(self, inp: VotesInput) -> Votes:
        asked = [("prm", i) for i in range(inp.prm)] + [("hint", i) for i in range(inp.hints)]
        if await self.store.users.turn_opted_out(inp.turn_id):  # served, never judged: no content goes to a judge
            none = [VoteResult(kind=k, vote=i, score=None, raw="") for k, i in asked]
            return Votes(prm=none[: inp.prm], hints=none[inp.prm :])
        ctx = await self._context(inp.turn_id, inp.next_state)

        async def one(kind: str, vote: int) -> VoteResult | None:
            for attempt in range(inp.attempts):
                try:
                    return await asyncio.wait_for(self._ask(kind, vote, ctx), inp.vote_timeout_s)
                except (JudgeCallError, asyncio.TimeoutError) as exc:
                    log.warning("judge vote failed", turn_id=inp.turn_id, kind=kind, vote=vote, attempt=attempt,
                                error=str(exc) or type(exc).__name__)  # fmt: skip
                    if attempt + 1 < inp.attempts:
                        await asyncio.sleep(min(10.0, 2.0**attempt))
            return None

        async with heartbeating(JUDGE_HEARTBEAT.total_seconds() / 3):
            got = await asyncio.gather(*(one(k, i) for k, i in asked))
        return Votes(prm=list(got[: inp.prm]), hints=list(got[inp.prm :]))

    async def _context(self, turn_id: str, ns: NextState) -> JudgeContext:
        response = await self.store.turns.response_text(turn_id)  # the judge needs only the text
        if response is None:
            raise ApplicationError(
                f"turn {turn_id} has no token data", type=ErrorType.TURN_DATA_MISSING, non_retryable=True
            )
        later = await self._request(ns.request_key)
        own = await self._request(keys.chat_request(turn_id))
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
            response=split_reasoning(response)[1],
            next_state_role=ns.role,
            next_state=message_text(later.messages[ns.message_index].get("content")),
            previous_user=previous_user,
        )

    async def _request(self, key: str) -> StoredChatRequest:
        req = await self.store.requests.load_key(key)
        if req is None:
            raise ApplicationError(
                f"{key} is gone from the store", type=ErrorType.TURN_DATA_MISSING, non_retryable=True
            )
        return req

    async def _tokens(self, turn_id: str) -> TurnTokens:
        tokens = await self.store.turns.load(turn_id)
        if tokens is None:
            raise ApplicationError(
                f"turn {turn_id} has no token data", type=ErrorType.TURN_DATA_MISSING, non_retryable=True
            )
        return tokens

    @activity.defn(name=PUBLISH_SAMPLE.name)
    @store_outage_is_retryable
    async def publish_sample(self, inp: PublishInput) -> PublishResult:
        return await self._publish(inp)

    async def _publish(self, inp: PublishInput) -> PublishResult:
        tokens = await self._tokens(inp.turn_id)
        effective = await self.store.judgements.session_has_effective_sample(inp.session_key)
        teacher = await self.store.turns.teacher_logprobs(inp.teacher_key) if inp.teacher_key else None
        # A hint counts only with its teacher log-probs (the teacher pass may have failed or expired).
        rule = self._rule(inp, teacher, effective)
        opted_out = await self.store.users.training_refused(inp.user_id, inp.turn_id)
        if opted_out:
            rule = None  # the user (or the key that sent the turn) opted out of training: no sample, ever
        held_out = not opted_out and is_held_out(inp.user_id, inp.turn_id, self.settings.eval.progress.held_out_share)
        if held_out:
            # Kept before the record is written: a retry after a crash between the two writes keeps it again, once.
            held_out = await self._hold_out(inp)
            rule = None
        if rule is not None and rule.reason == AT_LEAST_ONE:
            # Two turns of a session judged at once both read "no effective sample yet": one takes the slot.
            ttl = self.settings.redis.data_ttl_s
            if not await self.store.judgements.claim_at_least_one(inp.session_key, inp.sample_id, ttl):
                rule = self._rule(inp, teacher, effective=True)
        if rule is None or not rule.use_teacher:
            teacher = None
        reason = OPTED_OUT if opted_out else HELD_OUT if held_out else rule.reason if rule else "dropped by the rules"
        result = PublishResult(published=False, reason=reason, tokens=len(tokens.response_ids))
        sample = None
        if rule is not None and tokens.response_ids:
            adv = _advantages(rule.reward, teacher, tokens.response_logprobs, inp.w_binary, inp.w_opd, rule.loss_mask)
            sample = personal_sample(inp, tokens, rule, adv, teacher)
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
        # Any sample learned from (loss mask 1) is the session's effective sample, the promoted score-0 one too: the
        # rule promotes one turn per session, as the reference does.
        effective_now = sample is not None and rule.loss_mask == 1
        also = judged_turn_writes(record, inp.source, inp.session_key, effective=effective_now)
        # A user forgotten meanwhile (their tombstone) gets nothing written back (control.user_data).
        guard = keys.forgotten(tenant_of(inp.user_id))
        if not await self.store.samples.publish_once(inp.sample_id, inp.source, sample, also, guard=guard):
            return result.model_copy(update=dict(published=False, duplicate=True))
        # The judge's output and hint are the user's words: sealed like the store's copy when encryption is on.
        self._append_jsonl(inp.source, inp.policy_version or "unknown", judgement_line(record, self._keyring))
        return result

    async def _hold_out(self, inp: PublishInput) -> bool:
        """Keep the turn's prompt and served answer for the user's progress report (contracts.progress)."""
        req = await self._request(keys.chat_request(inp.turn_id))
        response = await self.store.turns.response_text(inp.turn_id) or ""
        turn = HeldOutTurn(
            turn_id=inp.turn_id,
            at=time.time(),
            version=inp.policy_version or "0",
            messages=req.messages,
            tools=req.tools,
            answer=split_reasoning(response)[1],
        )
        keep = self.settings.eval.progress.keep_turns
        return await self.store.progress.hold_out(tenant_of(inp.user_id), turn, keep=keep)

    def _append_jsonl(self, source: str, version: str, record_json: str) -> None:
        """Append the record's line (activities.judgement_log) to records/policy-<version>/<source>.jsonl (kept
        per version, never wiped).

        The Redis record stream is the complete copy (written atomically with the
        sample); this file is its human-readable mirror, written once the
        stream entry exists.
        """
        folder = self.settings.records_dir / f"policy-{version}"
        folder.mkdir(parents=True, exist_ok=True)
        with records_lock(self.settings.records_dir), open(folder / f"{source}.jsonl", "a", encoding="utf-8") as f:
            f.write(record_json + "\n")
            f.flush()
            os.fsync(f.fileno())

    @staticmethod
    def _rule(inp: PublishInput, teacher: list[float] | None, effective: bool) -> Dispatch | None:
        return dispatch(
            inp.method,
            has_next_state=inp.has_next_state,
            eval_score=inp.judge.eval_score,
            hint=inp.judge.hint if teacher is not None else None,
            session_has_effective_sample=effective,
        )

    # ---- policy pool --------------------------------------------------------
    @activity.defn(name=TEACHER_LOGPROBS.name)
    @store_outage_is_retryable
    async def teacher_logprobs(self, inp: TeacherInput) -> TeacherResult:
        tokens = await self._tokens(inp.turn_id)
        if not tokens.response_ids:
            raise ApplicationError(
                "the turn has no response tokens to score", type=ErrorType.TURN_DATA_MISSING, non_retryable=True
            )
        req = await self._request(keys.chat_request(inp.turn_id))
        renderer = renderer_for(str(self.settings.tokenizer_path()))
        enhanced = renderer.render(teacher_messages(req.messages, inp.hint), req.tools)
        adapter = await self._users_adapter(inp.user_id, tokens.weight_version)
        # Scored at the sampling temperature, so teacher and rollout log-probs compare like with like.
        async with self._teacher_slots:
            lps = await self._score_as_teacher(enhanced + tokens.response_ids, len(enhanced), tokens, adapter)
        key = await self.store.turns.save_teacher_logprobs(inp.turn_id, lps)
        return TeacherResult(key=key, tokens=len(lps), mean_logprob=sum(lps) / len(lps))

    async def _users_adapter(self, user_id: str | None, served_version: str | None = None) -> AdapterRef | None:
        """With per-user adapters the teacher is the user's own policy (the paper: the same model re-scores its
        answer under the hint); scored by the base instead, OPD would pull the adapter back towards the base.
        A frozen teacher (`learning.teacher`) stays the base it is. A turn served by the user's candidate version
        (eval.canary) is re-scored by that candidate, the policy that wrote it."""
        if self.settings.training.adapters != "per_user" or not user_id or self.settings.learning.teacher is not None:
            return None
        tenant = tenant_of(user_id)
        if self.settings.eval.canary.enabled and served_version is not None:
            cand = await self.store.canaries.candidate(tenant)
            if cand is not None and str(cand.ref.version) == served_version:
                return cand.ref
        return await self.store.adapters.current(tenant)

    async def _score_as_teacher(
        self, input_ids: list[int], start: int, tokens: TurnTokens, adapter: AdapterRef | None
    ) -> list[float]:
        client, temperature = self._teacher_client(), tokens.temperature or 1.0
        lora = adapter.name if adapter is not None else None
        try:
            return await client.score(input_ids, start, temperature=temperature, lora_path=lora)
        except PolicyRequestError as exc:
            if adapter is None or "is not loaded" not in exc.reason:
                raise
            # A server that lost the adapter (a restart) loads it again from its folder, once, as generation does.
            async with WeightSyncClient.from_settings(self.settings) as sync:
                await sync.load_lora_adapter(adapter.name, adapter.path)
            return await client.score(input_ids, start, temperature=temperature, lora_path=lora)

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


def personal_sample(
    inp: PublishInput, tokens: TurnTokens, rule: Dispatch, advantages: list[float], teacher: list[float] | None
) -> TrainingSample:
    return TrainingSample(
        sample_id=inp.sample_id,
        source=inp.source,
        policy_version=inp.policy_version,
        temperature=tokens.temperature,
        reward=rule.reward,
        loss_mask=rule.loss_mask,
        prompt_ids=tokens.prompt_ids,
        response_ids=tokens.response_ids,
        rollout_logprobs=tokens.response_logprobs,
        advantages=advantages,
        teacher_logprobs=teacher,
        provenance=PersonalTurn(
            method=inp.method.value,
            user_id=inp.user_id,
            session_id=inp.session_id,
            turn_id=inp.turn_id,
            turn_index=inp.turn_index,
            use_teacher=teacher is not None,
            reason=rule.reason,
            judge=inp.judge,
        ),
    )
