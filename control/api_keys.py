"""API keys: each bound to a user id, stored only as a peppered hash (store.api_keys).

A key is `ocrl-<key id>-<secret>`; the key id is public (listed, revoked by),
the secret is shown once at creation.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime, timezone

from store.api_keys import ApiKeyRecords, KeyRecord

USER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_KEY = re.compile(r"^ocrl-([0-9a-f]{12})-([A-Za-z0-9_-]{20,})$")

__all__ = ["InvalidUserId", "KeyRecord", "KeyStore", "USER_ID"]


class InvalidUserId(ValueError):
    pass


class KeyStore:
    def __init__(self, records: ApiKeyRecords, pepper: str):
        self.records = records
        self.pepper = pepper.encode()

    def _hash(self, key: str) -> str:
        return hmac.new(self.pepper, key.encode(), hashlib.sha256).hexdigest()

    async def create(self, user_id: str) -> tuple[KeyRecord, str]:
        if not USER_ID.match(user_id):
            raise InvalidUserId(
                f"user id {user_id!r} must be 1-64 characters of letters, digits, '_', '.', '@' or '-', "
                "starting with a letter or digit"
            )
        key_id = secrets.token_hex(6)
        key = f"ocrl-{key_id}-{secrets.token_urlsafe(24)}"
        rec = KeyRecord(key_id=key_id, user_id=user_id, created_at=datetime.now(timezone.utc))
        await self.records.add(self._hash(key), rec)
        return rec, key

    async def lookup(self, key: str) -> KeyRecord | None:
        """The key's record (revoked ones too), or None for a key we never issued."""
        if not _KEY.match(key):
            return None
        return await self.records.by_digest(self._hash(key))

    async def list(self) -> list[KeyRecord]:
        return sorted(await self.records.all(), key=lambda r: r.created_at)

    async def revoke(self, key_id: str) -> KeyRecord | None:
        digest = await self.records.digest_of(key_id)
        if digest is None:
            return None
        rec = await self.records.by_digest(digest)
        if rec is None:
            return None
        if rec.revoked_at is None:
            rec.revoked_at = datetime.now(timezone.utc)
            await self.records.replace(digest, rec)
        return rec
