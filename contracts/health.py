"""The stack probe: a workflow that pings every pool."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field

from contracts.activity import ActivityDef, Retry


class PingInput(BaseModel):
    pool: str
    """The pool the caller expects to reach."""


class PoolPong(BaseModel):
    pool: str
    pid: int
    host: str
    worker_started_at: float
    answered_at: float


class ProbeInput(BaseModel):
    task_queues: dict[str, str]
    """Pool name -> its task queue."""
    delay_s: float = Field(0.0, ge=0)
    """Durable timer before pinging (exercises persistence across server restarts)."""


class ProbeResult(BaseModel):
    pongs: list[PoolPong]


PING = ActivityDef(
    "ping",
    PingInput,
    PoolPong,
    schedule_to_close=timedelta(seconds=30),
    retry=Retry(
        initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=2), maximum_attempts=20
    ),
)
