"""A user's rights over their data: to see what is held about them (`export`), to keep their turns out of training
(`set_opt_out`), and to be forgotten (`forget`). Shared by the REST routes (`/v1/me/...`, the user's own key) and the
CLI (`openclaw-rl users ...`, operators). docs/user-data.md says what is kept where and what a forget leaves.

Where a user's data is found:
- Temporal: their session workflows (search attribute `OpenclawUser`) and the judge workflows of those sessions
  (workflow ids `judge/session/<user>/...`): their histories hold turn summaries, so forget deletes them; the
  client-driven task groups they opened (`/v1/episodes`: `OpenclawUser` too, and the store's index of them) and
  those groups' episodes (`episode/<group>/<k>`), whose histories hold their calls;
- the store: per-turn keys through the user's turn index (store.user_data), keys whose names hold the user id or
  one of their groups' ids (episode data, step token data, model-call requests), their entries in the record and
  sample streams (a step sample's provenance names its group), their API keys and opt-outs;
- files: the judged-turn mirrors records/policy-<version>/<source>.jsonl (lines dropped) and records/trained.jsonl
  (their sample ids redacted);
- per-user adapters: through `UserAdapters` (`control.user_adapters.FileAdapters` in the API and CLI; `NoAdapters`
  when none is given);
- the policy servers: their prefix caches (emptied whole) and the user's loaded adapters.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

import structlog
from pydantic import BaseModel, Field
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from contracts.chat import StoredChatRequest, TurnType
from contracts.client_episodes import END_FORGOTTEN_SIGNAL, client_episode_id
from contracts.episodes import TASK_GROUP_WORKFLOW
from contracts.learning import JudgementRecord
from control.api_keys import USER_ID as USER_ID_FORMAT
from control.audit import SessionInfo, SessionNotFound, list_sessions, session_turns
from openclaw_rl.search_attributes import OUTCOME, SETTING, TASK_ID, USER_ID
from openclaw_rl.settings import Settings
from openclaw_rl.trained_log import TRAINED_LOG, forget_samples, records_lock, rewrite_atomically
from store import keys as store_keys
from store.api_keys import KeyRecord
from store.client import Store
from store.samples import EpisodeStep, PersonalTurn

log = structlog.get_logger(__name__)

WORKFLOW_DELETE_WAIT_S = 90.0
"""How long a forget waits for Temporal to delete the user's workflows (it deletes a closed one asynchronously: about
20 s on the dev server). Whatever is still there after it is deleted by the next forget."""


EPISODE_END_WAIT_S = 60.0
"""How long a forget waits for the user's open episodes to close their environments (workspaces included) after it
told them to end; one still open after it is terminated with the rest, its environment left to the env worker's idle
janitor."""


class UserNotFound(LookupError):
    """Nothing is held about this user (no key, no turn, no session), and they were never forgotten."""


# ---- per-user adapters: the hook -----------------------------------------------------------------------------
class AdapterVersion(BaseModel):
    version: str
    path: str | None = None
    created_at: datetime | None = None


class UserAdapters(Protocol):
    """Per-user LoRA adapters: what export lists and forget removes. Implemented by whoever stores them."""

    async def versions(self, user_id: str) -> list[AdapterVersion]: ...

    async def forget(self, user_id: str) -> int:
        """Remove every version's files and records; returns how many versions went."""
        ...


class NoAdapters:
    """No per-user adapters exist (yet): export lists none, forget removes none."""

    async def versions(self, user_id: str) -> list[AdapterVersion]:
        return []

    async def forget(self, user_id: str) -> int:
        return 0


# ---- the export document -------------------------------------------------------------------------------------
class ExportedKey(BaseModel):
    key_id: str
    created_at: datetime
    revoked_at: datetime | None = None
    opted_out: bool = False
    """This key's turns are kept out of training."""


