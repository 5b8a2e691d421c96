"""Conversation data encrypted at rest: AES-256-GCM under a keyring of named keys.

Workflow histories hold people's messages (a turn's request, the judge's reasons, hints); the store holds the
same and their token data. With `encryption_keys` set, every Temporal payload goes through `EncryptionCodec`
(the SDK's payload codec: the server, its SQLite file and anyone reading histories without the key see ciphertext)
and the store's user content is sealed with the same keys (`Keyring.seal`, through store/sealing.py). The Web UI
shows payloads through the codec server the API serves (api/codec.py), for an operator with the key.

Rotation: the first key encrypts, every key decrypts; each blob names its key. Add a new key in front, keep the
old ones until nothing written under them is left (histories are retained `temporal.retention`, store data
`redis.data_ttl_s`), then drop them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Sequence

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

MAGIC = b"ocx1"
"""Marks a sealed blob (and its format version)."""
ENCODING = b"binary/encrypted"
KEY_ID_META = "encryption-key-id"
NONCE_BYTES = 12


class KeyringError(ValueError):
    """The keys setting cannot be used (its message says why, never the key)."""


class DecryptError(ValueError):
    """A blob cannot be opened: sealed under a key this keyring lacks, or altered."""


class Keyring:
    """Named AES-256 keys; the first is the one that encrypts."""

    def __init__(self, keys: Sequence[tuple[str, bytes]]):
        if not keys:
            raise KeyringError("no encryption keys")
        self._keys: dict[str, AESGCM] = {}
        self._current_key = keys[0][1]  # for `derive` only
        for key_id, key in keys:
            if not key_id or len(key_id.encode()) > 255 or not key_id.replace("-", "").replace("_", "").isalnum():
                raise KeyringError(f"encryption key id {key_id!r}: use 1-255 letters, digits, '-' or '_'")
            if len(key) != 32:
                raise KeyringError(f"encryption key {key_id!r} is {len(key)} bytes: AES-256 needs 32")
            if key_id in self._keys:
                raise KeyringError(f"encryption key id {key_id!r} appears twice")
            self._keys[key_id] = AESGCM(key)
        self.current = keys[0][0]

    @classmethod
    def parse(cls, value: str) -> Keyring | None:
        """`id:base64key,id:base64key` (the first encrypts); None for an empty setting."""
        value = value.strip()
        if not value:
            return None
        keys = []
        for item in value.split(","):
            key_id, sep, encoded = item.strip().partition(":")
            if not sep:
                raise KeyringError(f"encryption key {key_id[:12]!r}...: expected id:base64key")
            try:
                keys.append((key_id, base64.b64decode(encoded, validate=True)))
            except (binascii.Error, ValueError) as exc:
                raise KeyringError(f"encryption key {key_id!r} is not valid base64") from exc
        return cls(keys)

    @staticmethod
    def new_key() -> str:
        """A fresh random key, base64 (what `openclaw-rl encryption new-key` prints)."""
        return base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()

    @property
    def key_ids(self) -> list[str]:
        return list(self._keys)

    def derive(self, label: str) -> str:
        """A secret for `label` derived from the first key (HMAC-SHA256, hex): every process with the keys derives
        the same, none is stored, and it says nothing of the key. It changes when the first key does."""
        return hmac.new(self._current_key, f"openclaw-rl:{label}".encode(), hashlib.sha256).hexdigest()

    def seal(self, data: bytes, context: bytes = b"") -> bytes:
        """MAGIC | key id length | key id | nonce | ciphertext+tag. `context` is authenticated, not stored (the
        Redis key a value lives under: a value copied under another key does not open)."""
        key_id = self.current.encode()
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._keys[self.current].encrypt(nonce, data, context or None)
        return MAGIC + bytes([len(key_id)]) + key_id + nonce + sealed

    def open(self, blob: bytes, context: bytes = b"") -> bytes:
        if not is_sealed(blob):
            raise DecryptError("not a sealed blob")
        n = blob[len(MAGIC)]
        at = len(MAGIC) + 1
        key_id = blob[at : at + n].decode(errors="replace")
        nonce = blob[at + n : at + n + NONCE_BYTES]
        aead = self._keys.get(key_id)
        if aead is None:
            raise DecryptError(f"sealed under key {key_id!r}, which is not among encryption_keys")
        try:
            return aead.decrypt(nonce, blob[at + n + NONCE_BYTES :], context or None)
        except Exception as exc:  # cryptography's InvalidTag: altered, or another context
            raise DecryptError(f"a blob sealed under key {key_id!r} does not authenticate (altered?)") from exc


def is_sealed(blob: bytes) -> bool:
    return isinstance(blob, (bytes, bytearray)) and bytes(blob[: len(MAGIC)]) == MAGIC


class EncryptionCodec(PayloadCodec):
    """Temporal payloads sealed whole (metadata and data): a history shows only the key id and ciphertext."""

    def __init__(self, keyring: Keyring):
        self.keyring = keyring

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(
                metadata={"encoding": ENCODING, KEY_ID_META: self.keyring.current.encode()},
                data=self.keyring.seal(p.SerializeToString()),
            )
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding") != ENCODING:
                out.append(p)  # written before encryption was turned on
                continue
            out.append(Payload.FromString(self.keyring.open(p.data)))
        return out
