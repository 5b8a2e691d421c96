"""`ping`: every pool answers it, so a workflow can prove each pool has a live worker."""

from __future__ import annotations

import os
import socket
import time

from temporalio import activity
from temporalio.exceptions import ApplicationError

from contracts.errors import ErrorType
from contracts.health import PING, PingInput, PoolPong


def make_ping(pool: str):
    started = time.time()

    @activity.defn(name=PING.name)
    async def ping(inp: PingInput) -> PoolPong:
        if inp.pool != pool:
            # A misrouted task queue would silently test the wrong pool.
            raise ApplicationError(
                f"ping for pool {inp.pool!r} reached a worker of pool {pool!r}", type=ErrorType.POOL_MISMATCH
            )
        return PoolPong(
            pool=pool, pid=os.getpid(), host=socket.gethostname(), worker_started_at=started, answered_at=time.time()
        )

    return ping
