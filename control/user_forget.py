"""The right to be forgotten: every workflow, key, sample, record line and adapter of a user removed, twice over for
what was under way (control.user_data; docs/user-data.md says what a forget leaves)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import datetime, timezone

import structlog
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from contracts.chat import tenant_of
from contracts.client_episodes import END_FORGOTTEN_SIGNAL
from control.user_data_models import ForgetReport, UserNotFound
from control.user_lookup import UserLookup, quote
from store import keys as store_keys
from store.samples import EpisodeStep, PersonalTurn

log = structlog.get_logger(__name__)


WORKFLOW_DELETE_WAIT_S = 90.0
"""How long a forget waits for Temporal to delete the user's workflows (it deletes a closed one asynchronously, once it
has saved that the workflow's close task is done: ~4 s on the embedded dev server (stack.services), up to the history
service's ack interval, 30 s by default, on another). Whatever is still there after it is deleted by the next
forget."""


EPISODE_END_WAIT_S = 60.0
"""How long a forget waits for the user's open episodes to close their environments (workspaces included) after it
told them to end; one still open after it is terminated with the rest, its environment left to the env worker's idle
janitor."""


class UserForgetter(UserLookup):
    # ---- be forgotten -------------------------------------------------------------------------------------------
    async def forget(self, user_id: str) -> ForgetReport:
        """Remove everything held about `user_id` (docs/user-data.md); idempotent: a second call finds nothing.
        UserNotFound for a user never known nor forgotten."""
        before = await self.store.users.forgotten_at(user_id)
        if before is None and not await self.known(user_id):
            raise UserNotFound(user_id)
        # The tombstone first: from now on a publication racing this call writes nothing back.
        at = await self.store.users.tombstone(user_id)
        report = ForgetReport(
            user_id=user_id,
            already_forgotten=before is not None,
            forgotten_at=datetime.fromtimestamp(at, timezone.utc),
        )
        keys = await self._keys(user_id)
        report.api_keys = await self.store.api_keys.delete([k.key_id for k in keys])  # no new turn from here on
        await self.store.users.forget_opt_outs(user_id, [k.key_id for k in keys])
        # Found once, before anything goes: the sweeps below delete the store's index of them.
        groups = await self._groups(user_id)
        # Terminated and deleted: no session takes a turn, no judge or group publishes, no episode takes a call,
        # and no history holds a summary.
        deleted: set[tuple[str, str]] = set()
        await self._end_episodes(groups)
        report.workflows = await self._delete_workflows(user_id, groups, deleted)
        await self._sweep(user_id, groups, report)
        report.adapter_versions = await self.adapters.forget(user_id)
        # Work that was under way when the workflows went (an activity finishing its write, a group opened by a
        # request that came in before the key went) is swept up again.
        groups |= await self._groups(user_id)
        await self._end_episodes(groups)
        report.workflows += await self._delete_workflows(user_id, groups, deleted, wait_s=WORKFLOW_DELETE_WAIT_S)
        await self._sweep(user_id, groups, report)
        # Again after the second sweep: an adapter published while the first ran was recorded before the tombstone
        # (a publication after it is refused atomically, store.adapters) and is removed and unloaded here.
        report.adapter_versions += await self.adapters.forget(user_id)
        report.engine_caches_flushed = await self._flush_engines()
        report.append_only_file_rewritten = await self.store.users.rewrite_aof()
        report.temporal_log_truncated = await asyncio.to_thread(self._truncate_temporal_wal)
        report.files_pending = list(self.files.pending)
        if report.files_pending:
            log.warning("user_data.forget_files_pending", workflows=len(report.files_pending))
        return report

    async def _flush_engines(self) -> bool:
        """Empty every policy server's prefix cache (POST /flush_cache): it holds the KV of the user's prompts, and
        the servers have no per-user eviction. True when every server did; a server down lost its cache anyway."""
        from policy_client import PolicyClient, PolicyRequestError, PolicyUnavailableError

        client = PolicyClient.from_settings(self.settings)
        try:
            await client.flush_cache()
            return True
        except (PolicyRequestError, PolicyUnavailableError) as exc:  # the forget goes on; the report says so
            log.warning("user_data.flush_cache_failed", error=str(exc))
            return False
        finally:
            await client.aclose()

    def _truncate_temporal_wal(self) -> bool:
        """The embedded stack's Temporal keeps its histories in one SQLite file (settings.temporal_db), in WAL mode
        with secure_delete (stack.services): the deleted histories' pages are zeroed, but their earlier images stay
        in the write-ahead log until it is checkpointed. Checkpoint and truncate it; True when done (False: no such
        file here, a Temporal of its own, or busy)."""
        import sqlite3

        db = self.settings.temporal_db
        if not db.is_file():
            return False
        try:
            with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return busy == 0
        except sqlite3.Error:
            return False

    async def _sweep(self, user_id: str, groups: set[str], report: ForgetReport) -> None:
        report.store_keys += await self.store.users.forget_turns(user_id)
        report.store_keys += await self.store.users.forget_named(user_id)
        report.store_keys += await self.store.users.forget_groups(user_id, groups)
        report.store_keys += await self.store.progress.forget(tenant_of(user_id))
        report.records += await self.store.users.forget_records(user_id)
        sample_ids: set[str] = set()
        for source in await self.store.samples.sources():
            mine = []
            for entry_id, s in await self.store.samples.entries(source):
                p = s.provenance
                if (isinstance(p, PersonalTurn) and p.user_id == user_id) or (
                    isinstance(p, EpisodeStep) and p.group_id in groups
                ):
                    mine.append(entry_id)
                    sample_ids.add(s.sample_id)
            if mine:
                deleted, claimed = await self.store.samples.forget(source, mine)
                report.samples += deleted
                report.samples_claimed += claimed
                await self.store.users.compact_stream(store_keys.sample_stream(source))
        # records/trained.jsonl on the trainer's host, the judged-turn mirror on the judges' (control.user_files).
        done = await self.files.forget(user_id, groups, sample_ids, records=True)
        if done is not None:
            report.record_lines += done.record_lines
            report.trained_lines += done.trained_lines

    async def _end_episodes(self, groups: set[str]) -> None:
        """Tell the open episodes of `groups` to end and wait (EPISODE_END_WAIT_S) until they have: each closes its
        environment on its env worker, which removes the task's workspace. Terminating them instead (a delete does)
        would leave the user's files on disk until the env worker's idle janitor."""
        running: list[str] = []
        for group in sorted(groups):
            query = f"WorkflowId STARTS_WITH {quote(f'episode/{group}/')} AND ExecutionStatus = 'Running'"
            async for wf in self.client.list_workflows(query):
                try:
                    await self.client.get_workflow_handle(wf.id, run_id=wf.run_id).signal(END_FORGOTTEN_SIGNAL)
                    running.append(wf.id)
                except RPCError as exc:
                    if exc.status != RPCStatusCode.NOT_FOUND:  # closed meanwhile: nothing to end
                        raise
        deadline = time.monotonic() + EPISODE_END_WAIT_S
        while running and time.monotonic() < deadline:
            running = [wf_id for wf_id in running if await self._running(wf_id)]
            if running:
                await asyncio.sleep(0.5)
        if running:
            log.warning("user_data.episodes_still_open", episodes=len(running), wait_s=EPISODE_END_WAIT_S)

    async def _running(self, wf_id: str) -> bool:
        try:
            desc = await self.client.get_workflow_handle(wf_id).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return desc.status == WorkflowExecutionStatus.RUNNING

    async def _delete_workflows(
        self, user_id: str, groups: set[str], done: set[tuple[str, str]], wait_s: float = 0.0
    ) -> int:
        """Delete (Temporal terminates a running one first) every run of the user's workflows (`_workflows`) not
        in `done`; returns how many. Deletion is asynchronous in Temporal and its list lags behind: a run the list
        still shows but Temporal no longer has counts as gone. `wait_s`: then wait up to that long until every run
        deleted is gone."""
        deleted = 0
        for wf_id, run_id in await self._workflows(user_id, groups):
            if (wf_id, run_id) in done or not await self._exists(wf_id, run_id):
                continue
            done.add((wf_id, run_id))
            try:
                await self.client.workflow_service.delete_workflow_execution(
                    DeleteWorkflowExecutionRequest(
                        namespace=self.client.namespace,
                        workflow_execution=WorkflowExecution(workflow_id=wf_id, run_id=run_id),
                    )
                )
                deleted += 1
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
        deadline = time.monotonic() + wait_s
        pending = set(done)
        while pending and time.monotonic() < deadline:
            pending = {wr for wr in pending if await self._exists(*wr)}
            if pending:
                await asyncio.sleep(0.5)
        return deleted

    async def _exists(self, wf_id: str, run_id: str) -> bool:
        try:
            await self.client.get_workflow_handle(wf_id, run_id=run_id).describe()
            return True
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
