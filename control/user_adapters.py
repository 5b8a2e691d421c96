"""A user's per-user LoRA adapters as their data (control.user_data's `UserAdapters` hook): what export lists and
forget removes. Each published version is a folder `<data dir>/adapters/<tenant>/v<steps>`; durable checkpoints
of per-user training hold the latest under `checkpoints/*/user-adapters/<tenant>`; `oc:adapter:<tenant>` names the
one serving the user, and every policy server has it loaded."""

from __future__ import annotations

import asyncio
import shutil
from datetime import datetime, timezone
from pathlib import Path

import structlog

from contracts.chat import tenant_of
from control.user_data_models import AdapterVersion
from openclaw_rl.adapter_owners import USER_ADAPTERS_DIR, mark_forgotten, owners_lock
from openclaw_rl.settings import Settings
from store.client import Store

log = structlog.get_logger(__name__)


class FileAdapters:
    def __init__(self, settings: Settings, store: Store):
        self.settings, self.store = settings, store

    def _folders(self, user_id: str) -> tuple[Path, list[Path]]:
        tenant = tenant_of(user_id)
        published = self.settings.data_dir / "adapters" / tenant
        in_checkpoints = sorted(self.settings.checkpoints_dir.glob(f"*/{USER_ADAPTERS_DIR}/{tenant}"))
        return published, in_checkpoints

    def _forget_in_checkpoints(self, tenant: str) -> None:
        """Marked forgotten, then removed from every durable checkpoint, under the lock a checkpoint write holds to
        its rename: a checkpoint being written now leaves the user out, or is on disk when this looks."""
        checkpoints = self.settings.checkpoints_dir
        with owners_lock(checkpoints):
            mark_forgotten(checkpoints, tenant)
            for folder in sorted(checkpoints.glob(f"*/{USER_ADAPTERS_DIR}/{tenant}")):
                shutil.rmtree(folder, ignore_errors=True)

    async def versions(self, user_id: str) -> list[AdapterVersion]:
        published, _ = self._folders(user_id)
        out = []
        for folder in sorted(published.glob("v*"), key=lambda p: int(p.name[1:]) if p.name[1:].isdigit() else -1):
            made = datetime.fromtimestamp(folder.stat().st_mtime, tz=timezone.utc)
            out.append(AdapterVersion(version=folder.name[1:], path=str(folder), created_at=made))
        return out

    async def forget(self, user_id: str) -> int:
        """The record, every published version, the copies in durable checkpoints, and every version's loaded copy
        on every policy server (a publication racing the forget may have loaded one the record never named)."""
        tenant = tenant_of(user_id)
        published, _ = self._folders(user_id)
        found = await self.versions(user_id)
        ref = await self.store.adapters.forget(tenant)  # also marks the time: a racing publication is refused
        await asyncio.to_thread(shutil.rmtree, published, True)
        await asyncio.to_thread(self._forget_in_checkpoints, tenant)
        names = {f"{tenant}-v{v.version}" for v in found} | ({ref.name} if ref is not None else set())
        if names:
            from policy_client.weight_sync import WeightSyncClient

            try:
                async with WeightSyncClient.from_settings(self.settings) as client:
                    for name in sorted(names):
                        await client.unload_lora_adapter(name)
            except Exception as exc:  # a server down keeps it until it restarts or evicts it: never served again
                log.warning("could not unload a forgotten user's adapter", error=str(exc))
        return len(found)
