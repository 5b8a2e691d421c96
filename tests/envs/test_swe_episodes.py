"""SWE episodes through the whole stack: `up`, the real workflows and pools, real sandboxes.

A scripted policy (SGLang's wire format, as in test_episodes_e2e.py) plays the
oracle on one task (a bash step that applies the fix with `git apply`, then the
submit command) and a wrong policy on another (a reply without a bash block,
a look around, a submission with nothing fixed); then the built-in tiny model
runs an SWE episode end to end on the embedded engine.
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

from contracts.episodes import EpisodeResult
from envs.sandbox import sandbox_problem
from envs.swe import SweTasks
from envs.swe.protocol import SUBMIT_COMMAND
from store import keys
from tests.helpers import CLI, REPO, RunningStack, stack_env
from tests.scripted_policy import ScriptedPolicy

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
]

ORACLE_TASK, WRONG_TASK, TINY_TASK = "pager__paginate-1", "humaneval__is_prime-31", "humaneval__below_zero-3"


def bash(command: str, thought: str) -> str:
    return f"THOUGHT: {thought}\n\n```bash\n{command}\n```"


class Script:
    """Each step decided from the prompt: which task it is, and how many steps the episode took so far."""

    def __init__(self) -> None:
        tasks = SweTasks()
        self.tasks = {t: tasks.get(t) for t in (ORACLE_TASK, WRONG_TASK)}

    def __call__(self, prompt: str) -> str:
        done = prompt.count("<|im_start|>assistant") - 1  # the last one is the generation prompt
        for task_id, inst in self.tasks.items():
            if inst.problem_statement.strip()[:80] in prompt:
                return self.oracle(inst, done) if task_id == ORACLE_TASK else self.wrong(done)
        return "I cannot help with that."

    def oracle(self, inst, done: int) -> str:
        if done == 0:
            return bash(f"git apply <<'EOF_PATCH'\n{inst.patch}EOF_PATCH", "Apply the fix to the page arithmetic.")
        return bash(SUBMIT_COMMAND, "The fix is in; submitting.")

    def wrong(self, done: int) -> str:
        if done == 0:
            return "I believe the function is fine as it is."  # no bash block: a format error
        if done == 1:
            return bash("cat README.md", "Look around.")
        return bash(SUBMIT_COMMAND, "Nothing to change.")


async def result_of(stack: RunningStack, wf_id: str, timeout: float = 240) -> EpisodeResult:
    client = await Client.connect(stack.temporal, data_converter=pydantic_data_converter)
    handle = client.get_workflow_handle(wf_id, result_type=EpisodeResult)
    return await asyncio.wait_for(handle.result(), timeout)


def cli(stack: RunningStack, *args: str, timeout: float = 300) -> str:
    out = subprocess.run(CLI + list(args), env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def temporal_start(stack: RunningStack, wf_id: str, payload: dict) -> None:
    out = subprocess.run(
        [str(REPO / ".venv" / "bin" / "temporal"), "workflow", "start", "--address", stack.temporal,
         "--type", "EpisodeWorkflow", "--task-queue", "openclaw-rl-workflow", "--workflow-id", wf_id,
         "--input", json.dumps(payload)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture(scope="class")  # stops before the tiny model's stack starts
def swe_stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    with ScriptedPolicy(tiny_model, Script()) as policy:
        env = stack_env(tmp_path_factory.mktemp("swe-agents") / "data", model_path=tiny_model)
        env.update(
            OPENCLAW_RL_POLICY__SERVER_URLS=json.dumps([policy.url]),
            OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',
            OPENCLAW_RL_TRAINING__AUTO_START="false",
            OPENCLAW_RL_ENVS__SANDBOX__ROOT=f"/tmp/oc-swe-e2e-{uuid.uuid4().hex[:8]}",
            OPENCLAW_RL_ENVS__SWE__MAX_STEPS="5",
        )
        stack = RunningStack(env).start()
        yield stack
        stack.stop()


class TestScriptedPolicies:
    """The scripted oracle and wrong policies, on a stack of their own (class-scoped)."""

    async def test_the_oracle_resolves_an_swe_task_and_a_wrong_policy_does_not(self, swe_stack):
        good, bad = f"episode/swe-{uuid.uuid4().hex[:6]}", f"episode/swe-{uuid.uuid4().hex[:6]}"
        temporal_start(swe_stack, good, {"setting": "swe", "task_id": ORACLE_TASK})
        temporal_start(swe_stack, bad, {"setting": "swe", "task_id": WRONG_TASK})
        ok, ko = await result_of(swe_stack, good), await result_of(swe_stack, bad)
        assert ok.outcome == 1.0 and ok.end == "submitted" and [s.index for s in ok.steps] == [0, 1]
        assert "git apply" in ok.steps[0].action and ok.steps[0].observation.startswith("[user] <returncode>0")
        assert ok.steps[0].votes == [1]  # the heuristic judge read return code 0
        assert ko.outcome == -1.0 and ko.end == "submitted" and len(ko.steps) == 3
        assert "Format error" in ko.steps[0].observation and ko.steps[0].votes == [-1]
        assert ko.steps[0].tool_calls == 0 and ko.steps[0].parse_error is None  # text protocol: no tool calls
        r = redis.Redis.from_url(swe_stack.redis)
        assert r.hget(keys.turn_data(ok.steps[0].step_id), "response_ids")  # token data kept for training
        shown = cli(swe_stack, "episodes", "show", good)
        assert "outcome 1" in shown and "#0" in shown

    async def test_the_step_limit_ends_an_episode_that_never_submits(self, swe_stack):
        wf_id = f"episode/swe-{uuid.uuid4().hex[:6]}"
        temporal_start(swe_stack, wf_id, {"setting": "swe", "task_id": "csvstats__empty-column-3"})
        result = await result_of(swe_stack, wf_id)
        # the script does not know this task: every reply is a format error, until the step limit (5, the setting's)
        assert result.outcome == -1.0 and result.end == "step_limit" and len(result.steps) == 5
        assert all("Format error" in s.observation for s in result.steps)


@pytest.fixture(scope="module")
def tiny_stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    env = stack_env(tmp_path_factory.mktemp("tiny-swe") / "data", model_path=tiny_model)
    env.update(
        OPENCLAW_RL_TRAINING__AUTO_START="false",
        OPENCLAW_RL_ENVS__SANDBOX__ROOT=f"/tmp/oc-tiny-swe-{uuid.uuid4().hex[:8]}",
        OPENCLAW_RL_ENVS__SWE__MAX_STEPS="2",
        OPENCLAW_RL_ENVS__SWE__MAX_TOKENS="24",
    )
    stack = RunningStack(env).start()
    yield stack
    stack.stop()


def test_the_tiny_model_runs_an_swe_episode(tiny_stack):
    out = cli(tiny_stack, "episodes", "run", "--setting", "swe", "--task", TINY_TASK, "--wait")
    result = EpisodeResult.model_validate_json(out[out.index("{") :])
    assert result.setting == "swe" and result.steps and result.outcome in (-1.0, 1.0)
    r = redis.Redis.from_url(tiny_stack.redis)
    for step in result.steps:  # every step's tokens, from the engine, kept for training
        tokens = r.hgetall(keys.turn_data(step.step_id))
        assert tokens[b"response_ids"] and tokens[b"weight_version"] == b"0"
        assert step.completion_tokens > 0 and step.votes  # the heuristic step judge voted
    listed = cli(tiny_stack, "episodes", "tasks", "--setting", "swe")
    assert TINY_TASK in listed and ORACLE_TASK in listed
