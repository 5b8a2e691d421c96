"""Bearer API keys -> the caller's user id."""

from __future__ import annotations

from fastapi import Request
from pydantic import BaseModel

from api.errors import ApiError


class Caller(BaseModel):
    user_id: str
    key_id: str


async def authenticate(request: Request) -> Caller:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(
            401,
            "missing bearer token: send `Authorization: Bearer <key>` "
            "(create one with `openclaw-rl keys create --user NAME`)",
            code="missing_api_key",
        )
    rec = await request.app.state.keys.lookup(token.strip())
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
