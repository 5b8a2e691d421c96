"""A user's canary (contracts.canary): each round, the other version answers the turns served since the last round
(`canary_answers`, policy pool), the judge compares candidate and incumbent both ways (`canary_judge`, judge pool);
the workflow's decision is carried out by `canary_decide` (judge pool): the candidate becomes the user's adapter or
is dropped, and the adapter that serves no one any more is unloaded from the policy servers."""

from __future__ import annotations

import asyncio
import time

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from activities.pairwise import PairwiseActivities
from activities.progress import conversation_text
from activities.store_errors import store_outage_is_retryable
from contracts.canary import (
    CANARY_ANSWERS,
    CANARY_DECIDE,
    CANARY_JUDGE,
    DecideInput,
    Decision,
    RoundAnswers,
    RoundInput,
    RoundVerdicts,
)
from contracts.chat import ChatSampling
from contracts.errors import ErrorType
from policy_client.weight_sync import WeightSyncClient
from store.canaries import LoggedTurn

log = structlog.get_logger(__name__)

POLL_S = 1.0


class CanaryActivities(PairwiseActivities):
    # ---- policy pool ------------------------------------------------------------------------------------------
    @activity.defn(name=CANARY_ANSWERS.name)
    @store_outage_is_retryable
    async def canary_answers(self, inp: RoundInput) -> RoundAnswers:
        cand = await self.store.canaries.candidate(inp.tenant)
        if cand is None:
            return RoundAnswers(tenant=inp.tenant, status="no candidate")
        version = cand.ref.version
        cursor = inp.cursor if inp.version == version else 0
        deadline = time.monotonic() + inp.wait_s
        while not (turns := await self.store.canaries.turns(inp.tenant, version, cursor, inp.max_turns)):
            if time.monotonic() >= deadline:
                return RoundAnswers(tenant=inp.tenant, status="judging", version=version, cursor=cursor)
            activity.heartbeat()
            await asyncio.sleep(POLL_S)
        gate = asyncio.Semaphore(self.settings.eval.concurrency)

        async def pair(turn: LoggedTurn) -> tuple[str, dict] | None:
            req = await self.store.requests.load(turn.turn_id)
            served = await self.store.turns.load(turn.turn_id)
            if req is None or served is None:  # expired, or forgotten: nothing to compare
                return None
            other = cand.incumbent if turn.arm == "candidate" else cand.ref
            # Sampled as the served answer was (its temperature and token limit), so neither side is judged for
            # being longer or greedier than the other.
            max_tokens = turn.max_tokens or self.settings.eval.max_tokens
            sampling = ChatSampling(temperature=served.temperature, max_tokens=max_tokens)
            async with gate:
                prompt = await self.rollout.render(req.messages, req.tools)
                params = await self.rollout.params(sampling, len(prompt))
                gen = await self.rollout.generate(prompt, params, tenant=inp.tenant, adapter=other)
            shadow = self.rollout.decode(gen.ids)
            new, old = (served.response_text, shadow) if turn.arm == "candidate" else (shadow, served.response_text)
            return turn.turn_id, {"candidate": new, "incumbent": old, "conversation": conversation_text(req.messages)}

        async with heartbeating(10.0):
            got = await asyncio.gather(*(pair(t) for t in turns))
        pairs = dict(p for p in got if p is not None)
        run = activity.info().workflow_run_id[:12]
        key = await self.store.canaries.put_pairs(inp.tenant, version, run, cursor, pairs) if pairs else ""
        return RoundAnswers(
            tenant=inp.tenant, status="judging", version=version, key=key, cursor=cursor + len(turns), turns=len(pairs)
        )

    # ---- judge pool -------------------------------------------------------------------------------------------
    @activity.defn(name=CANARY_JUDGE.name)
    @store_outage_is_retryable
    async def canary_judge(self, ref: RoundAnswers) -> RoundVerdicts:
        pairs = await self.store.canaries.pairs(ref.key) if ref.key else {}
        if pairs is None:
            raise ApplicationError(
                f"the canary round's answers ({ref.key}) are gone from the store (expired, or the user was forgotten)",
                type=ErrorType.INVALID_REQUEST,
                non_retryable=True,
            )
        async with heartbeating(10.0):
            verdicts = await asyncio.gather(
                *(self.both_orders(p["conversation"], p["candidate"], p["incumbent"]) for p in pairs.values())
            )
        return RoundVerdicts(turn_ids=list(pairs), verdicts=list(verdicts))

    @activity.defn(name=CANARY_DECIDE.name)
    @store_outage_is_retryable
    async def canary_decide(self, inp: DecideInput) -> Decision:
        done = await self.store.canaries.decide(inp.tenant, inp.version, inp.promote)
        if not done.done:
            # A retry after the decision was written, or the user forgotten meanwhile: nothing more to do.
            return Decision(
                tenant=inp.tenant, version=inp.version, verdict="superseded", reason=inp.reason, evidence=inp.evidence
            )
        for gone in (done.loser, done.dropped):
            if gone is None:
                continue
            try:
                async with WeightSyncClient.from_settings(self.settings) as client:
                    await client.unload_lora_adapter(gone.name)
            except Exception as exc:  # decided and written: a server down keeps it loaded, serving no one
                log.warning("could not unload a decided canary's loser", adapter=gone.name, error=str(exc))
        verdict = "promoted" if inp.promote else "rolled back"
        log.info(
            "canary decided", user=inp.tenant, version=inp.version, verdict=verdict, reason=inp.reason,
            next_version=done.next_version,
        )  # fmt: skip
        return Decision(
            tenant=inp.tenant, version=inp.version, verdict=verdict, reason=inp.reason, evidence=inp.evidence,
            next_version=done.next_version,
        )  # fmt: skip
