"""A store (Redis) outage is a typed, retryable failure, told apart from a judge's or a model's.

Workflows wait an outage out (a publish retries until the store is back, a vote
is asked again) instead of counting it as a failed vote or giving the sample up.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from redis.exceptions import BusyLoadingError, OutOfMemoryError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from temporalio.exceptions import ApplicationError

from contracts.errors import ErrorType

P = ParamSpec("P")
R = TypeVar("R")


def is_store_outage(exc: BaseException) -> bool:
    """Down, unreachable, still loading its append-only file, or full (OOM: writes refused until room is freed)."""
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError, BusyLoadingError, OutOfMemoryError)):
        return True
    return isinstance(exc, ResponseError) and str(exc).startswith("OOM")  # a script's OOM arrives as a reply text


def store_outage_is_retryable(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Raise a store outage inside `fn` as ApplicationError STORE_UNAVAILABLE (retryable)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except Exception as exc:
            if not is_store_outage(exc):
                raise
            raise ApplicationError(
                f"the store (Redis) is unavailable: {type(exc).__name__}: {exc}", type=ErrorType.STORE_UNAVAILABLE
            ) from exc

    return wrapper
