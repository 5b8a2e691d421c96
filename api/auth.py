"""API keys -> the caller's user id: `Authorization: Bearer <key>`, and on the Anthropic Messages route also
`x-api-key: <key>` (Anthropic clients send only that; elsewhere it is refused, so a key in an unexpected header is
never taken by a route that does not speak that protocol)."""

from __future__ import annotations

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from api.errors import ApiError


class Caller(BaseModel):
    user_id: str
    key_id: str


_BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    bearerFormat="ocrl-<key id>-<secret>",
    description="An API key from `openclaw-rl keys create --user NAME`",
)
"""Declares the scheme in /openapi.json only: authenticate() reads the header itself, for its own error bodies."""


def _bearer(request: Request) -> str:
    """The key of an `Authorization: Bearer <key>` header, or ""."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


async def authenticate(request: Request, _declared: HTTPAuthorizationCredentials | None = Security(_BEARER)) -> Caller:
    token = _bearer(request)
    if not token:
        raise ApiError(
            401,
            "missing bearer token: send `Authorization: Bearer <key>` "
            "(create one with `openclaw-rl keys create --user NAME`)",
            code="missing_api_key",
        )
    return await _caller(request, token)


async def authenticate_bearer_or_x_api_key(request: Request) -> Caller:
    """The Anthropic Messages route's: its clients send the key as `x-api-key`."""
    token = _bearer(request) or request.headers.get("x-api-key", "").strip()
    if not token:
        raise ApiError(
            401,
            "missing API key: send `x-api-key: <key>` or `Authorization: Bearer <key>` "
            "(create one with `openclaw-rl keys create --user NAME`)",
            code="missing_api_key",
        )
    return await _caller(request, token)


async def _caller(request: Request, token: str) -> Caller:
    rec = await request.app.state.keys.lookup(token)
    if rec is None:
        raise ApiError(401, "invalid api key: it was never issued by this server", code="invalid_api_key")
    if rec.revoked_at is not None:
        raise ApiError(
            403,
            f"api key {rec.key_id} was revoked at {rec.revoked_at:%Y-%m-%d %H:%M} UTC; "
            "ask for a new one (`openclaw-rl keys create`)",
            code="revoked_api_key",
        )
    return Caller(user_id=rec.user_id, key_id=rec.key_id)
