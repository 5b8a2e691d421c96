"""A store outage is a typed, retryable failure, told apart from a judge's or a model's.

Workflows wait an outage out (a publish retries until the store is back, a vote
is asked again) instead of counting it as a failed vote or giving the sample up.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from temporalio.exceptions import ApplicationError

from contracts.errors import ErrorType
from store.errors import StoreError, StoreFull, is_passing

P = ParamSpec("P")
R = TypeVar("R")


def store_failure(exc: StoreError, *, non_retryable: bool = False) -> ApplicationError:
    """The typed ApplicationError of a passing store failure: STORAGE_FULL when the store refuses writes for lack of
    room (memory or disk), else STORE_UNAVAILABLE. Its message carries the store's reason."""
    kind = ErrorType.STORAGE_FULL if isinstance(exc, StoreFull) else ErrorType.STORE_UNAVAILABLE
    return ApplicationError(str(exc), type=kind, non_retryable=non_retryable)


def store_outage_is_retryable(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Raise a store outage (down, unreachable, loading) inside `fn` as ApplicationError STORE_UNAVAILABLE, a full
    store (memory or disk) as STORAGE_FULL; both retryable, and both waited out by workflows.store_outage."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except Exception as exc:
            if not is_passing(exc):
                raise
            raise store_failure(exc) from exc

    return wrapper
