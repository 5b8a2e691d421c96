"""Sessions: the workflow id of a (user, session), and the SessionWorkflow's input and start operation from
settings.

Workflow ids and the `OpenclawUser` search attribute name the user by pseudonym (`contracts.chat.tenant_of`), as
the store's keys do: Temporal's own records (task queues, the server's and the SDK's log lines, the training
history's sample ids) then name no one once the user is forgotten and their pseudonym's name record is gone
(docs/user-data.md). Sessions started before that carry the user id (`legacy_session_workflow_id`): one still
running keeps its id until it closes, so every way to a session asks for both.
"""

from __future__ import annotations

import hashlib
import re

from temporalio.client import Client, WithStartWorkflowOperation, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import Priority, SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from contracts.chat import tenant_of
from contracts.learning import LearningPlan, Method
from contracts.priorities import Rank, fairness_key
from contracts.session import SessionConfig, SessionInput
from openclaw_rl.search_attributes import SESSION_ID, USER_ID
from openclaw_rl.settings import Pool, Settings
from workflows.session import SessionWorkflow

_SAFE_SESSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")


def _sid(session_id: str) -> str:
    """The session id as it is when it is a safe one, else a digest of it."""
    if _SAFE_SESSION.match(session_id):
        return session_id
    return "h-" + hashlib.sha256(session_id.encode()).hexdigest()[:24]


def session_workflow_id(user_id: str, session_id: str) -> str:
    """Scoped by user, named by their pseudonym: two users with the same session id never share a workflow, and the
    id names no one once the user is forgotten."""
    return f"session/{tenant_of(user_id)}/{_sid(session_id)}"


def legacy_session_workflow_id(user_id: str, session_id: str) -> str:
    """The id sessions had before ids were pseudonyms: one still running keeps it until it closes."""
    return f"session/{user_id}/{_sid(session_id)}"


def user_query(user_id: str) -> str:
    """A visibility filter on the user's workflows: `OpenclawUser` is the pseudonym on new ones, the user id on
    those started before (kept until the namespace's retention has passed over them)."""
    return f"{USER_ID.name} IN ({quote(tenant_of(user_id))}, {quote(user_id)})"


def quote(value: str) -> str:
    """A string literal of Temporal's visibility query language."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


async def _status(client: Client, wf_id: str) -> WorkflowExecutionStatus | None:
    """The status of the workflow's latest run; None when there is none."""
    try:
        desc = await client.get_workflow_handle(wf_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return desc.status


async def running_legacy_session(client: Client, user_id: str, session_id: str) -> str | None:
    """The session's old-form workflow id while a run of it is running (a turn goes there, not to a new workflow)."""
    wf_id = legacy_session_workflow_id(user_id, session_id)
    return wf_id if await _status(client, wf_id) == WorkflowExecutionStatus.RUNNING else None


async def find_session(client: Client, user_id: str, session_id: str) -> str:
    """The workflow id the session lives under: a running old-form one, else the new form when it exists, else an
    old-form one that has closed, else the new form (which then does not exist)."""
    if legacy := await running_legacy_session(client, user_id, session_id):
        return legacy
    new = session_workflow_id(user_id, session_id)
    if await _status(client, new) is not None:
        return new
    legacy = legacy_session_workflow_id(user_id, session_id)
    return legacy if await _status(client, legacy) is not None else new


def learning_plan(settings: Settings) -> LearningPlan:
    ln, t = settings.learning, settings.temporal
    return LearningPlan(
        method=Method(ln.method),
        prm_votes=ln.votes_for_prm(),
        hint_votes=ln.hint_votes,
        judge_name=settings.judge().type,
        w_binary=ln.w_binary,
        w_opd=ln.w_opd,
        source=ln.source,
        judge_task_queue=t.task_queue(Pool.JUDGE),
        policy_task_queue=t.task_queue(Pool.POLICY),
        vote_timeout_s=ln.vote_timeout_s,
        judge_and_publish=True,
    )


def session_config(settings: Settings) -> SessionConfig:
    s, t = settings.session, settings.temporal
    return SessionConfig(
        policy_task_queue=t.task_queue(Pool.POLICY),
        workflow_task_queue=t.task_queue(Pool.WORKFLOW),
        idle_timeout_s=s.idle_timeout_s,
        turns_per_run=s.turns_per_run,
        generate_heartbeat_s=s.generate_heartbeat_s,
        generate_timeout_s=s.generate_timeout_s,
        learning=learning_plan(settings) if settings.learning.enabled else None,
    )


def session_priority(settings: Settings, user_id: str) -> Priority:
    """Chat first (contracts.priorities), and each user a fair share of the queues: the fairness key is the user's
    pseudonym (the OpenclawUser search attribute's value); the session's generate calls and judge children inherit
    it. With `temporal.fairness.enabled` off, every session shares one key (first come, first served)."""
    fair = settings.temporal.fairness
    if not fair.enabled:
        return Priority(priority_key=Rank.CHAT)
    tenant = tenant_of(user_id)
    return Priority(
        priority_key=Rank.CHAT, fairness_key=fairness_key(tenant), fairness_weight=fair.weight_of(user_id, tenant)
    )


def session_start(settings: Settings, user_id: str, session_id: str) -> WithStartWorkflowOperation:
    """The start half of an Update-with-start: the session's workflow, started unless it runs."""
    return WithStartWorkflowOperation(
        SessionWorkflow.run,
        SessionInput(user_id=user_id, session_id=session_id, config=session_config(settings)),
        id=session_workflow_id(user_id, session_id),
        task_queue=settings.temporal.task_queue(Pool.WORKFLOW),
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(USER_ID, tenant_of(user_id)), SearchAttributePair(SESSION_ID, session_id)]
        ),
        static_summary=f"chat session {session_id} of {tenant_of(user_id)}",
        priority=session_priority(settings, user_id),
    )


async def session_handle(client: Client, user_id: str, session_id: str) -> WorkflowHandle:
    """The session's workflow (`find_session`), whichever run is current."""
    return client.get_workflow_handle(await find_session(client, user_id, session_id))
