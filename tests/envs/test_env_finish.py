"""`env_finish` (EpisodeConfig.finish_in_one): the outcome checked and the environment closed in one call, on a real
terminal task in its sandbox; a retry whose first result was lost answers the same outcome, not a missing
environment, and a checker that cannot run still closes nothing behind the episode's back."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import env_step
from activities.env_step import EnvActivities, _Held
from contracts.episodes import EnvRef
from contracts.errors import ErrorType
from envs.sandbox import sandbox_problem
from envs.terminal import TerminalTasks
from openclaw_rl.settings import Settings

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or sandbox_problem() is not None, reason="needs root and bubblewrap (a uid per sandbox)"
)


@pytest.fixture
async def acts():
    root = Path(tempfile.mkdtemp(prefix="oc-finish-", dir="/tmp"))
    os.chmod(root, 0o755)
    envs = EnvActivities(
        Settings(envs={"sandbox": {"root": str(root / "sandboxes"), "limits": {"wall_s": 10, "memory_mb": 1024}}}),
        "env-test-queue",
    )
    try:
        yield envs
    finally:
        await envs.aclose()
        shutil.rmtree(root, ignore_errors=True)


def hold(acts: EnvActivities, key: str, solved: bool):
    env = TerminalTasks().make("files-checksum-manifest", acts.sandboxes)
    env.reset()
    if solved:
        env.run_oracle()
    acts._held[key] = _Held(env)
    return env


async def test_the_outcome_is_checked_the_environment_closed_and_a_retry_answers_the_same(acts):
    env = hold(acts, "attempt-solved", solved=True)
    workspace = env.box.workspace
    assert workspace.exists()
    run = ActivityEnvironment().run
    first = await run(acts.env_finish, EnvRef(attempt_key="attempt-solved"))
    assert first.outcome == 1.0
    assert "attempt-solved" not in acts._held and not workspace.exists()  # closed: the sandbox's files are gone
    again = await run(acts.env_finish, EnvRef(attempt_key="attempt-solved"))  # its first result never arrived
    assert again == first


async def test_only_the_newest_outcomes_are_remembered(acts, monkeypatch):
    """The memory stays bounded however long the worker runs (FINISHED_KEPT, here 1)."""
    monkeypatch.setattr(env_step, "FINISHED_KEPT", 1)
    run = ActivityEnvironment().run
    hold(acts, "attempt-1", solved=True)
    hold(acts, "attempt-2", solved=False)
    assert (await run(acts.env_finish, EnvRef(attempt_key="attempt-1"))).outcome == 1.0
    assert (await run(acts.env_finish, EnvRef(attempt_key="attempt-2"))).outcome == 0.0
    assert list(acts._finished) == ["attempt-2"]


async def test_an_environment_this_worker_does_not_hold_is_missing_not_an_outcome(acts):
    with pytest.raises(ApplicationError) as caught:
        await ActivityEnvironment().run(acts.env_finish, EnvRef(attempt_key="never-opened"))
    assert caught.value.type == ErrorType.ENV_MISSING and caught.value.non_retryable
    assert "never-opened" not in acts._finished
