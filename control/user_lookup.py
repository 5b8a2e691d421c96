"""Finding what is held about a user: their keys, their client task groups and every workflow of theirs, and the ids
that name a user or a group inside a sample id (control.user_data)."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import Client

from contracts.chat import tenant_of
from contracts.episodes import TASK_GROUP_WORKFLOW
from control.api_keys import USER_ID as USER_ID_FORMAT
from control.sessions import quote, user_query
from control.user_data_models import NoAdapters, UserAdapters
from openclaw_rl.settings import Settings
from store.api_keys import KeyRecord
from store.client import Store


class UserLookup:
    """Where a user's data is found (the base of UserData's export and forget)."""

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
        q = f"WorkflowType = {quote(TASK_GROUP_WORKFLOW)} AND {user_query(user_id)}"
        async for wf in self.client.list_workflows(q):
            found.add(wf.id.removeprefix("group/"))
        return found

    async def _workflows(self, user_id: str, groups: set[str] = frozenset()) -> list[tuple[str, str]]:
        """(workflow id, run id) of every run of the user's session and judge workflows, and of their client groups
        and those groups' episodes (groups first: their episodes end with them), closed ones too. Both forms of id:
        the pseudonym's, and the user id's of those started before (control.sessions)."""
        queries = [
            f"WorkflowType = 'SessionWorkflow' AND {user_query(user_id)}",
            *(f"WorkflowId STARTS_WITH {quote(f'judge/session/{u}/')}" for u in (tenant_of(user_id), user_id)),
            *(f"WorkflowId = {quote(f'group/{g}')}" for g in sorted(groups)),
            *(f"WorkflowId STARTS_WITH {quote(f'episode/{g}/')}" for g in sorted(groups)),
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


def group_of_sample(sample_id: str) -> str | None:
    """`episode/<group>/<index>#<step>` -> the group (None for a sample of a chat turn)."""
    parts = sample_id.split("/", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "episode" else None


def user_of_sample(sample_id: str) -> str | None:
    """`session/<pseudonym>/<session>@<run>#<turn>` -> the user's pseudonym, or their id in a sample of a session
    started before ids were pseudonyms (None for a sample of an episode)."""
    parts = sample_id.split("/", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "session" else None


def is_users_sample(sample_id: str, user_id: str) -> bool:
    """The sample is of a chat turn of `user_id`'s, whichever form of session id names it."""
    return user_of_sample(sample_id) in (tenant_of(user_id), user_id)


def json_lines(path: Path) -> list[dict]:
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
