"""A user's files where they live (contracts.user_files): the trainer pool exports and forgets records/trained.jsonl
and the per-user adapter folders, the judge pool drops the user's lines of its judged-turn mirror. Each holds the
same local locks as the writers of those files (records/.records.lock, checkpoints/.forgotten-adapter-owners.lock),
so a forget never races a line being appended or a checkpoint being written on that host."""

from __future__ import annotations

import asyncio
import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import structlog
from temporalio import activity

from contracts.user_files import (
    EXPORT_USER_FILES,
    FORGET_JUDGEMENT_LINES,
    FORGET_USER_FILES,
    AdapterFolder,
    ExportedUserFiles,
    ForgottenUserFiles,
    TrainedSample,
    UserFilesInput,
    id_digest,
)
from openclaw_rl.adapter_owners import USER_ADAPTERS_DIR, mark_forgotten, owners_lock
from openclaw_rl.settings import Settings
from openclaw_rl.trained_log import TRAINED_LOG, forget_digests, records_lock, rewrite_atomically

log = structlog.get_logger(__name__)


def _json_lines(path: Path) -> list[dict]:
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


def trained_samples(records_dir: Path, inp: UserFilesInput) -> list[TrainedSample]:
    found: dict[str, set[int]] = {}
    for line in _json_lines(records_dir / TRAINED_LOG):
        for sid in line.get("sample_ids", []):
            if inp.owns(sid):
                found.setdefault(sid, set()).add(int(line.get("version", 0)))
    return [TrainedSample(sample_id=sid, versions=sorted(v)) for sid, v in found.items()]


def adapter_folders(settings: Settings, tenant: str) -> list[AdapterFolder]:
    published = settings.data_dir / "adapters" / tenant
    out = []
    for folder in sorted(published.glob("v*"), key=lambda p: int(p.name[1:]) if p.name[1:].isdigit() else -1):
        made = datetime.fromtimestamp(folder.stat().st_mtime, tz=timezone.utc)
        out.append(AdapterFolder(version=folder.name[1:], path=str(folder), created_at=made))
    return out


def forget_trained(records_dir: Path, inp: UserFilesInput) -> int:
    """Their sample ids (those named, and those of theirs trained.jsonl holds) redacted, now and in lines to come."""
    if not records_dir.is_dir():
        return 0
    with records_lock(records_dir, exclusive=True):
        digests = set(inp.sample_digests)
        for line in _json_lines(records_dir / TRAINED_LOG):
            digests |= {id_digest(s) for s in line.get("sample_ids", []) + line.get("stale_ids", []) if inp.owns(s)}
        return forget_digests(records_dir, digests)


def forget_adapters(settings: Settings, tenant: str) -> list[str]:
    """Every published version's folder; then, marked forgotten and removed from every durable checkpoint under the
    lock a checkpoint write holds to its rename: a checkpoint being written now leaves the user out, or is on disk
    when this looks. Returns the versions removed."""
    found = [f.version for f in adapter_folders(settings, tenant)]
    shutil.rmtree(settings.data_dir / "adapters" / tenant, ignore_errors=True)
    checkpoints = settings.checkpoints_dir
    with owners_lock(checkpoints):
        mark_forgotten(checkpoints, tenant)
        for folder in sorted(checkpoints.glob(f"*/{USER_ADAPTERS_DIR}/{tenant}")):
            shutil.rmtree(folder, ignore_errors=True)
    return found


def forget_mirror_lines(records_dir: Path, inp: UserFilesInput) -> int:
    """records/policy-*/*.jsonl: the lines whose `user_id` is the user's dropped (episode steps write none)."""
    if not records_dir.is_dir():
        return 0
    dropped = 0
    with records_lock(records_dir, exclusive=True):
        for path in sorted(records_dir.glob("policy-*/*.jsonl")):
            keep, gone = [], 0
            for raw in path.read_text(encoding="utf-8").splitlines(keepends=True):
                try:
                    user = json.loads(raw).get("user_id")
                    mine = isinstance(user, str) and id_digest(user) == inp.user_digest
                except (ValueError, AttributeError):
                    mine = False
                gone += mine
                if not mine:
                    keep.append(raw)
            if gone:
                rewrite_atomically(path, keep)
                dropped += gone
    return dropped


class TrainerUserFiles:
    """Trainer pool: records/trained.jsonl and the per-user adapter folders are written here."""

    def __init__(self, settings: Settings):
        self.settings = settings

    @activity.defn(name=EXPORT_USER_FILES.name)
    async def export_user_files(self, inp: UserFilesInput) -> ExportedUserFiles:
        def read() -> ExportedUserFiles:
            return ExportedUserFiles(
                trained=trained_samples(self.settings.records_dir, inp),
                adapter_versions=adapter_folders(self.settings, inp.tenant),
            )

        return await asyncio.to_thread(read)

    @activity.defn(name=FORGET_USER_FILES.name)
    async def forget_user_files(self, inp: UserFilesInput) -> ForgottenUserFiles:
        def forget() -> ForgottenUserFiles:
            out = ForgottenUserFiles()
            if inp.records:
                out.trained_lines = forget_trained(self.settings.records_dir, inp)
            if inp.adapters:
                out.adapter_versions = forget_adapters(self.settings, inp.tenant)
            return out

        done = await asyncio.to_thread(forget)
        log.info(
            "user files forgotten",
            user=inp.tenant,
            trained_lines=done.trained_lines,
            adapter_versions=len(done.adapter_versions),
        )
        return done


class JudgementMirrorFiles:
    """Judge pool: the judged-turn mirror is written here (activities.learning)."""

    def __init__(self, settings: Settings):
        self.settings = settings

    @activity.defn(name=FORGET_JUDGEMENT_LINES.name)
    async def forget_judgement_lines(self, inp: UserFilesInput) -> int:
        if not inp.records:
            return 0
        dropped = await asyncio.to_thread(forget_mirror_lines, self.settings.records_dir, inp)
        log.info("judged-turn mirror lines forgotten", user=inp.tenant, lines=dropped)
        return dropped
