"""Time-skipping Temporal test servers for the workflow tests; each test brings its own worker and task queue.

`env` is shared by the whole session. A test that skips time (a timer or
env.sleep) takes `skipping_env`, a server of its own: the Java test server
leaks a time-skipping lock whenever a child workflow finishes after its parent
run has closed (the "notify parent" lock of a completing child is only released
by a parent that is still open; sdk-java#2392), as every abandoned
JudgeTurnWorkflow started at a session's close or before a continue-as-new
does. From then on time no longer skips on that server and a timer waits in
real time. Starting a server takes a fraction of a second.
"""

from __future__ import annotations

import pytest_asyncio

from tests.workflows.mocks import fresh_env


@pytest_asyncio.fixture(scope="session")
async def env():
    async with fresh_env() as environment:
        yield environment


@pytest_asyncio.fixture
async def skipping_env():
    async with fresh_env() as environment:
        yield environment
