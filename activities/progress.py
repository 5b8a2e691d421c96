"""A user's progress report (contracts.progress): the serving version answers the user's held-out turns again on
the policy pool (`progress_answers`), the judge compares each new answer with the one served then, both orders, on
the judge pool (`progress_judge`), and the report is kept in the store. `progress_users` lists who has held-out
turns, for the schedule's rounds.

Answers come through the rollout core, as chat turns do (the user's adapter under per-user adapters, their tenant's
share of the engine), at `eval.temperature` and `eval.max_tokens`; nothing of a report becomes a turn or a sample.
"""

from __future__ import annotations

import asyncio
import time

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from activities.pairwise import PairwiseActivities
from activities.store_errors import store_outage_is_retryable
from contracts.chat import ChatSampling
from contracts.errors import ErrorType
from contracts.progress import (
    PROGRESS_ANSWERS,
    PROGRESS_JUDGE,
    PROGRESS_USERS,
    AnswersRef,
    HeldOutTurn,
    ProgressInput,
    ProgressReport,
    ProgressSummary,
    RoundInput,
    UsersWithHeldOut,
)
from evals import progress
from openclaw_rl.settings import Settings
from policy_client.chat import message_text

log = structlog.get_logger(__name__)

CONVERSATION_CHARS = 6000
"""The judge sees the end of a long conversation: the user's last request and what led to it."""


SYSTEM_CHARS = 1500
"""...and the head of the system prompt, where a client keeps what the user asked for once and for all (OpenClaw's
USER.md): "the way this user asked for" is the judge's question."""


def conversation_text(messages: list[dict]) -> str:
    lines = [f"{m.get('role', '?')}: {message_text(m.get('content'))}" for m in messages]
    text = "\n\n".join(lines)
    if len(text) <= CONVERSATION_CHARS:
        return text
    head = ""
    if messages and messages[0].get("role") == "system":
        head = lines[0] if len(lines[0]) <= SYSTEM_CHARS else lines[0][:SYSTEM_CHARS] + "…"
        head += "\n\n"
    return head + "…" + text[-(CONVERSATION_CHARS - len(head)) :]


