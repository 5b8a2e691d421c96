"""Store failures as this project's own types: callers never see redis-py's exceptions.

An outage (unreachable, timing out, still loading its append-only file) and a full store (at `maxmemory`, or
refusing writes because its disk is full) are passing: workflows wait them out, the API answers 503 with the
reason. Anything else (a wrong type under a key, a script error) is a bug and stays an error.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from redis.exceptions import BusyLoadingError, OutOfMemoryError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

P = ParamSpec("P")
R = TypeVar("R")


class StoreError(Exception):
    """The store failed a call."""


class StoreUnavailable(StoreError):
    """Down, unreachable, timing out, or still loading its data: retry shortly."""


class NotReplicated(StoreUnavailable):
    """A write the master took but too few replicas acknowledged in time (`redis.min_replicas_acked`): a failover now
    could lose it. Retryable like an outage: the writes that raise it are idempotent, and a retry waits again."""

    def __init__(self, message: str, *, acked: int, wanted: int):
        super().__init__(message)
        self.acked = acked
        self.wanted = wanted


class StoreFull(StoreError):
    """Writes refused for lack of room: memory (`maxmemory` with `noeviction`) or disk (a failed append-only write).
    Reads, expiry and training go on and free room."""

    def __init__(self, message: str, *, disk: bool):
        super().__init__(message)
        self.disk = disk


def as_store_error(exc: RedisError) -> StoreError:
    """The StoreError a redis-py exception stands for."""
    text = str(exc)
    if " of pipeline caused error: " in text:  # redis-py wraps a pipeline command's error: the server's reply is after
        text = text.split(" of pipeline caused error: ", 1)[1].strip("()',\" ")
    if isinstance(exc, OutOfMemoryError) or (isinstance(exc, ResponseError) and text.startswith("OOM")):
        return StoreFull(f"the store is full (its memory limit): {text}", disk=False)
    if isinstance(exc, ResponseError) and text.startswith("MISCONF"):
        # valkey refuses writes after a failed write of its append-only file (a full disk) until one succeeds again
        return StoreFull(f"the store cannot write to its disk: {text}", disk=True)
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError, BusyLoadingError)):
        return StoreUnavailable(f"the store is unavailable: {type(exc).__name__}: {text}")
    return StoreError(f"the store failed the call: {type(exc).__name__}: {text}")


def is_passing(exc: BaseException) -> bool:
    """An outage or a full store: retrying later can succeed."""
    return isinstance(exc, (StoreUnavailable, StoreFull))


def translated(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """`fn` raising StoreErrors instead of redis-py's exceptions (OSError from a socket counts as an outage)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except RedisError as exc:
            raise as_store_error(exc) from exc
        except OSError as exc:
            raise StoreUnavailable(f"the store is unavailable: {type(exc).__name__}: {exc}") from exc

    return wrapper


class Records:
    """Base of every repository: its public coroutines raise StoreErrors (wrapped once, when the class is made)."""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        for name, member in list(vars(cls).items()):
            if not name.startswith("_") and inspect.iscoroutinefunction(member):
                setattr(cls, name, translated(member))
