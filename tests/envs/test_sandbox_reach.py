"""A workspace root the sandbox uids cannot reach fails loudly: the env pool refuses to start, and a checker that
cannot reach its workspace is an error of the activity, never an outcome of 0 to train on.

Everything runs as root here, so the sandbox's uids (61000 and up, "others" to every folder) are the ones kept out:
a folder 0700 (or 0754: readable, not traversable) above the root is the 0700 home directory of the issue.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.env_step import EnvActivities, _Held
from contracts.episodes import EnvRef
from contracts.errors import ErrorType
from envs.base import Action, ToolCallAction
from envs.sandbox import ROOT_ENV, SandboxLimits, SandboxPool, SandboxUnavailable, WorkspaceUnreachable, sandbox_problem
from envs.swe import SweTasks
from envs.terminal import TerminalTasks
from openclaw_rl.settings import Settings
from stack.launcher import sandbox_refusal

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or sandbox_problem() is not None, reason="needs root and bubblewrap (a uid per sandbox)"
)

# A pytest task and Harbor's test.sh convention: neither may score a silent 0.
TASKS = ["text-top-ips", "files-checksum-manifest"]


@pytest.fixture
def base():
    """A folder under /tmp whose mode a test changes; the sandbox root goes under it."""
    folder = Path(tempfile.mkdtemp(prefix="oc-reach-", dir="/tmp"))
    os.chmod(folder, 0o755)
    try:
        yield folder
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder, ignore_errors=True)


def settings_for(root: Path) -> Settings:
    return Settings(envs={"sandbox": {"root": str(root), "limits": {"wall_s": 5, "memory_mb": 1024}}})


@pytest.mark.parametrize("mode", [0o700, 0o754])
def test_the_pool_refuses_a_root_its_sandboxes_cannot_reach(base, mode):
    os.chmod(base, mode)
    root = base / "sandboxes"
    with pytest.raises(SandboxUnavailable) as caught:
        SandboxPool(root, SandboxLimits())
    why = str(caught.value)
    assert f"envs.sandbox.root={root}" in why and "Permission denied" in why  # the path and what the probe met
    assert f"{base} (mode {mode:04o}" in why and f"chmod o+x {base}" in why and ROOT_ENV in why  # the fix
    assert not list(root.iterdir())  # the probe's workspace is gone

    # The env worker does not start, and `openclaw-rl up` says so before starting anything.
    with pytest.raises(SandboxUnavailable, match="cannot use their workspaces"):
        EnvActivities(settings_for(root), "env-test-queue")
    refusal = sandbox_refusal(settings_for(root)) or ""
    assert f"envs.sandbox.root={root}" in refusal and f"chmod o+x {base}" in refusal

    os.chmod(base, 0o755)  # fixed: it starts
    SandboxPool(root, SandboxLimits())
    assert sandbox_refusal(settings_for(root)) is None


@pytest.mark.parametrize("task_id", TASKS)
def test_a_checker_that_cannot_reach_its_workspace_raises(base, task_id):
    pool = SandboxPool(base / "sandboxes", SandboxLimits(wall_s=5, memory_mb=1024))
    env = TerminalTasks().make(task_id, pool)
    env.reset()
    try:
        env.run_oracle()
        os.chmod(base, 0o700)  # after start: someone closed a parent folder
        with pytest.raises(WorkspaceUnreachable) as caught:
            env.outcome()
        assert str(env.box.workspace) in str(caught.value) and f"chmod o+x {base}" in str(caught.value)
        assert env.verdict is None  # no outcome was recorded
        os.chmod(base, 0o755)
        assert env.outcome() == 1.0  # the same workspace, reachable again, is checked as usual
    finally:
        os.chmod(base, 0o755)
        env.close()


def test_a_swe_checker_that_cannot_reach_its_workspace_raises(base):
    pool = SandboxPool(base / "sandboxes", SandboxLimits(wall_s=10, memory_mb=1024))
    env = SweTasks().make("pager__paginate-1", pool)
    env.reset()
    try:
        os.chmod(base, 0o700)
        with pytest.raises(WorkspaceUnreachable, match=f"chmod o\\+x {base}"):
            env.outcome()  # not the -1 of an unresolved task
    finally:
        os.chmod(base, 0o755)
        env.close()


async def test_the_env_worker_reports_it_as_an_error_not_an_outcome(base):
    acts = EnvActivities(settings_for(base / "sandboxes"), "env-test-queue")
    env = TerminalTasks().make("files-checksum-manifest", acts.sandboxes)
    env.reset()
    acts._held["attempt-1"] = _Held(env)
    try:
        os.chmod(base, 0o700)
        with pytest.raises(ApplicationError) as caught:
            await ActivityEnvironment().run(acts.env_outcome, EnvRef(attempt_key="attempt-1"))
        assert caught.value.type == ErrorType.WORKSPACE_UNREACHABLE and caught.value.non_retryable
        assert str(base) in caught.value.message
        assert acts._held["attempt-1"].outcome is None
    finally:
        os.chmod(base, 0o755)
        await acts.aclose()


def test_an_agent_that_locks_its_own_workspace_still_gets_its_outcome(base):
    """The agent may chmod /app (it owns it) so that nothing runs there; that is its doing, scored, not an error."""
    pool = SandboxPool(base / "sandboxes", SandboxLimits(wall_s=5, memory_mb=1024))
    env = TerminalTasks().make("text-top-ips", pool)
    env.reset()
    try:
        lock = ToolCallAction(id="c1", name="bash", arguments={"command": "chmod 000 /app"})
        env.step(Action(tool_calls=[lock]))
        assert env.outcome() == 0.0 and not env.verdict.valid
    finally:
        env.close()
