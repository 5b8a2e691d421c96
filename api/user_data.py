"""A user's rights over their data, through their own key (control.user_data; docs/user-data.md):

- `GET /v1/me/data`: everything held about them (turns, judgements, hints, samples, adapter versions);
- `POST /v1/me/opt-out` / `DELETE /v1/me/opt-out`: keep their turns out of training, or let them back in
  (`?scope=key`: this key only, the default `user`: every key of theirs);
- `DELETE /v1/me/data`: be forgotten. Their keys go too: the key that asked stops working.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from api.auth import Caller, authenticate
from api.errors import ApiError
from api.openapi_spec import USER_DATA_ERRORS
from control.user_adapters import FileAdapters
from control.user_data import UserData
from control.user_data_models import ForgetReport, UserExport, UserNotFound

router = APIRouter()


class OptOutState(BaseModel):
    user_id: str
    opted_out: bool
    """The user as a whole (every key) is kept out of training."""
    opted_out_keys: list[str]
    """Key ids kept out of training on their own."""


async def _user_data(request: Request) -> UserData:
    client = await request.app.state.gateway.client()
    settings, store = request.app.state.settings, request.app.state.store
    return UserData(client, store, settings, adapters=FileAdapters(settings, store))


def _gone(caller: Caller) -> ApiError:
    return ApiError(404, f"nothing is held about user {caller.user_id!r}", code="user_not_found")


@router.get("/v1/me/data", responses=USER_DATA_ERRORS)
async def my_data(request: Request, caller: Caller = Depends(authenticate)) -> UserExport:
    """Everything held about the key's user: keys, sessions, turns (requests, answers, judgements and hints),
    samples waiting or trained, and per-user adapter versions."""
    try:
        return await (await _user_data(request)).export(caller.user_id)
    except UserNotFound:
        raise _gone(caller) from None


async def _opt(request: Request, caller: Caller, out: bool, scope: str) -> OptOutState:
    data = await _user_data(request)
    try:
        keys = await data.set_opt_out(caller.user_id, out, key_id=caller.key_id if scope == "key" else None)
    except UserNotFound:
        raise _gone(caller) from None
    return OptOutState(
        user_id=caller.user_id,
        opted_out=await request.app.state.store.users.user_opted_out(caller.user_id),
        opted_out_keys=keys,
    )


@router.post("/v1/me/opt-out", responses=USER_DATA_ERRORS)
async def opt_out(
    request: Request,
    scope: Literal["user", "key"] = Query("user", description="`user`: every key of the user; `key`: this key"),
    caller: Caller = Depends(authenticate),
) -> OptOutState:
    """Keep the user's (or this key's) turns out of training from now on: they are still answered, never judged
    into samples. Turns already judged keep their samples (`DELETE /v1/me/data` removes them)."""
    return await _opt(request, caller, True, scope)


@router.delete("/v1/me/opt-out", responses=USER_DATA_ERRORS)
async def opt_in(
    request: Request,
    scope: Literal["user", "key"] = Query("user", description="`user`: every key of the user; `key`: this key"),
    caller: Caller = Depends(authenticate),
) -> OptOutState:
    """Let the user's (or this key's) turns train the policy again, from the next turn on."""
    return await _opt(request, caller, False, scope)


@router.delete("/v1/me/data", responses=USER_DATA_ERRORS)
async def forget_me(request: Request, caller: Caller = Depends(authenticate)) -> ForgetReport:
    """Forget the key's user: their sessions (workflow histories included), turns, token data, judgements, samples
    not yet trained, idempotency and prefix records, record lines and API keys. This key stops working."""
    try:
        return await (await _user_data(request)).forget(caller.user_id)
    except UserNotFound:
        raise _gone(caller) from None
