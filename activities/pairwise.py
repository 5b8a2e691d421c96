"""What the progress report and the canary share: answering users' turns again on the policy pool, and judging two
answers to one conversation in both orders on the judge pool (position bias cancels)."""

from __future__ import annotations

import asyncio

from temporalio.exceptions import ApplicationError

from activities.rollout import Rollout
from contracts.errors import ErrorType
from contracts.progress import Verdicts
from evals import progress
from judges import Judge, JudgeCallError, make_judge
from judges.base import PairwiseContext
from openclaw_rl.settings import Settings
from policy_client import PolicyClient
from store.client import Store


class PairwiseActivities:
    def __init__(self, settings: Settings, policy: bool = False):
        """`policy`: this process answers (the policy pool) and needs a policy client; the judge pool judges."""
        self.settings = settings
        self.store = Store.from_settings(settings)
        self.policy = PolicyClient.from_settings(settings) if policy else None
        self._rollout: Rollout | None = None
        self._judge: Judge | None = None

    @property
    def rollout(self) -> Rollout:
        if self._rollout is None:  # loads the tokenizer: only once answers are asked for
            assert self.policy is not None, "answering runs on the policy pool"
            self._rollout = Rollout(self.settings, self.store, self.policy)
        return self._rollout

    @property
    def judge(self) -> Judge:
        if self._judge is None:
            self._judge = make_judge(self.settings)
        return self._judge

    async def both_orders(self, conversation: str, new: str, old: str) -> Verdicts:
        """The judge's pick with `new` shown first, then second."""
        judge = self.judge
        try:
            first, second = await asyncio.gather(
                judge.pairwise(PairwiseContext(conversation=conversation, answer_a=new, answer_b=old)),
                judge.pairwise(PairwiseContext(conversation=conversation, answer_a=old, answer_b=new)),
            )
        except JudgeCallError as exc:
            raise ApplicationError(str(exc), type=ErrorType.JUDGE_CALL_FAILED) from exc
        return progress.verdicts(progress.parse_preference(first), progress.parse_preference(second))

    async def aclose(self) -> None:
        if self._judge is not None:
            await self._judge.aclose()
        if self.policy is not None:
            await self.policy.aclose()
        await self.store.aclose()
