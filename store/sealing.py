"""User content sealed in Redis with the deployment's encryption keys (openclaw_rl/encryption.py), when it has
any: chat requests as sent, answers' text and token ids, token streams, judgements and their record streams,
training samples, idempotency records and archived turn logs. Each value is sealed with the Redis key it lives
under as its context (a stream entry or hash field: the key and the entry's id or field name), so a value copied
elsewhere does not open. Without keys values are written as before; a value written in the clear still reads once
keys are added; a sealed value read without them is a clear error."""

from __future__ import annotations

import struct

from openclaw_rl.encryption import DecryptError, Keyring, is_sealed

_LEN = struct.Struct("<I")


class Sealer:
    def __init__(self, keyring: Keyring | None = None):
        self.keyring = keyring

    @property
    def enabled(self) -> bool:
        return self.keyring is not None

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

    def seal_fields(self, key: str, fields: dict[str, bytes | str]) -> bytes:
        """Several fields as one sealed blob (a stream entry's content): one seal, however many fields."""
        if self.keyring is None:
            raise ValueError("seal_fields needs encryption keys (callers write the fields as they are without)")
        return self.keyring.seal(pack_fields(fields), context=key.encode())

    def open_fields(self, key: str, blob: bytes) -> dict[bytes, bytes]:
        opened = self.open(key, blob)
        if opened is blob:  # not sealed: only `seal_fields` writes these
            raise DecryptError(f"{key}: a sealed entry's content is not a sealed blob")
        return unpack_fields(opened if isinstance(opened, bytes) else opened.encode())


def pack_fields(fields: dict[str, bytes | str]) -> bytes:
    """name/value pairs, each length-prefixed (binary values such as packed arrays travel as they are)."""
    out = bytearray()
    for name, value in fields.items():
        for part in (name.encode(), value.encode() if isinstance(value, str) else value):
            out += _LEN.pack(len(part))
            out += part
    return bytes(out)


def unpack_fields(data: bytes) -> dict[bytes, bytes]:
    parts, at = [], 0
    view = memoryview(data)
    while at < len(data):
        (n,) = _LEN.unpack_from(view, at)
        parts.append(bytes(view[at + 4 : at + 4 + n]))
        at += 4 + n
    return dict(zip(parts[::2], parts[1::2]))
