"""A user's rights over their data: to see what is held about them (`export`), to keep their turns out of training
(`set_opt_out`), and to be forgotten (`forget`). Shared by the REST routes (`/v1/me/...`, the user's own key) and the
CLI (`openclaw-rl users ...`, operators). docs/user-data.md says what is kept where and what a forget leaves.

Where a user's data is found:
- Temporal: their session workflows (search attribute `OpenclawUser`: their pseudonym, or their id on sessions
  started before ids were pseudonyms, control.sessions) and the judge workflows of those sessions (workflow ids
  `judge/session/<pseudonym>/...` or `judge/session/<user>/...`): their histories hold turn summaries, so forget
  deletes them; the client-driven task groups they opened (`/v1/episodes`: `OpenclawUser` too, and the store's
  index of them) and those groups' episodes (`episode/<group>/<k>`), whose histories hold their calls;
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

from control.user_data_models import UserNotFound
from control.user_export import UserExporter
from control.user_forget import UserForgetter


class UserData(UserExporter, UserForgetter):
    """A user's rights over their data; built on the lookup of what is held about them (control.user_lookup)."""

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
