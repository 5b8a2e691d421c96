"""User content sealed in Redis with the deployment's encryption keys (openclaw_rl/encryption.py), when it has
any: chat requests as sent, answers' text, idempotency records and archived turn logs. Each value is sealed with
the Redis key it lives under as its context, so a value copied under another key does not open. Without keys
values are written as before; a sealed value read without them is a clear error."""

from __future__ import annotations

from openclaw_rl.encryption import DecryptError, Keyring, is_sealed


class Sealer:
    def __init__(self, keyring: Keyring | None = None):
        self.keyring = keyring

    def seal(self, key: str, value: str | bytes) -> str | bytes:
        if self.keyring is None:
            return value
        data = value.encode() if isinstance(value, str) else value
        return self.keyring.seal(data, context=key.encode())

    def open(self, key: str, raw: bytes | str | None) -> bytes | str | None:
        if raw is None or not is_sealed(raw if isinstance(raw, bytes) else raw.encode(errors="ignore")):
            return raw  # written in the clear (before encryption was turned on, or without keys)
        if self.keyring is None:
            raise DecryptError(f"{key} is encrypted, but this process has no encryption_keys")
        return self.keyring.open(bytes(raw), context=key.encode())
