"""UserFilesWorkflow: a user's files exported or forgotten on the hosts that hold them (contracts.user_files).

The API starts it and waits a while for its result; the activities retry until their pool answers, so a forget
asked while the trainer or judge pool is down is carried out once it is back (the forget's report says so)."""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from contracts.user_files import (
        EXPORT_USER_FILES,
        FORGET_JUDGEMENT_LINES,
        FORGET_USER_FILES,
        USER_FILES_WORKFLOW,
        UserFilesRequest,
        UserFilesResult,
    )
    from workflows.activity_calls import execute


@workflow.defn(name=USER_FILES_WORKFLOW)
class UserFilesWorkflow:
    @workflow.run
    async def run(self, req: UserFilesRequest) -> UserFilesResult:
        if req.action == "export":
            exported = await execute(EXPORT_USER_FILES, req.files, task_queue=req.trainer_queue)
            return UserFilesResult(exported=exported)
        forgotten, lines = await asyncio.gather(
            execute(FORGET_USER_FILES, req.files, task_queue=req.trainer_queue),
            execute(FORGET_JUDGEMENT_LINES, req.files, task_queue=req.judge_queue),
        )
        forgotten.record_lines = lines
        return UserFilesResult(forgotten=forgotten)