class ProgressActivities(PairwiseActivities):
    # ---- policy pool ------------------------------------------------------------------------------------------
    @activity.defn(name=PROGRESS_ANSWERS.name)
    @store_outage_is_retryable
    async def progress_answers(self, inp: ProgressInput) -> AnswersRef:
        tenant = inp.tenant
        held = await self.store.progress.held_out(tenant)
        if not held:
            return AnswersRef(tenant=tenant, skipped=_no_turns(self.settings))
        adapter = None
        if self.settings.training.adapters == "per_user":
            adapter = await self.store.adapters.current(tenant)
            serving = str(adapter.version) if adapter is not None else "0"
        else:
            serving = str(await self.store.policy.served())
        last = await self.store.progress.latest(tenant)
        if not inp.force and last is not None and last.served_version == serving and last.held_out_turns == len(held):
            return AnswersRef(tenant=tenant, version=serving, skipped="nothing new since the last report")
        earlier = [t for t in held if t.version != serving][-inp.max_turns :]
        if not earlier:
            return AnswersRef(
                tenant=tenant,
                version=serving,
                skipped=f"all {len(held)} held-out turns were served by version {serving}, the one serving now: "
                "there is no earlier version to compare with yet",
            )
        sampling = ChatSampling(temperature=self.settings.eval.temperature, max_tokens=self.settings.eval.max_tokens)
        gate = asyncio.Semaphore(self.settings.eval.concurrency)

        async def answer(turn: HeldOutTurn) -> tuple[str, str | None]:
            async with gate:
                prompt = await self.rollout.render(turn.messages, turn.tools)
                params = await self.rollout.params(sampling, len(prompt))
                gen = await self.rollout.generate(prompt, params, tenant=tenant, adapter=adapter)
                return self.rollout.decode(gen.ids), gen.weight_version

        async with heartbeating(10.0):
            got = await asyncio.gather(*(answer(t) for t in earlier))
        # Each answer is the version that wrote it (one that arrived meanwhile, or a server still behind): a turn
        # answered by the version that served it then compares nothing, and is left out.
        pairs = [(t, text, wrote or serving) for t, (text, wrote) in zip(earlier, got)]
        answers = {t.turn_id: text for t, text, wrote in pairs if wrote != t.version}
        if not answers:
            return AnswersRef(
                tenant=tenant,
                version=serving,
                skipped="the policy servers answered with the versions "
                "that served the held-out turns: nothing to compare yet",
            )
        serving = max((w for _, _, w in pairs), key=progress.version_order)
        run = activity.info().workflow_run_id[:12]
        key = await self.store.progress.put_answers(tenant, run, answers)
        return AnswersRef(tenant=tenant, key=key, version=serving, turns=len(answers))

    # ---- judge pool -------------------------------------------------------------------------------------------
    @activity.defn(name=PROGRESS_JUDGE.name)
    @store_outage_is_retryable
    async def progress_judge(self, ref: AnswersRef) -> ProgressSummary:
        answers = await self.store.progress.answers(ref.key)
        if answers is None:
            raise ApplicationError(
                f"the report's answers ({ref.key}) are gone from the store (expired, or the user was forgotten)",
                type=ErrorType.INVALID_REQUEST,
                non_retryable=True,
            )
        held = {t.turn_id: t for t in await self.store.progress.held_out(ref.tenant)}
        turns = [held[tid] for tid in answers if tid in held]  # a turn forgotten meanwhile is left out
        judge = self.judge
        started = time.monotonic()

        async def judged_turn(turn: HeldOutTurn) -> progress.Judged:
            new = answers[turn.turn_id]
            verdicts = await self.both_orders(conversation_text(turn.messages), new, turn.answer)
            return progress.Judged(turn=turn, answer=new, verdicts=verdicts)

        async with heartbeating(10.0):
            judged = await asyncio.gather(*(judged_turn(t) for t in turns))
        cfg = self.settings.eval.progress
        report = ProgressReport(
            tenant=ref.tenant,
            served_version=ref.version or "0",
            at=time.time(),
            judge=judge.name,
            held_out_turns=len(held),
            judged=len(judged),
            comparisons=progress.comparisons(judged),
            changed=progress.changed_turns(judged),
            note=progress.note(len(judged), judge.name),
        )
        kept = await self.store.progress.add_report(report, keep=cfg.keep_reports)
        by = {c.against: c.win_rate for c in report.comparisons}
        log.info(
            "progress report", user=ref.tenant, served=report.served_version, judged=len(judged),
            vs_first=by.get("first"), vs_previous=by.get("previous"), kept=kept,
            seconds=round(time.monotonic() - started, 1),
        )  # fmt: skip
        return ProgressSummary(
            tenant=ref.tenant,
            served_version=report.served_version,
            judged=report.judged,
            win_rate_vs_first=by.get("first"),
            win_rate_vs_previous=by.get("previous"),
            skipped=None if kept else "the user was forgotten meanwhile",
        )

    @activity.defn(name=PROGRESS_USERS.name)
    @store_outage_is_retryable
    async def progress_users(self, inp: RoundInput) -> UsersWithHeldOut:
        tenants = await self.store.progress.tenants_with_held_out()
        names = await self.store.users.names_of(tenants)  # a pseudonym with no name left: forgotten, skipped
        return UsersWithHeldOut(tenants=[t for t in tenants if t in names])


def _no_turns(settings: Settings) -> str:
    if settings.eval.progress.held_out_share <= 0:
        return "no held-out turns: eval.progress.held_out_share is 0 (set it to keep a share of turns for reports)"
    return "no held-out turns yet (a share of judged turns is held out as the user chats)"
