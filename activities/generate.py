"""The `generate` activity (policy pool): one chat turn's completion from the policy.

The rollout core (activities.rollout) renders the prompt once and keeps the
response's token ids and rollout log-probs exactly as the policy server produced
them. A streaming turn publishes its tokens as they come (activities.token_stream),
which serves two readers: the API relays them to the client, and a retried
attempt (the worker died mid-generation) resumes from them.
"""

from __future__ import annotations

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from activities.rollout import Rollout, RolloutResult
from activities.store_errors import store_failure
from activities.token_stream import StreamCheckpoint, TurnStreams
from contracts.chat import GENERATE, GenerateInput, GenerateOutput
from contracts.errors import ErrorType
from openclaw_rl.settings import Settings
from policy_client import PolicyClient
from policy_client.chat_output import generate_output
from store.adapters import AdapterRef
from store.canaries import LoggedTurn
from store.client import Store
from store.errors import StoreError, StoreFull, is_passing
from store.turns import TurnTokens

log = structlog.get_logger(__name__)

STORAGE_FULL_ATTEMPTS = 4
"""Attempts of a turn whose store refuses writes for lack of room (the retry policy's backoff puts ~1.4 s between
the first and the last): a disk freed meanwhile (a failed checkpoint removed) loses no turn."""


class GenerateActivities:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.store = Store.from_settings(settings)
        self.policy = PolicyClient.from_settings(settings)
        self.rollout = Rollout(settings, self.store, self.policy)
        self.streams = TurnStreams(self.store.streams, flush_s=settings.session.stream_flush_ms / 1000)

    @activity.defn(name=GENERATE.name)
    async def generate(self, inp: GenerateInput) -> GenerateOutput:
        attempt = activity.info().attempt
        try:
            return await self._generate(inp, attempt)
        except StoreError as exc:
            if not is_passing(exc):
                raise
            # Typed, so the API answers 503 with the reason (an untyped failure was a 500). A store that is down is
            # retried like a policy outage (a restart takes seconds); a full one only briefly: it writes again within
            # a second of room coming back, and a full disk that stays full needs an operator, not 90 s of retries
            # (each of which generates the answer again).
            full = isinstance(exc, StoreFull)
            if full:
                log.warning("the store refuses writes for lack of room", turn_id=inp.turn_id, attempt=attempt)
            raise store_failure(exc, non_retryable=full and attempt >= STORAGE_FULL_ATTEMPTS) from exc

    async def _canary_arm(
        self, inp: GenerateInput, current: AdapterRef | None
    ) -> tuple[AdapterRef | None, tuple[int, LoggedTurn] | None]:
        """With a candidate pending for the user: the candidate serves `eval.canary.share` of their turns (every
        k-th turn: never more than the share; a retry takes the arm it took), the incumbent the rest. Returns the
        adapter, and what to log for the judging once the answer is kept (an opted-out turn is never logged: no
        content of it goes to a judge)."""
        cand = await self.store.canaries.candidate(inp.tenant)
        if cand is None:
            return current, None
        share = self.settings.eval.canary.share
        arm = await self.store.canaries.arm(inp.tenant, cand.ref.version, inp.turn_id, share)
        adapter = cand.ref if arm == "candidate" else cand.incumbent
        if await self.store.users.turn_opted_out(inp.turn_id):
            return adapter, None
        logged = LoggedTurn(arm=arm, turn_id=inp.turn_id, max_tokens=inp.sampling.max_tokens)
        return adapter, (cand.ref.version, logged)

    async def _generate(self, inp: GenerateInput, attempt: int) -> GenerateOutput:
        req = await self.store.requests.load(inp.turn_id)
        if req is None:
            raise ApplicationError(
                f"chat request of turn {inp.turn_id} is not in Redis",
                type=ErrorType.REQUEST_MISSING,
                non_retryable=True,
            )
        prompt_ids = await self.rollout.render(req.messages, req.tools)

        # A non-streaming client reads no stream, and a retry of it may start over.
        stream = await self.streams.open(inp.turn_id, attempt, self.rollout.renderer) if inp.stream else None
        done = stream.done if stream else StreamCheckpoint()
        gen = RolloutResult(finish=done.finish or "length")
        adapter, canary_log = None, None
        if self.settings.training.adapters == "per_user" and inp.tenant:  # the user's own adapter serves them
            adapter = await self.store.adapters.current(inp.tenant)
            if self.settings.eval.canary.enabled:
                adapter, canary_log = await self._canary_arm(inp, adapter)
        if not done.finish:
            params = await self.rollout.params(inp.sampling, len(prompt_ids) + len(done.ids))
            async with heartbeating(self.settings.session.generate_heartbeat_s / 3):
                gen = await self.rollout.generate(
                    prompt_ids + done.ids,
                    params,
                    on_tokens=stream.progress if stream else None,
                    tenant=inp.tenant,
                    adapter=adapter,
                )
        if stream:
            await stream.finish(gen.ids, gen.logprobs, gen.finish)

        ids, lps = done.ids + gen.ids, done.lps + gen.logprobs
        text = self.rollout.decode(ids)
        await self.rollout.keep(
            TurnTokens(
                turn_id=inp.turn_id,
                prompt_ids=prompt_ids,
                response_ids=ids,
                response_logprobs=lps,
                weight_version=gen.weight_version,
                finish_reason=gen.finish,
                resumed_at=len(done.ids),
                response_text=text,
                temperature=inp.sampling.temperature,
            ),
        )
        if canary_log is not None:  # logged once answered and kept: the judging reads the answer
            await self.store.canaries.log_turn(inp.tenant, *canary_log)
        if done.ids:
            log.info(
                "generation resumed after a failed attempt",
                turn_id=inp.turn_id,
                attempt=attempt,
                kept_tokens=len(done.ids),
            )
        return generate_output(
            text,
            gen.finish,
            call_id_prefix=inp.turn_id[:12],
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(ids),
            weight_version=gen.weight_version,
            attempt=attempt,
            resumed_at=len(done.ids),
            stop_sequence=gen.stop_sequence,
        )

    async def aclose(self) -> None:
        await self.policy.aclose()
        await self.store.aclose()
