"""One definition per activity: its name, input, output and options, used by both sides.

The worker registers `@activity.defn(name=D.name)`; a workflow calls it through
`workflows.activity_calls.execute(D, ...)`, which turns these options into
Temporal's. Options a deployment tunes (a generate timeout, a vote timeout) are
settings and passed as overrides at the call; every other number lives here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, TypeVar

from contracts.errors import ErrorType

In = TypeVar("In")
Out = TypeVar("Out")


@dataclass(frozen=True)
class Retry:
    """Temporal's retry policy, without importing Temporal here."""

    initial_interval: timedelta = timedelta(seconds=1)
    backoff: float = 2.0
    maximum_interval: timedelta | None = None
    maximum_attempts: int = 0
    """0: unlimited (until a timeout or a non-retryable error)."""
    non_retryable: tuple[ErrorType, ...] = ()


@dataclass(frozen=True)
class ActivityDef(Generic[In, Out]):
    name: str
    input: type[In]
    output: Any
    """The result type (a model, or `list[str]`, `int`, None)."""
    start_to_close: timedelta | None = None
    schedule_to_close: timedelta | None = None
    schedule_to_start: timedelta | None = None
    heartbeat: timedelta | None = None
    retry: Retry = field(default_factory=Retry)
