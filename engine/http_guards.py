"""What the engine's HTTP front refuses, and how it answers: the `Refused` errors (400, 413, 415) and their JSON
body, bodies read under a size limit and validated, weight-update bodies only as application/json, and the bearer
key (SGLang's --api-key) on every route but OPEN_PATHS."""

from __future__ import annotations

import hmac
import json
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

OPEN_PATHS = frozenset({"/health"})
"""Routes served without the key: the liveness probe of `up` and of load balancers (it reveals nothing)."""


class Refused(Exception):
    """A request the engine will not serve, answered with `status` and the reason."""

    status = 400


class BadRequest(Refused, ValueError):
    status = 400


class TooLarge(Refused):
    status = 413


class WrongMediaType(Refused):
    status = 415


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    kind = "BadRequestError" if status < 500 else "InternalServerError"
    body = {"error": {"message": message, "type": kind, "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


def _require_json(request: Request) -> None:
    """Only application/json: browsers send it cross-site only after a CORS preflight, which this server never grants,
    so a web page the operator visits cannot make the engine load weights."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise WrongMediaType(f"the body must be sent as application/json, not {media or 'without a Content-Type'}")


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 once it passes `limit` bytes (at once when Content-Length announces more)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"the body is {declared} bytes, over the engine's limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():  # chunked bodies announce no length: count as they arrive
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"the body is over the engine's limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _parse(request: Request, model: type[BaseModel], limit: int, *, empty_ok: bool = False) -> Any:
    """JSON body, validated. /generate takes it whatever the Content-Type (curl -d sends form encoding).
    `empty_ok`: no body at all means every field at its default (the control routes)."""
    raw = await _read_body(request, limit)
    if empty_ok and not raw.strip():
        raw = b"{}"
    try:
        data = json.loads(raw or b"null")
    except ValueError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(_describe(exc)) from exc


def _describe(exc: ValidationError) -> str:
    """Readable validation errors: drop union-branch names and the 'wrong branch' noise."""
    parts: list[str] = []
    for e in exc.errors():
        loc = ".".join(
            str(x) for x in e["loc"] if not (isinstance(x, str) and (x[:1].isupper() or x.startswith("list[")))
        )
        msg = f"{loc or 'body'}: {e['msg']}"
        if msg not in parts:
            parts.append(msg)
    useful = [p for p in parts if not p.endswith("Input should be a valid list")] or parts
    return "; ".join(useful[:5])


class BearerKey:
    """Refuse every request but OPEN_PATHS without `Authorization: Bearer <key>` (401), as SGLang's --api-key."""

    def __init__(self, app: ASGIApp, key: str):
        self.app = app
        self.expected = f"Bearer {key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        reason = "a valid API key is required: Authorization: Bearer <key>"
        await _error(401, reason, {"WWW-Authenticate": "Bearer"})(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        scheme, _, token = given.partition(b" ")
        # the scheme is case-insensitive (RFC 9110); compare_digest: no timing hint about the key
        return scheme.lower() == b"bearer" and hmac.compare_digest(b"Bearer " + token.strip(), self.expected)
