"""The documents of a user's data rights: what an export holds, what a forget removed, and the hook through which
per-user adapters are listed and removed (control.user_data)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, Field

from contracts.chat import StoredChatRequest, TurnType
from contracts.learning import JudgementRecord
from contracts.progress import HeldOutTurn, ProgressReport
from control.audit import SessionInfo


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
    held_out_turns: list[HeldOutTurn] = Field(default_factory=list)
    """Turns kept aside from training for their progress report (`eval.progress.held_out_share`)."""
    progress_reports: list[ProgressReport] = Field(default_factory=list)
    """Their progress reports, newest first."""
    incomplete: list[str] = Field(default_factory=list)
    """What could not be read, and why (the trainer pool, which holds records/trained.jsonl and the adapter
    folders, did not answer in time): empty when the export is whole."""


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
    """The embedded Temporal's write-ahead log was checkpointed and truncated (False with a Temporal of its own, one
    whose database file this process cannot see, or one busy)."""
    files_pending: list[str] = Field(default_factory=list)
    """Workflow ids (`user-files/<pseudonym>/forget-...`) of the forgets of the user's files on the trainer's and the
    judges' hosts (records/trained.jsonl, the judged-turn mirror, adapter folders) that were not done when this
    report was written, because a pool was down: they retry until it is back. Their counts are not in this report."""

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
