"""The built-in tiny model runs every environment end to end: `up` on the embedded engine, real pools, sandboxes.

Its output is noise, so outcomes are whatever they are; what must hold is that
each setting's episode completes with its tokens kept for training, and that a
rollout keeps several environments busy and finishes its task set.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from pathlib import Path

import pytest
import redis
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from contracts.episodes import EpisodeResult, RolloutProgress
from envs.sandbox import sandbox_problem
from store import keys
from tests.envs.gui_support import gui_problem
from tests.helpers import CLI, REPO, RunningStack, stack_env

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
]


_needs_gui = pytest.mark.skipif(gui_problem() is not None, reason=f"gui: {gui_problem()}")


@pytest.fixture(scope="module")
def tiny_stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    env = stack_env(tmp_path_factory.mktemp("tiny-agents") / "data", model_path=tiny_model)
    env.update(
        OPENCLAW_RL_TRAINING__AUTO_START="false",
        OPENCLAW_RL_ENVS__SANDBOX__ROOT=f"/tmp/oc-tiny-{uuid.uuid4().hex[:8]}",
        OPENCLAW_RL_ENVS__TERMINAL__MAX_STEPS="2",
        OPENCLAW_RL_ENVS__TERMINAL__MAX_TOKENS="24",
        OPENCLAW_RL_ENVS__TOOLCALL__MAX_STEPS="2",
        OPENCLAW_RL_ENVS__TOOLCALL__MAX_TOKENS="24",
        OPENCLAW_RL_ENVS__GUI__MAX_STEPS="2",
        OPENCLAW_RL_ENVS__GUI__MAX_TOKENS="24",
        OPENCLAW_RL_ENVS__GUI__PRM_VOTES="1",
        OPENCLAW_RL_ENVS__GUI__SETTLE_S="0.05",
    )
    stack = RunningStack(env).start()
    yield stack
    stack.stop()


def cli(stack: RunningStack, *args: str, timeout: float = 300) -> str:
    out = subprocess.run(CLI + list(args), env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.parametrize(
    "setting, task",
    [
        ("terminal", "files-dedupe"),
        ("toolcall", "math/3"),
        ("toolcall", "bfcl/multi_turn_base_2"),
        pytest.param("gui", "click-button/7", marks=_needs_gui),  # the env worker's Chromium (tests/envs/test_gui_*)
    ],
)
def test_the_tiny_model_runs_an_episode_of_each_environment(tiny_stack, setting, task):
    out = cli(tiny_stack, "episodes", "start", "--setting", setting, "--task", task, "--wait")
    result = EpisodeResult.model_validate_json(out[out.index("{") :])
    assert result.steps and 0.0 <= result.outcome <= 1.0
    r = redis.Redis.from_url(tiny_stack.redis)
    for step in result.steps:  # every step's tokens, from the engine, kept for training
        tokens = r.hgetall(keys.turn_data(step.step_id))
        assert tokens[b"response_ids"] and tokens[b"weight_version"] == b"0"
        assert step.completion_tokens > 0 and step.votes  # the heuristic step judge voted


async def test_a_rollout_keeps_environments_busy_and_finishes_its_task_set(tiny_stack):
    out = cli(
        tiny_stack,
        "episodes",
        "rollout",
        "--setting",
        "terminal",
        "--tasks",
        "files-dedupe",
        "text-top-ips",
        "--samples",
        "2",
        "--parallel",
        "4",
        "--no-publish",
    )
    wf_id = out.split()[-1]
    client = await Client.connect(tiny_stack.temporal, data_converter=pydantic_data_converter)
    progress: RolloutProgress = await asyncio.wait_for(
        client.get_workflow_handle(wf_id, result_type=RolloutProgress).result(), 300
    )
    assert (
        progress.groups_total == 2
        and progress.groups_done == 2
        and progress.episodes_done == 4
        and progress.running == 0
    )
    watched = cli(tiny_stack, "episodes", "watch", wf_id, "--once")
    assert "2/2 groups" in watched and "4 episodes" in watched
    listed = json.loads(cli(tiny_stack, "episodes", "--setting", "terminal", "--json", "--limit", "50"))
    assert sum(1 for e in listed if e["id"].startswith(f"episode/{wf_id.split('/', 1)[1]}.g")) == 4
