"""Starting a user's canary (contracts.canary) from the publication that proposes a candidate: signal-with-start of
`canary/<pseudonym>`, so a candidate proposed while the user's workflow is running (and about to end, having found
none) is still judged: the signal wakes it."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.common import Priority, WorkflowIDReusePolicy

from contracts.canary import CANARY_WORKFLOW, CANDIDATE_SIGNAL, CanaryInput, canary_workflow_id
from contracts.priorities import Rank, fairness_key
from openclaw_rl.settings import Pool, Settings


def canary_input(settings: Settings, tenant: str) -> CanaryInput:
    c, t = settings.eval.canary, settings.temporal
    return CanaryInput(
        tenant=tenant,
        policy_task_queue=t.task_queue(Pool.POLICY),
        judge_task_queue=t.task_queue(Pool.JUDGE),
        share=c.share, max_turns=c.max_turns, worse=c.worse, alpha=c.alpha, beta=c.beta, wait_s=c.wait_s,
    )  # fmt: skip


async def start_canary(client: Client, settings: Settings, tenant: str, version: int) -> str:
    """Start the user's canary workflow, or tell the running one that candidate `version` was proposed."""
    wf_id = canary_workflow_id(tenant)
    await client.start_workflow(
        CANARY_WORKFLOW,
        canary_input(settings, tenant),
        id=wf_id,
        task_queue=settings.temporal.task_queue(Pool.WORKFLOW),
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        start_signal=CANDIDATE_SIGNAL,
        start_signal_args=[version],
        priority=Priority(priority_key=Rank.EVALUATION, fairness_key=fairness_key(tenant)),
        static_summary=f"canary of adapter v{version}",
    )
    return wf_id
