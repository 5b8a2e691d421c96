"""A user's files on the hosts that write them, exported or forgotten there (no shared disk: the API reaches them
through Temporal, `UserFilesWorkflow`, never by opening them).

- trainer pool: records/trained.jsonl and records/forgotten-samples.txt, the per-user adapter folders
  (`<data dir>/adapters/<tenant>/v<steps>`, `checkpoints/*/user-adapters/<tenant>`) and
  checkpoints/forgotten-adapter-owners;
- judge pool: the judged-turn mirror records/policy-<version>/<source>.jsonl.

Inputs name the user by their tenant pseudonym and by digests only: a workflow's history must not hold a user id
(a forget leaves none in Temporal's database)."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from contracts.activity import ActivityDef, Retry

USER_FILES_WORKFLOW = "UserFilesWorkflow"
USER_FILES_PREFIX = "user-files"
"""Workflow ids: `user-files/<tenant>/<action>-<nonce>`."""


def id_digest(value: str) -> str:
    """How a user id, a group id or a sample id travels to the file owners (records/trained.jsonl's digest too)."""
    return hashlib.sha256(value.encode()).hexdigest()[:32]


def group_of_sample(sample_id: str) -> str | None:
    """`episode/<group>/<index>#<step>` -> the group (None for a sample of a chat turn)."""
    parts = sample_id.split("/", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "episode" else None


def user_of_sample(sample_id: str) -> str | None:
    """`session/<pseudonym>/<session>@<run>#<turn>` -> the user's pseudonym, or their id in a sample of a session
    started before ids were pseudonyms (None for a sample of an episode)."""
    parts = sample_id.split("/", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "session" else None


class UserFilesInput(BaseModel):
    tenant: str
    """The user's pseudonym (contracts.chat.tenant_of)."""
    user_digest: str
    """`id_digest` of the user id: the judged-turn mirror's `user_id`, and sample ids of sessions started before ids
    were pseudonyms."""
    group_digests: list[str] = Field(default_factory=list)
    """Their client task groups' ids, digested: those groups' episode steps' samples are theirs."""
    sample_digests: list[str] = Field(default_factory=list)
    """Sample ids found in the store as theirs, digested (redacted in trained.jsonl now and in lines to come)."""
    records: bool = True
    """Forget: redact trained.jsonl, drop the mirror's lines."""
    adapters: bool = False
    """Forget: remove the per-user adapter folders (published and in durable checkpoints)."""

    def owns(self, sample_id: str) -> bool:
        user = user_of_sample(sample_id)
        if user is not None:
            return user == self.tenant or id_digest(user) == self.user_digest
        group = group_of_sample(sample_id)
        return group is not None and id_digest(group) in self.group_digests


class TrainedSample(BaseModel):
    sample_id: str
    versions: list[int]


class AdapterFolder(BaseModel):
    version: str
    path: str
    """On the trainer's host."""
    created_at: datetime


class ExportedUserFiles(BaseModel):
    trained: list[TrainedSample] = Field(default_factory=list)
    """Their samples records/trained.jsonl names, with the versions each went into."""
    adapter_versions: list[AdapterFolder] = Field(default_factory=list)


class ForgottenUserFiles(BaseModel):
    trained_lines: int = 0
    adapter_versions: list[str] = Field(default_factory=list)
    """The versions of their adapter whose folders were removed."""
    record_lines: int = 0
    """Lines of the judged-turn mirror dropped (judge pool)."""


class UserFilesRequest(BaseModel):
    action: Literal["export", "forget"]
    files: UserFilesInput
    trainer_queue: str
    judge_queue: str


class UserFilesResult(BaseModel):
    exported: ExportedUserFiles | None = None
    forgotten: ForgottenUserFiles | None = None


# Kept trying until the pool that holds the files is back: a forget asked while it is down is not lost.
_UNTIL_DONE = Retry(maximum_interval=timedelta(seconds=30))
EXPORT_USER_FILES = ActivityDef(
    "export_user_files", UserFilesInput, ExportedUserFiles, start_to_close=timedelta(minutes=5), retry=_UNTIL_DONE
)
"""Trainer pool: what records/trained.jsonl and the adapter folders hold of the user."""
FORGET_USER_FILES = ActivityDef(
    "forget_user_files", UserFilesInput, ForgottenUserFiles, start_to_close=timedelta(minutes=10), retry=_UNTIL_DONE
)
"""Trainer pool: the user's sample ids redacted in records/trained.jsonl, their adapter folders removed."""
FORGET_JUDGEMENT_LINES = ActivityDef(
    "forget_judgement_lines", UserFilesInput, int, start_to_close=timedelta(minutes=10), retry=_UNTIL_DONE
)
"""Judge pool: the user's lines of the judged-turn mirror dropped; returns how many."""
