"""The codec server the Temporal Web UI calls to show encrypted payloads (Temporal's remote-codec protocol:
POST {endpoint}/decode and /encode with `{"payloads": [...]}` in protobuf JSON), served only when encryption at
rest is on. Answering is decrypting people's conversations: only callers on this machine (the operator's browser
with the UI, which `up` points here with `--ui-codec-endpoint`) are answered; anything else gets 403. The payloads
to decode come from Temporal, so reading one still needs access to Temporal.
"""

from __future__ import annotations

import ipaddress

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from api.errors import ApiError
from openclaw_rl.encryption import DecryptError, EncryptionCodec

router = APIRouter(prefix="/codec", include_in_schema=False)


def _codec(request: Request) -> EncryptionCodec:
    keyring = request.app.state.settings.keyring()
    if keyring is None:
        raise ApiError(404, "encryption at rest is off (encryption_keys is empty): there is nothing to decode")
    host = request.client.host if request.client else ""
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = host in ("localhost", "testclient")
    if not local:
        raise ApiError(403, "the codec server answers only on this machine (it decrypts conversations)")
    return EncryptionCodec(keyring)


async def _payloads(request: Request) -> Payloads:
    try:
        return json_format.Parse(await request.body(), Payloads())
    except json_format.ParseError as exc:
        raise ApiError(400, f"expected Temporal payloads as protobuf JSON ({exc})") from exc


def _answer(payloads: list) -> JSONResponse:
    return JSONResponse(json_format.MessageToDict(Payloads(payloads=payloads)))


@router.post("/decode")
async def decode(request: Request) -> JSONResponse:
    codec = _codec(request)
    payloads = await _payloads(request)
    try:
        return _answer(await codec.decode(list(payloads.payloads)))
    except DecryptError as exc:
        raise ApiError(422, str(exc)) from exc


@router.post("/encode")
async def encode(request: Request) -> JSONResponse:
    codec = _codec(request)
    return _answer(await codec.encode(list((await _payloads(request)).payloads)))