class ExportedTurn(BaseModel):
    session_id: str | None
    """None for a turn no session lists any more (refused, or its session's log is gone)."""
    index: int | None = None
    turn_id: str
    turn_type: TurnType | None = None
    status: str | None = None
    received_at: datetime | None = None
    request: StoredChatRequest | None = None
    """The messages and tools as the client sent them (None once expired)."""
    response: str | None = None
    """The answer, as decoded (None once expired)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    weight_version: str | None = None
    next_state_status: str | None = None
    judgement: JudgementRecord | None = None
    """Votes, hint, reward and what became of the sample."""
    opted_out: bool = False
    """Sent by an opted-out user or key: served, never a sample."""


class ExportedSample(BaseModel):
    sample_id: str
    source: str
    entry_id: str | None = None
    """Its entry in the sample stream while it waits to be trained (None once trained)."""
    session_id: str | None = None
    turn_id: str | None = None
    turn_index: int | None = None
    policy_version: str | None = None
    reward: float | None = None
    loss_mask: int | None = None
    tokens: int | None = None
    reason: str | None = None
    episode_id: str | None = None
    """A step sample of one of their client-driven episodes: its episode (workflow id) and step."""
    step: int | None = None
    trained_into: list[int] = Field(default_factory=list)
    """Policy versions records/trained.jsonl says it was trained into (empty: not trained yet)."""


class ExportedStep(BaseModel):
    index: int
    action: dict | None = None
    """The assistant message the policy answered with (content, tool calls), as kept (None once expired)."""
    observation: list[dict] | None = None
    """The messages the next call added after it (tool results, the user's reply), as kept."""
    parse_error: str | None = None


class ExportedEpisode(BaseModel):
    """A client-driven episode the user opened (`/v1/episodes`)."""

    id: str
    """The client's name for it (`<group>.<index>`)."""
    workflow_id: str
    group_id: str
    setting: str | None = None
    task_id: str | None = None
    status: str
    started_at: datetime | None = None
    closed_at: datetime | None = None
    outcome: float | None = None
    opening: list[dict] | None = None
    """The first call's messages (the harness's own system prompt and the task), as kept."""
    steps: list[ExportedStep] = Field(default_factory=list)


class UserExport(BaseModel):
    """Everything held about one user."""

    user_id: str
    exported_at: datetime
    opted_out: bool
    """The user opted out of training (all their keys)."""
    api_keys: list[ExportedKey]
    sessions: list[SessionInfo]
    turns: list[ExportedTurn]
    samples: list[ExportedSample]
    """Waiting in a sample stream, or named by records/trained.jsonl as trained (their turns' and their client
    episodes' steps')."""
    episodes: list[ExportedEpisode] = Field(default_factory=list)
    """Their client-driven episodes."""
    adapter_versions: list[AdapterVersion]
    """Per-user adapters (none until per-user adapters exist)."""


class ForgetReport(BaseModel):
    user_id: str
    already_forgotten: bool
    """Forgotten before: this call found (almost always) nothing left to remove."""
    forgotten_at: datetime
    api_keys: int = 0
    workflows: int = 0
    """Session, judge, client task group and client episode workflow executions deleted from Temporal (running ones
    terminated first)."""
    store_keys: int = 0
    """Per-turn keys, prefix links, archived turn logs, flags and markers deleted."""
    samples: int = 0
    """Samples not yet trained, deleted from the sample streams (claimed ones are skipped by the train step)."""
    samples_claimed: int = 0
    """Of those, samples a train step had claimed: it skips them (or, already trained into a version, their ids are
    redacted in records/trained.jsonl)."""
    records: int = 0
    """Entries of the judged-turn record streams deleted."""
    record_lines: int = 0
    """Lines of records/policy-*/*.jsonl deleted."""
    trained_lines: int = 0
    """Lines of records/trained.jsonl whose sample ids were redacted."""
    adapter_versions: int = 0
    """Versions of the user's adapter removed (files, record, the copies loaded on the policy servers)."""
    engine_caches_flushed: bool = False
    """Every policy server emptied its prefix cache, which held the KV of the user's prompts."""
    append_only_file_rewritten: bool = False
    """The store rewrote its append-only file, so the deleted writes are no longer on its disk."""
    temporal_log_truncated: bool = False
    """The embedded Temporal's write-ahead log was checkpointed and truncated (False with a Temporal of its own)."""

    def removed(self) -> int:
        return (
            self.api_keys
            + self.workflows
            + self.store_keys
            + self.samples
            + self.records
            + self.record_lines
            + self.trained_lines
            + self.adapter_versions
        )


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _group_of_sample(sample_id: str) -> str | None:
    """`episode/<group>/<index>#<step>` -> the group (None for a sample of a chat turn)."""
    parts = sample_id.split("/", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "episode" else None


def _user_of_sample(sample_id: str) -> str | None:
    """`session/<user>/<session>@<run>#<turn>` -> the user (None for a sample of an episode)."""
    parts = sample_id.split("/", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "session" else None


class UserData:
    def __init__(self, client: Client, store: Store, settings: Settings, adapters: UserAdapters | None = None):
        self.client = client
        self.store = store
        self.settings = settings
        self.adapters = adapters or NoAdapters()

    # ---- who --------------------------------------------------------------------------------------------------
    async def _keys(self, user_id: str) -> list[KeyRecord]:
        return sorted((k for k in await self.store.api_keys.all() if k.user_id == user_id), key=lambda k: k.created_at)

    async def _groups(self, user_id: str) -> set[str]:
        """The client-driven task groups the user opened: the store's index of them, and those Temporal knows by
        their search attribute (the index may have expired; groups started before either have neither)."""
        found = set(await self.store.users.group_ids(user_id))
        q = f"WorkflowType = {_quote(TASK_GROUP_WORKFLOW)} AND {USER_ID.name} = {_quote(user_id)}"
        async for wf in self.client.list_workflows(q):
            found.add(wf.id.removeprefix("group/"))
        return found

    async def _workflows(self, user_id: str, groups: set[str] = frozenset()) -> list[tuple[str, str]]:
        """(workflow id, run id) of every run of the user's session and judge workflows, and of their client groups
        and those groups' episodes (groups first: their episodes end with them), closed ones too."""
        queries = [
            f"WorkflowType = 'SessionWorkflow' AND {USER_ID.name} = {_quote(user_id)}",
            f"WorkflowId STARTS_WITH {_quote(f'judge/session/{user_id}/')}",
            *(f"WorkflowId = {_quote(f'group/{g}')}" for g in sorted(groups)),
            *(f"WorkflowId STARTS_WITH {_quote(f'episode/{g}/')}" for g in sorted(groups)),
        ]
        out: list[tuple[str, str]] = []
        for q in queries:
            async for wf in self.client.list_workflows(q):
                out.append((wf.id, wf.run_id))
        return out

    async def known(self, user_id: str) -> bool:
        if not USER_ID_FORMAT.match(user_id):
            return False
        if await self._keys(user_id) or await self.store.users.turn_ids(user_id):
            return True
        return bool(await self._groups(user_id) or await self._workflows(user_id))

    # ---- see ----------------------------------------------------------------------------------------------------
    async def export(self, user_id: str) -> UserExport:
        """Everything held about `user_id`; UserNotFound when nothing is."""
        if not await self.known(user_id):
            raise UserNotFound(user_id)
        keys = await self._keys(user_id)
        out_keys = set(await self.store.users.keys_opted_out([k.key_id for k in keys]))
        groups = await self._groups(user_id)
        sessions = await list_sessions(self.client, user_id, limit=10_000)
        turns: list[ExportedTurn] = []
        seen: set[str] = set()
        for s in sessions:
            for t in await self._session_turns(user_id, s.session_id):
                seen.add(t.turn_id)
                turns.append(t)
        for turn_id in await self.store.users.turn_ids(user_id):  # turns no session lists (refused, failed)
            if turn_id not in seen:
                t = await self._fill(ExportedTurn(session_id=None, turn_id=turn_id))
                if t.request is not None or t.response is not None:
                    turns.append(t)
        return UserExport(
            user_id=user_id,
            exported_at=datetime.now(timezone.utc),
            opted_out=await self.store.users.user_opted_out(user_id),
            api_keys=[
                ExportedKey(
                    key_id=k.key_id, created_at=k.created_at, revoked_at=k.revoked_at, opted_out=k.key_id in out_keys
                )
                for k in keys
            ],
            sessions=sessions,
            turns=turns,
            samples=await self._samples(user_id, groups),
            episodes=await self._episodes(groups),
            adapter_versions=await self.adapters.versions(user_id),
        )

    async def _session_turns(self, user_id: str, session_id: str) -> list[ExportedTurn]:
        out: list[ExportedTurn] = []
        offset = 0
        while True:
            try:
                log = await session_turns(self.client, self.store, user_id, session_id, offset, 500)
            except SessionNotFound:
                return out
            for t in log.turns:
                out.append(
                    await self._fill(
                        ExportedTurn(
                            session_id=session_id,
                            index=t.index,
                            turn_id=t.turn_id,
                            turn_type=t.turn_type,
                            status=t.status,
                            received_at=t.received_at,
                            prompt_tokens=t.prompt_tokens,
                            completion_tokens=t.completion_tokens,
                            weight_version=t.weight_version,
                            next_state_status=t.next_state_status,
                            judgement=t.judgement,
                        )
                    )
                )
            offset += 500
            if offset >= log.total:
                return out

    async def _fill(self, t: ExportedTurn) -> ExportedTurn:
        t.request = await self.store.requests.load(t.turn_id)
        t.response = await self.store.turns.response_text(t.turn_id)
        t.opted_out = await self.store.users.turn_opted_out(t.turn_id)
        if t.judgement is None:
            (t.judgement,) = await self.store.judgements.of_turns([t.turn_id])
        return t

    async def _episodes(self, groups: set[str]) -> list[ExportedEpisode]:
        """The client episodes of `groups` Temporal still has, with what the store keeps of their steps."""
        out: list[ExportedEpisode] = []
        for group in sorted(groups):
            async for wf in self.client.list_workflows(f"WorkflowId STARTS_WITH {_quote(f'episode/{group}/')}"):
                index = wf.id.rsplit("/", 1)[-1]
                attrs = wf.typed_search_attributes
                opening, steps = await self.store.episodes.recorded(store_keys.episode_attempt(wf.id, 1))
                out.append(
                    ExportedEpisode(
                        id=client_episode_id(group, int(index)) if index.isdigit() else wf.id,
                        workflow_id=wf.id,
                        group_id=group,
                        setting=attrs.get(SETTING),
                        task_id=attrs.get(TASK_ID),
                        status=wf.status.name.lower() if wf.status else "unknown",
                        started_at=wf.start_time,
                        closed_at=wf.close_time,
                        outcome=attrs.get(OUTCOME),
                        opening=opening.messages if opening else None,
                        steps=[
                            ExportedStep(
                                index=t,
                                action=act.message if act else None,
                                observation=obs.messages if obs else None,
                                parse_error=act.action.parse_error if act else None,
                            )
                            for t, (act, obs) in steps.items()
                        ],
                    )
                )
        return sorted(out, key=lambda e: (e.started_at or datetime.min.replace(tzinfo=timezone.utc), e.id))

    async def _samples(self, user_id: str, groups: set[str]) -> list[ExportedSample]:
        out: list[ExportedSample] = []
        for source in await self.store.samples.sources():
            for entry_id, s in await self.store.samples.entries(source):
                p = s.provenance
                common = dict(
                    sample_id=s.sample_id,
                    source=source,
                    entry_id=entry_id,
                    policy_version=s.policy_version,
                    reward=s.reward,
                    loss_mask=s.loss_mask,
                    tokens=len(s.response_ids),
                )
                if isinstance(p, EpisodeStep) and p.group_id in groups:
                    out.append(ExportedSample(**common, episode_id=p.episode_id, step=p.step))
                elif isinstance(p, PersonalTurn) and p.user_id == user_id:
                    out.append(
                        ExportedSample(
                            **common,
                            session_id=p.session_id,
                            turn_id=p.turn_id,
                            turn_index=p.turn_index,
                            reason=p.reason,
                        )
                    )
        trained: dict[str, list[int]] = {}
        for line in _lines(self.settings.records_dir / TRAINED_LOG):
            for sid in line.get("sample_ids", []):
                if _user_of_sample(sid) == user_id or _group_of_sample(sid) in groups:
                    trained.setdefault(sid, []).append(int(line.get("version", 0)))
        waiting = {s.sample_id: s for s in out}
        for sid, versions in trained.items():
            if sid in waiting:
                waiting[sid].trained_into = sorted(set(versions))
            else:
                out.append(ExportedSample(sample_id=sid, source="", trained_into=sorted(set(versions))))
        return out

    # ---- say no -------------------------------------------------------------------------------------------------
    async def set_opt_out(self, user_id: str, out: bool, key_id: str | None = None) -> list[str]:
        """Opt the user (every key of theirs) out of training, or back in (`out` False); with `key_id`, only that
        key. Returns the user's opted-out key ids after. UserNotFound for an unknown user or a key not theirs."""
        keys = await self._keys(user_id)
        if key_id is not None:
            if key_id not in {k.key_id for k in keys}:
                raise UserNotFound(user_id)
            await self.store.users.set_key_opt_out([key_id], out)
        else:
            if not await self.known(user_id):
                raise UserNotFound(user_id)
            await self.store.users.set_user_opt_out(user_id, out)
        return await self.store.users.keys_opted_out([k.key_id for k in keys])

    async def key_owner(self, key_id: str) -> str | None:
        digest = await self.store.api_keys.digest_of(key_id)
        rec = await self.store.api_keys.by_digest(digest) if digest else None
        return rec.user_id if rec else None

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
        lines, trained = await asyncio.to_thread(self._forget_files, user_id, groups, sample_ids)
        report.record_lines += lines
        report.trained_lines += trained

    def _forget_files(self, user_id: str, groups: set[str], sample_ids: set[str]) -> tuple[int, int]:
        """records/: the user's judged-turn lines dropped, their sample ids (their turns', their client groups'
        steps') in trained.jsonl redacted. Episode steps write no judged-turn lines."""
        root = self.settings.records_dir
        if not root.is_dir():
            return 0, 0
        dropped = 0
        with records_lock(root, exclusive=True):
            for path in sorted(root.glob("policy-*/*.jsonl")):
                keep, gone = [], 0
                for raw in path.read_text(encoding="utf-8").splitlines(keepends=True):
                    try:
                        mine = json.loads(raw).get("user_id") == user_id
                    except (ValueError, AttributeError):
                        mine = False
                    gone += mine
                    if not mine:
                        keep.append(raw)
                if gone:
                    rewrite_atomically(path, keep)
                    dropped += gone
            for line in _lines(root / TRAINED_LOG):
                for sid in line.get("sample_ids", []) + line.get("stale_ids", []):
                    if _user_of_sample(sid) == user_id or _group_of_sample(sid) in groups:
                        sample_ids.add(sid)
            trained = forget_samples(root, sample_ids)
        return dropped, trained

    async def _end_episodes(self, groups: set[str]) -> None:
        """Tell the open episodes of `groups` to end and wait (EPISODE_END_WAIT_S) until they have: each closes its
        environment on its env worker, which removes the task's workspace. Terminating them instead (a delete does)
        would leave the user's files on disk until the env worker's idle janitor."""
        running: list[str] = []
        for group in sorted(groups):
            query = f"WorkflowId STARTS_WITH {_quote(f'episode/{group}/')} AND ExecutionStatus = 'Running'"
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


def _lines(path: Path) -> list[dict]:
    try:
        raw = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in raw:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out
