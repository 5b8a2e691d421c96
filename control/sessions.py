"""Sessions: the workflow id of a (user, session), and the SessionWorkflow's input and start operation from
settings."""

from __future__ import annotations

import hashlib
import re

from temporalio.client import Client, WithStartWorkflowOperation, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy

from contracts.learning import LearningPlan, Method
from contracts.session import SessionConfig, SessionInput
from openclaw_rl.search_attributes import SESSION_ID, USER_ID
from openclaw_rl.settings import Pool, Settings
from workflows.session import SessionWorkflow

_SAFE_SESSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")


def session_workflow_id(user_id: str, session_id: str) -> str:
    """Readable and scoped by user: two users with the same session id never share a workflow."""
    sid = session_id if _SAFE_SESSION.match(session_id) else "h-" + hashlib.sha256(session_id.encode()).hexdigest()[:24]
    return f"session/{user_id}/{sid}"


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


def session_start(settings: Settings, user_id: str, session_id: str) -> WithStartWorkflowOperation:
    """The start half of an Update-with-start: the session's workflow, started unless it runs."""
    return WithStartWorkflowOperation(
        SessionWorkflow.run,
        SessionInput(user_id=user_id, session_id=session_id, config=session_config(settings)),
        id=session_workflow_id(user_id, session_id),
        task_queue=settings.temporal.task_queue(Pool.WORKFLOW),
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(USER_ID, user_id), SearchAttributePair(SESSION_ID, session_id)]
        ),
        static_summary=f"chat session {session_id} of {user_id}",
    )


def session_handle(client: Client, user_id: str, session_id: str) -> WorkflowHandle:
    """The session's workflow, whichever run is current."""
    return client.get_workflow_handle(session_workflow_id(user_id, session_id))
