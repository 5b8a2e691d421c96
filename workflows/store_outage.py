"""Wait out a store (Redis) outage in a workflow instead of counting it as a failed vote or a lost hint.

An activity raises STORE_UNAVAILABLE (or STORAGE_FULL: writes refused for lack of room) once its own few retries
are spent (a vote retries 3 times, well under a minute); the workflow then sleeps and asks again, for up to an hour,
because the outage says nothing about the judge or the turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from contracts.errors import ErrorType

T = TypeVar("T")

ASK_AGAIN_AFTER = timedelta(seconds=15)
GIVE_UP_AFTER = timedelta(hours=1)
PATCH = "wait-out-store-outages"
"""Runs recorded before this behaviour failed the call at once; they replay that way."""


_WAITED_OUT = (ErrorType.STORE_UNAVAILABLE, ErrorType.STORAGE_FULL)
"""A store that is down, and one that refuses writes for lack of room (expiry, training and an operator free it).
Histories recorded before STORAGE_FULL existed carry a full store as STORE_UNAVAILABLE: they replay the same."""


def _store_down(exc: ActivityError) -> bool:
    cause = exc.cause
    return isinstance(cause, ApplicationError) and cause.type in _WAITED_OUT


async def waiting_out_store_outages(call: Callable[[], Awaitable[T]]) -> T:
    """`call()`; while it fails only because the store is down or full, sleep and call again (then raise as it
    did)."""
    waited = timedelta(0)
    while True:
        try:
            return await call()
        except ActivityError as exc:
            if not (_store_down(exc) and waited < GIVE_UP_AFTER and workflow.patched(PATCH)):
                raise
            workflow.logger.warning(
                "the store is down or full; asking again", extra={"waited_s": waited.total_seconds()}
            )
            await workflow.sleep(ASK_AGAIN_AFTER)
            waited += ASK_AGAIN_AFTER
