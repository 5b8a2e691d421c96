"""A user's per-user LoRA adapters as their data (control.user_data's `UserAdapters` hook): what export lists and
forget removes. Each published version is a folder `<data dir>/adapters/<tenant>/v<steps>` and durable checkpoints
of per-user training hold the latest under `checkpoints/*/user-adapters/<tenant>`, all on the trainer's host: listed
and removed there by the trainer pool (activities.user_files, through control.user_files). `oc:adapter:<tenant>`
(the store) names the one serving the user, and every policy server has it loaded: both reached over the network."""

from __future__ import annotations

import asyncio

import structlog

from contracts.chat import tenant_of
from control.user_data_models import AdapterVersion
from control.user_files import UserFiles
from openclaw_rl.settings import Settings
from store.client import Store

log = structlog.get_logger(__name__)


class FileAdapters:
    def __init__(self, settings: Settings, store: Store, files: UserFiles | None = None):
        self.settings, self.store, self.files = settings, store, files
        """`files`: the trainer pool's files through Temporal (attached by control.user_lookup); None only where this
        process is on the trainer's host with no Temporal client (tests): the folders are then removed here."""

    def attach(self, files: UserFiles) -> None:
        if self.files is None:
            self.files = files

    async def versions(self, user_id: str) -> list[AdapterVersion]:
        if self.files is None:
            from activities.user_files import adapter_folders

            found = await asyncio.to_thread(adapter_folders, self.settings, tenant_of(user_id))
        else:
            exported = await self.files.export(user_id)
            found = exported.adapter_versions if exported is not None else []
        return [AdapterVersion(version=f.version, path=f.path, created_at=f.created_at) for f in found]

    async def forget(self, user_id: str) -> int:
        """The record, every published version, the copies in durable checkpoints, and every version's loaded copy
        on every policy server (a publication racing the forget may have loaded one the record never named)."""
        tenant = tenant_of(user_id)
        ref = await self.store.adapters.forget(tenant)  # also marks the time: a racing publication is refused
        judged = await self.store.canaries.forget(tenant)  # a candidate and a waiting version (eval.canary)
        if self.files is None:
            from activities.user_files import forget_adapters

            found = await asyncio.to_thread(forget_adapters, self.settings, tenant)
        else:
            done = await self.files.forget(user_id, records=False, adapters=True)
            found = done.adapter_versions if done is not None else []  # pending: removed once the trainer is back
        names = {f"{tenant}-v{v}" for v in found} | ({ref.name} if ref is not None else set())
        names |= {r.name for r in judged}
        if names:
            from policy_client.weight_sync import WeightSyncClient

            try:
                async with WeightSyncClient.from_settings(self.settings) as client:
                    for name in sorted(names):
                        await client.unload_lora_adapter(name)
            except Exception as exc:  # a server down keeps it until it restarts or evicts it: never served again
                log.warning("could not unload a forgotten user's adapter", error=str(exc))
        return len(found)
