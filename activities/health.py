"""`ping`: every pool answers it, so a workflow can prove each pool has a live worker."""

from __future__ import annotations

import os
import socket
import time

from pydantic import BaseModel
from temporalio import activity


class PingInput(BaseModel):
    pool: str
    """The pool the caller expects to reach."""


class PoolPong(BaseModel):
    pool: str
    pid: int
    host: str
    worker_started_at: float
    answered_at: float


def make_ping(pool: str):
    started = time.time()

    @activity.defn(name="ping")
    async def ping(inp: PingInput) -> PoolPong:
        if inp.pool != pool:
            # A misrouted task queue would silently test the wrong pool.
            raise RuntimeError(f"ping for pool {inp.pool!r} reached a worker of pool {pool!r}")
        return PoolPong(pool=pool, pid=os.getpid(), host=socket.gethostname(), worker_started_at=started, answered_at=time.time())

    return ping
