"""The API's side of a user's files on other hosts (contracts.user_files): it runs `UserFilesWorkflow` and waits a
while for its answer. Never opens a file of the trainer's or the judges': with no shared disk it could not.

A forget whose pools do not answer in time is not lost: its workflow goes on retrying until they are back, and the
report names it (`ForgetReport.files_pending`). An export that cannot read them says so (`UserExport.incomplete`)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable

import structlog
from temporalio.client import Client
from temporalio.service import RPCError

from contracts.chat import tenant_of
from contracts.user_files import (
    USER_FILES_PREFIX,
    USER_FILES_WORKFLOW,
    ExportedUserFiles,
    ForgottenUserFiles,
    UserFilesInput,
    UserFilesRequest,
    UserFilesResult,
    id_digest,
)
from openclaw_rl.settings import Pool, Settings

log = structlog.get_logger(__name__)

FILES_WAIT_S = 60.0
"""How long a call waits for the trainer and judge pools; once one did not answer in time, the rest of the same
forget waits only FILES_WAIT_AGAIN_S (each still runs to completion later)."""
FILES_WAIT_AGAIN_S = 2.0


class UserFiles:
    def __init__(self, client: Client, settings: Settings):
        self.client, self.settings = client, settings
        self.pending: list[str] = []
        """Forget workflows not done when their call returned (their pools were down): done once they are back."""
        self._slow = False
        self._exported: dict[str, ExportedUserFiles | None] = {}

    @staticmethod
    def request(
        user_id: str, groups: Iterable[str] = (), sample_ids: Iterable[str] = (), **what: bool
    ) -> UserFilesInput:
        """The user as the file owners are told of them: pseudonym and digests, never the id."""
        return UserFilesInput(
            tenant=tenant_of(user_id),
            user_digest=id_digest(user_id),
            group_digests=sorted(id_digest(g) for g in groups),
            sample_digests=sorted(id_digest(s) for s in sample_ids),
            **what,
        )

    async def export(self, user_id: str, groups: Iterable[str] = ()) -> ExportedUserFiles | None:
        """What the trainer's files hold of the user; None when the trainer pool did not answer in time. Asked once
        per user: a second call (the adapter versions after the samples) gets the same answer."""
        if user_id in self._exported:
            return self._exported[user_id]
        inp = self.request(user_id, groups)
        wf_id, result = await self._run("export", inp)
        # Its history holds the user's sample ids: it goes, answered or not (nobody waits for it any more).
        await self._delete(wf_id)
        self._exported[user_id] = result.exported if result is not None else None
        return self._exported[user_id]

    async def forget(
        self, user_id: str, groups: Iterable[str] = (), sample_ids: Iterable[str] = (), **what: bool
    ) -> ForgottenUserFiles | None:
        """The user's lines and folders removed where they live; None when not done yet (`pending`)."""
        wf_id, result = await self._run("forget", self.request(user_id, groups, sample_ids, **what))
        if result is None:
            self.pending.append(wf_id)
            return None
        return result.forgotten

    async def _run(self, action: str, inp: UserFilesInput) -> tuple[str, UserFilesResult | None]:
        t = self.settings.temporal
        req = UserFilesRequest(
            action=action, files=inp, trainer_queue=t.task_queue(Pool.TRAINER), judge_queue=t.task_queue(Pool.JUDGE)
        )
        wf_id = f"{USER_FILES_PREFIX}/{inp.tenant}/{action}-{uuid.uuid4().hex[:12]}"
        handle = await self.client.start_workflow(
            USER_FILES_WORKFLOW, req, id=wf_id, task_queue=t.task_queue(Pool.WORKFLOW), result_type=UserFilesResult
        )
        wait = FILES_WAIT_AGAIN_S if self._slow else FILES_WAIT_S
        try:
            return wf_id, await asyncio.wait_for(handle.result(), wait)
        except asyncio.TimeoutError:
            log.warning("user_data.files_pending", workflow_id=wf_id, wait_s=wait)
            self._slow = True
            return wf_id, None

    async def _delete(self, wf_id: str) -> None:
        from temporalio.api.common.v1 import WorkflowExecution
        from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest

        try:
            await self.client.workflow_service.delete_workflow_execution(
                DeleteWorkflowExecutionRequest(
                    namespace=self.client.namespace, workflow_execution=WorkflowExecution(workflow_id=wf_id)
                )
            )
        except RPCError as exc:
            log.warning("user_data.files_workflow_not_deleted", workflow_id=wf_id, error=str(exc))
