"""Finding what is held about a user: their keys, their client task groups and every workflow of theirs, and the ids
that name a user or a group inside a sample id (control.user_data)."""

from __future__ import annotations

from temporalio.client import Client

from contracts.canary import canary_workflow_id
from contracts.chat import tenant_of
from contracts.episodes import TASK_GROUP_WORKFLOW
from contracts.progress import report_workflow_id
from contracts.user_files import user_of_sample
from control.api_keys import USER_ID as USER_ID_FORMAT
from control.sessions import quote, user_query
from control.user_data_models import NoAdapters, UserAdapters
from control.user_files import UserFiles
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
        self.files = UserFiles(client, settings)
        """The user's files on the trainer's and the judges' hosts, reached through Temporal (control.user_files)."""
        attach = getattr(self.adapters, "attach", None)
        if attach is not None:
            attach(self.files)

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
        """(workflow id, run id) of every run of the user's session, judge, progress report and canary workflows, and
        of their client groups and those groups' episodes (groups first: their episodes end with them), closed ones too.
        Both forms of id: the pseudonym's, and the user id's of those started before (control.sessions)."""
        queries = [
            f"WorkflowType = 'SessionWorkflow' AND {user_query(user_id)}",
            *(f"WorkflowId STARTS_WITH {quote(f'judge/session/{u}/')}" for u in (tenant_of(user_id), user_id)),
            f"WorkflowId = {quote(report_workflow_id(tenant_of(user_id)))}",  # its summary holds their win rates
            f"WorkflowId = {quote(canary_workflow_id(tenant_of(user_id)))}",  # their candidates' verdicts
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


def is_users_sample(sample_id: str, user_id: str) -> bool:
    """The sample is of a chat turn of `user_id`'s, whichever form of session id names it."""
    return user_of_sample(sample_id) in (tenant_of(user_id), user_id)
