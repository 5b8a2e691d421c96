"""Hosts fail, nothing is lost (issue 43, item 3), short: under chat and rollout load on the several-hosts
deployment (stack.hosts), env-1 is killed (every process of it, by its own process groups) and its episodes start
over on env-2; then the trainer's link is cut for 30 s and turns are still answered (whether training resumes after
the cut is reported; a silent engine's turns are sent again once it leaves the rotation, tested against the router
in tests/stack/test_router.py and measured on the hosts in docs/deployment.md). After both: no sample lost or trained
twice, no 5xx. `openclaw-rl bench hosts --failures` runs every phase with more load."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.hosts import HostsBench, Load
from stack.hosts import Deployment, Knobs, hosts_problem

pytestmark = pytest.mark.skipif(hosts_problem() is not None, reason=f"no hosts here: {hosts_problem()}")


def test_env_host_killed_and_link_cut_lose_nothing(hosts_root: Path):
    from engine.tiny_qwen3 import ensure_tiny_model

    model = ensure_tiny_model(hosts_root / "image" / "tiny-qwen3")
    deployment = Deployment(hosts_root, Knobs(batch_size=4, wait_s=1.0))
    load = Load(
        sessions=3,
        turns_per_session=None,
        groups=1,
        samples=2,
        max_steps=2,
        versions=1,
        timeout_s=600,
        failures=["env", "cut"],
        env_lost_after_s=10.0,
        down_s=5.0,
        cut_s=30.0,
        cut_host="trainer",
        resume_wait_s=45.0,
    )

    async def scenario():
        try:
            await deployment.start(model)
            return await HostsBench(deployment, load).run()
        finally:
            await deployment.close()

    fig = asyncio.run(scenario())
    for phase in fig.phases:
        print(phase.line())
    print(fig.last_line())
    env, cut = fig.phases
    # env-1 died whole (no process of it left in its namespace), and the work went on without it on env-2.
    assert env.notes["killed"]["groups"] and not env.notes["killed"]["left"]
    assert env.recovery_s is not None and env.notes["episodes started over"] >= 1
    assert env.notes["of them reopened on env-2"] >= 1
    assert fig.group_failures == 0  # every episode of every group finished, the restarted ones on env-2
    # Turns were answered while the trainer was cut off. (Whether it trains again after the cut is reported, not
    # asserted: in one run of 2026-11-28 it did not within minutes, not seen again since: docs/deployment.md.)
    assert cut.notes["turns during the cut"] > 0
    assert fig.status_5xx == 0 and set(fig.chat_errors) <= {503}, fig.failed
    unreasoned = [f for f in fig.failed if f[1] == 503 and not f[2]]
    assert not unreasoned
    assert fig.env_steps > 0 and fig.versions >= 1 and len(set(fig.engine_versions.values())) == 1
    assert fig.published > 0 and fig.lost == 0 and fig.duplicated == 0
