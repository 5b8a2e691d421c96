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
from store.errors import is_passing

P = ParamSpec("P")
R = TypeVar("R")


def store_outage_is_retryable(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Raise a store outage (down, unreachable, loading, or full) inside `fn` as ApplicationError STORE_UNAVAILABLE
    (retryable)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except Exception as exc:
            if not is_passing(exc):
                raise
            raise ApplicationError(str(exc), type=ErrorType.STORE_UNAVAILABLE) from exc

    return wrapper
