"""The codec server the Temporal Web UI calls to show encrypted payloads (Temporal's remote-codec protocol:
POST {endpoint}/decode and /encode with `{"payloads": [...]}` in protobuf JSON), served only when encryption at
rest is on. Answering is decrypting people's conversations, so every request must pass, in this order:

- the peer: this machine only (403);
- its Host name, port aside, among `api.codec_hosts` (403): a page whose DNS name was rebound to 127.0.0.1 sends
  its own name, so it reads nothing even from this machine;
- its Origin, when it has one (browsers do), among the allowed origins (`Settings.codec_origins`; 403): another
  page in the operator's browser reads nothing;
- the codec token (`Settings.codec_token`; 401 without it, 403 when wrong), as `Authorization: Bearer <token>`
  (the Temporal CLI's `--codec-auth`) or in the path, `/codec/<token>/decode` (the endpoint `up` gives the
  embedded Web UI, which appends /decode and sends no header of its own);
- a body of Temporal payloads: anything else is a 4xx with a reason (400 not JSON or cut short, 422 not an
  object, 400 the wrong shape, 413 over api.max_request_bytes), never decoded.

The payloads to decode come from Temporal, so reading one still needs access to Temporal.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from temporalio.api.common.v1 import Payload, Payloads

from api.errors import ApiError
from api.request_body import read_json
from openclaw_rl.encryption import DecryptError, EncryptionCodec

router = APIRouter(prefix="/codec", include_in_schema=False)


def _bytes(value: Any) -> bytes:
    """Protobuf JSON's bytes: base64, standard or URL-safe, padding optional."""
    if not isinstance(value, str):
        raise ValueError("expected a base64 string")
    try:
        standard = value.replace("-", "+").replace("_", "/")
        return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not base64 ({exc})") from None


class CodecPayload(BaseModel):
    """One Temporal payload as protobuf JSON writes it (bytes as base64)."""

    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, bytes] = Field(default_factory=dict)
    data: bytes = b""

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError("expected an object of base64 strings")
        return {k: _bytes(v) for k, v in value.items()}

    @field_validator("data", mode="before")
    @classmethod
    def _data(cls, value: Any) -> bytes:
        return _bytes(value)


class CodecRequest(BaseModel):
    """What the Web UI and the CLI send: `{"payloads": [...]}`."""

    model_config = ConfigDict(extra="forbid")

    payloads: list[CodecPayload]

    def to_protos(self) -> list[Payload]:
        return [Payload(metadata=p.metadata, data=p.data) for p in self.payloads]


def _peer_is_local(request: Request) -> bool:
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a Unix socket or a name: not known to be this machine


def _host_name(header: str) -> str:
    """The Host header's name, its port and an IPv6 literal's brackets aside, lower case."""
    return (urlsplit(f"//{header}").hostname or "").lower()


def _token_sent(request: Request, path_token: str | None) -> str | None:
    if path_token is not None:
        return path_token
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _codec(request: Request, path_token: str | None = None) -> EncryptionCodec:
    settings = request.app.state.settings
    keyring = settings.keyring()
    if keyring is None:
        raise ApiError(404, "encryption at rest is off (encryption_keys is empty): there is nothing to decode")
    if not _peer_is_local(request):
        raise ApiError(403, "the codec server answers only on this machine (it decrypts conversations)")
    host = _host_name(request.headers.get("host", ""))
    if host not in {h.lower().strip("[]") for h in settings.api.codec_hosts}:
        raise ApiError(
            403,
            f"the codec server does not answer to the host name {host!r} (api.codec_hosts): a name rebound to this "
            "machine is not one of its own",
            code="codec_host_refused",
        )
    origin = request.headers.get("origin")
    if origin is not None and origin.rstrip("/") not in settings.codec_origins():
        raise ApiError(
            403, f"the codec server does not answer pages from {origin!r} (api.codec_origins)", code="codec_origin"
        )
    sent = _token_sent(request, path_token)
    if sent is None:
        raise ApiError(
            401,
            "the codec server needs its token: 'Authorization: Bearer <token>' or the path /codec/<token>/ "
            "(openclaw-rl encryption codec-token prints it)",
            code="codec_token_missing",
        )
    if not hmac.compare_digest(sent.encode(), settings.codec_token().encode()):
        raise ApiError(403, "wrong codec token", code="codec_token_wrong")
    return EncryptionCodec(keyring)


async def _payloads(request: Request) -> list[Payload]:
    body = await read_json(request, request.app.state.settings.api.max_request_bytes)  # 400/413/422, with reasons
    try:
        return CodecRequest.model_validate(body).to_protos()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise ApiError(
            400, f"expected Temporal payloads as protobuf JSON: {where}: {first['msg']}", param=where
        ) from None


def _answer(payloads: list) -> JSONResponse:
    return JSONResponse(json_format.MessageToDict(Payloads(payloads=payloads)))


async def _decode(request: Request, path_token: str | None) -> JSONResponse:
    codec = _codec(request, path_token)
    payloads = await _payloads(request)
    try:
        return _answer(await codec.decode(payloads))
    except (DecryptError, DecodeError) as exc:
        raise ApiError(422, f"a payload does not decrypt: {exc}") from exc


async def _encode(request: Request, path_token: str | None) -> JSONResponse:
    codec = _codec(request, path_token)
    return _answer(await codec.encode(await _payloads(request)))


@router.post("/decode")
async def decode(request: Request) -> JSONResponse:
    return await _decode(request, None)


@router.post("/encode")
async def encode(request: Request) -> JSONResponse:
    return await _encode(request, None)


@router.post("/{token}/decode")
async def decode_with_path_token(request: Request, token: str) -> JSONResponse:
    return await _decode(request, token)


@router.post("/{token}/encode")
async def encode_with_path_token(request: Request, token: str) -> JSONResponse:
    return await _encode(request, token)
