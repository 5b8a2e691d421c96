"""Worker Versioning on the one-box stack (`temporal.versioning`, issue 46 item 1): `up`'s workflow worker makes its
build current; a second build's worker started beside it and promoted with `openclaw-rl deploy promote` takes the
new sessions, while a session started on the first build goes on answering on it (Pinned), and `deploy status`
shows the first build draining."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import REPO, RunningStack

CLI = [sys.executable, "-m", "cli"]


def chat(stack: RunningStack, key: str, sid: str) -> None:
    r = httpx.post(
        f"{stack.api}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4},
        headers={"Authorization": f"Bearer {key}", "X-Session-Id": sid},
        timeout=120,
    )
    assert r.status_code == 200, r.text


def session_builds(stack: RunningStack) -> dict[str, str]:
    """Each session workflow's build (the version it is pinned to), by the session id in its workflow id."""

    async def run() -> dict[str, str]:
        client = await Client.connect(stack.temporal)
        out = {}
        async for wf in client.list_workflows('WorkflowType="SessionWorkflow"'):
            desc = await client.get_workflow_handle(wf.id, run_id=wf.run_id).describe()
            info = desc.raw_description.workflow_execution_info.versioning_info
            out[wf.id] = info.deployment_version.build_id
        return out

    return asyncio.run(run())


def deploy(stack: RunningStack, *args: str) -> str:
    out = subprocess.run(CLI + ["deploy", *args], env=stack.env, cwd=REPO, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


@pytest.fixture(scope="module")
def versioned_stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    env = chat_stack_env(
        tmp_path_factory.mktemp("versioned") / "data",
        tiny_model,
        OPENCLAW_RL_TEMPORAL__VERSIONING__ENABLED="true",
        OPENCLAW_RL_TEMPORAL__VERSIONING__BUILD_ID="build-a",
        OPENCLAW_RL_LEARNING__ENABLED="false",
    )
    with RunningStack(env) as stack:
        yield stack


def test_a_promoted_build_takes_new_sessions_while_old_ones_finish_on_theirs(versioned_stack: RunningStack):
    stack = versioned_stack
    key = create_key(stack, "versioned-user")
    chat(stack, key, "on-a")
    assert set(session_builds(stack).values()) == {"build-a"}
    assert "current build-a" in deploy(stack, "status")

    env_b = stack.env | {
        "OPENCLAW_RL_TEMPORAL__VERSIONING__BUILD_ID": "build-b",
        "OPENCLAW_RL_TEMPORAL__VERSIONING__MAKE_CURRENT_ON_START": "false",
    }
    log = open(Path(stack.env["OPENCLAW_RL_DATA_DIR"]) / "worker-workflow-b.log", "wb")
    worker_b = subprocess.Popen(CLI + ["worker", "--pool", "workflow"], env=env_b, cwd=REPO, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while "build-b" not in deploy(stack, "status") and time.monotonic() < deadline:
            time.sleep(1)  # the server learns of a build from its worker's first poll
        assert "is current" in deploy(stack, "promote", "--build-id", "build-b")

        chat(stack, key, "on-b")
        chat(stack, key, "on-a")  # the session pinned to build-a answers on build-a's worker
        builds = session_builds(stack)
        on_a = [wf for wf in builds if "on-a" in wf]
        on_b = [wf for wf in builds if "on-b" in wf]
        assert on_a and on_b, builds
        assert {builds[wf] for wf in on_a} == {"build-a"} and {builds[wf] for wf in on_b} == {"build-b"}, builds
        status = deploy(stack, "status")
        assert "current build-b" in status
        a_row = next(line for line in status.splitlines() if line.strip().startswith("build-a"))
        assert "draining" in a_row, status
    finally:
        worker_b.terminate()
        worker_b.wait(timeout=30)
