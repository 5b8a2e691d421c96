"""A user's files are forgotten where they live, through UserFilesWorkflow: a forget asked while the trainer pool is
down is reported pending, not lost, and carried out once the pool is back (contracts.user_files)."""

from __future__ import annotations

import json
import uuid

from temporalio.worker import Worker

import control.user_files as user_files
from activities.user_files import JudgementMirrorFiles, TrainerUserFiles
from contracts.chat import tenant_of
from contracts.user_files import UserFilesResult
from control.user_files import UserFiles
from openclaw_rl.settings import Pool, Settings
from openclaw_rl.trained_log import TRAINED_LOG, record_step
from tests.workflows.mocks import fresh_env
from workflows.user_files import UserFilesWorkflow


async def test_a_forget_while_the_trainer_pool_is_down_is_pending_then_done_once_it_is_back(tmp_path, monkeypatch):
    settings = Settings(data_dir=tmp_path / "data", temporal={"task_queue_prefix": f"t-{uuid.uuid4().hex[:8]}"})
    records = settings.records_dir
    mine, other = f"session/{tenant_of('ann')}/s@r#0", f"session/{tenant_of('bob')}/s@r#1"
    record_step(records, 1, 0, "b1", [mine, other], [])
    (records / "policy-1").mkdir(parents=True)
    mirror = records / "policy-1" / "personal.jsonl"
    mirror.write_text(json.dumps({"user_id": "ann", "x": 1}) + "\n" + json.dumps({"user_id": "bob", "x": 2}) + "\n")
    monkeypatch.setattr(user_files, "FILES_WAIT_S", 1.0)
    q = settings.temporal.task_queue
    async with fresh_env() as env:
        workflows = Worker(env.client, task_queue=q(Pool.WORKFLOW), workflows=[UserFilesWorkflow])
        judge = Worker(
            env.client, task_queue=q(Pool.JUDGE), activities=[JudgementMirrorFiles(settings).forget_judgement_lines]
        )
        async with workflows, judge:
            files = UserFiles(env.client, settings)
            assert await files.forget("ann", sample_ids=[mine]) is None  # no trainer pool
            assert len(files.pending) == 1 and files.pending[0].startswith(f"user-files/{tenant_of('ann')}/forget-")
            assert mine in (records / TRAINED_LOG).read_text()
            trainer = TrainerUserFiles(settings)
            async with Worker(
                env.client,
                task_queue=q(Pool.TRAINER),
                activities=[trainer.export_user_files, trainer.forget_user_files],
            ):
                handle = env.client.get_workflow_handle(files.pending[0], result_type=UserFilesResult)
                done = (await handle.result()).forgotten
    assert done.trained_lines == 1 and done.record_lines == 1
    text = (records / TRAINED_LOG).read_text()
    assert tenant_of("ann") not in text and other in text
    assert [json.loads(x)["user_id"] for x in mirror.read_text().splitlines()] == ["bob"]
