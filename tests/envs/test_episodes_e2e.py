"""General-agent episodes through the whole stack: `up`, the real workflows and pools, real sandboxes.

The policy is a scripted server speaking SGLang's wire format (it stands in for a
GPU LLM): per task it plays the oracle (the task's own solution) or a wrong
policy, so outcomes are known in advance. Judging is the heuristic step judge.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import redis
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter

from contracts.episodes import EpisodeResult, TaskGroupResult
from envs.sandbox import sandbox_problem
from envs.terminal.source import TerminalTasks
from envs.toolcall.bfcl import BfclTasks, oracle_turns
from envs.toolcall.math_tasks import generate
from openclaw_rl import redis_keys
from tests.helpers import CLI, REPO, RunningStack, stack_env
from tests.scripted_policy import ScriptedPolicy, tool_call

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
]

TEMPORAL = REPO / ".venv" / "bin" / "temporal"
ORACLE_TASK, WRONG_TASK, SLOW_TASK, GROUP_TASK = (
    "text-top-ips",
    "files-dedupe",
    "sqlite-add-column",
    "git-revert-commit",
)
MATH = {p.task_id: p for p in generate(200)}
ORACLE_MATH, WRONG_MATH = "math/0", "math/1"
BFCL_TASK, SILENT_BFCL = "bfcl/multi_turn_base_0", "bfcl/multi_turn_base_1"
TURN_DONE = "Done with this request."


class Script:
    """Decides each step from the prompt: which task it is, and what the episode did so far."""

    def __init__(self) -> None:
        tasks = TerminalTasks()
        self.terminal = {t: tasks.get(t) for t in (ORACLE_TASK, WRONG_TASK, SLOW_TASK, GROUP_TASK)}
        self.group_episodes = 0
        self.lock = threading.Lock()
        self.bfcl = BfclTasks(categories=("multi_turn_base",)).entry(BFCL_TASK)
        self.bfcl_calls = oracle_turns(self.bfcl)
        self.bfcl_opening = next(m["content"] for m in self.bfcl.turns[0] if m.get("role") == "user")[:80]
        silent = BfclTasks(categories=("multi_turn_base",)).entry(SILENT_BFCL)
        self.silent_opening = next(m["content"] for m in silent.turns[0] if m.get("role") == "user")[:80]

    def __call__(self, prompt: str) -> str:
        done = prompt.count("<|im_start|>assistant") - 1  # the last one is the generation prompt
        for task_id, task in self.terminal.items():
            if task.instruction.strip()[:80] in prompt:
                return self.terminal_step(task_id, task, prompt, done)
        for task_id in (ORACLE_MATH, WRONG_MATH):
            if MATH[task_id].question[:80] in prompt:
                truth = MATH[task_id].answer
                if task_id == WRONG_MATH:
                    return "The answer is \\boxed{-12345}."
                return (
                    tool_call("python", code=f"print({truth!r})")
                    if done == 0
                    else f"So the answer is \\boxed{{{truth}}}."
                )
        if self.bfcl_opening in prompt:
            return self.bfcl_step(prompt)
        if self.silent_opening in prompt:
            return TURN_DONE  # never calls a function: BFCL's state check fails
        return "I cannot help with that."

    def bfcl_step(self, prompt: str) -> str:
        """Replay BFCL's ground truth: a turn's calls in one step, then a reply without calls to end the turn."""
        last = prompt.rsplit("<|im_start|>", 2)[-2]
        if "<tool_response>" in last:
            return TURN_DONE
        turn = prompt.count(TURN_DONE)
        return "\n".join(tool_call(c.name, **c.arguments) for c in self.bfcl_calls[turn]) or TURN_DONE

    def terminal_step(self, task_id: str, task, prompt: str, done: int) -> str:
        solve = (task.root / "solution" / "solve.sh").read_text()
        if done > 0:
            return tool_call("submit")
        if task_id == WRONG_TASK:
            return tool_call("submit")
        if task_id == SLOW_TASK:
            return tool_call("bash", command="sleep 6\n" + solve)
        if task_id == GROUP_TASK:  # alternate solvers and quitters, so the group's buckets are not constant
            with self.lock:
                self.group_episodes += 1
                if self.group_episodes % 2:
                    return tool_call("submit")
        return tool_call("bash", command=solve)


@pytest.fixture(scope="module")
def agent_stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    script = Script()
    with ScriptedPolicy(tiny_model, script) as policy:
        data = tmp_path_factory.mktemp("agents") / "data"
        env = stack_env(data, model_path=tiny_model)
        env.update(
            OPENCLAW_RL_POLICY__SERVER_URLS=json.dumps([policy.url]),
            OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',
            OPENCLAW_RL_TRAINING__AUTO_START="false",
            OPENCLAW_RL_ENVS__SANDBOX__ROOT=f"/tmp/oc-e2e-{uuid.uuid4().hex[:8]}",
            OPENCLAW_RL_ENVS__ENV_LOST_AFTER_S="4",
            OPENCLAW_RL_ENVS__TERMINAL__MAX_STEPS="4",
        )
        stack = RunningStack(env).start()
        yield stack, policy
        stack.stop()


def cli(stack: RunningStack, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    out = subprocess.run(CLI + list(args), env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


async def client_for(stack: RunningStack) -> Client:
    return await Client.connect(stack.temporal, data_converter=pydantic_data_converter)


async def result_of(stack: RunningStack, wf_id: str, result_type=EpisodeResult, timeout: float = 240):
    client = await client_for(stack)
    handle = client.get_workflow_handle(wf_id, result_type=result_type)
    return await asyncio.wait_for(handle.result(), timeout)


def temporal_start(stack: RunningStack, workflow_type: str, wf_id: str, payload: dict) -> None:
    """The README's `temporal workflow start` command, as a user types it."""
    out = subprocess.run(
        [
            str(TEMPORAL),
            "workflow",
            "start",
            "--address",
            stack.temporal,
            "--type",
            workflow_type,
            "--task-queue",
            "openclaw-rl-workflow",
            "--workflow-id",
            wf_id,
            "--input",
            json.dumps(payload),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr


async def test_oracle_solves_and_a_wrong_policy_fails_a_terminal_task_started_with_the_temporal_cli(agent_stack):
    stack, _ = agent_stack
    good, bad = f"episode/e2e-{uuid.uuid4().hex[:6]}", f"episode/e2e-{uuid.uuid4().hex[:6]}"
    temporal_start(stack, "EpisodeWorkflow", good, {"setting": "terminal", "task_id": ORACLE_TASK})
    temporal_start(stack, "EpisodeWorkflow", bad, {"setting": "terminal", "task_id": WRONG_TASK})
    ok, ko = await result_of(stack, good), await result_of(stack, bad)
    assert ok.outcome == 1.0 and ok.end == "submitted" and [s.index for s in ok.steps] == [0, 1]
    assert ok.steps[0].action.startswith("bash(") and ok.steps[0].votes == [1]  # the heuristic judge saw exit 0
    assert ko.outcome < 1.0 and ko.end == "submitted" and len(ko.steps) == 1
    r = redis.Redis.from_url(stack.redis)
    assert r.hget(redis_keys.turn_data(ok.steps[0].step_id), "response_ids")  # token data kept for training
    shown = cli(stack, "episodes", "show", good).stdout
    assert "outcome 1" in shown and "#0" in shown and "votes [+1]" in shown
    listed = cli(stack, "episodes", "--setting", "terminal", "--status", "completed").stdout
    assert good[:46] in listed and bad[:46] in listed


async def test_tool_call_math_oracle_and_wrong_answer(agent_stack):
    stack, _ = agent_stack
    good, bad = f"episode/math-{uuid.uuid4().hex[:6]}", f"episode/math-{uuid.uuid4().hex[:6]}"
    temporal_start(stack, "EpisodeWorkflow", good, {"setting": "toolcall", "task_id": ORACLE_MATH})
    temporal_start(stack, "EpisodeWorkflow", bad, {"setting": "toolcall", "task_id": WRONG_MATH})
    ok, ko = await result_of(stack, good), await result_of(stack, bad)
    assert ok.outcome == 1.0 and ok.end == "answered" and ok.steps[0].action.startswith("python(")
    assert ko.outcome == 0.0 and len(ko.steps) == 1


async def test_bfcl_oracle_passes_bfcls_own_checker_and_silence_fails_it(agent_stack):
    stack, _ = agent_stack
    good = f"episode/bfcl-{uuid.uuid4().hex[:6]}"
    bad = f"episode/bfcl-{uuid.uuid4().hex[:6]}"
    temporal_start(stack, "EpisodeWorkflow", good, {"setting": "toolcall", "task_id": BFCL_TASK})
    temporal_start(stack, "EpisodeWorkflow", bad, {"setting": "toolcall", "task_id": SILENT_BFCL})
    ok, ko = await result_of(stack, good), await result_of(stack, bad)
    assert ko.outcome == 0.0 and all(s.tool_calls == 0 for s in ko.steps)
    assert ok.outcome == 1.0 and ok.end == "no_more_turns"
    assert sum(s.tool_calls > 0 for s in ok.steps) == len([c for c in oracle_turns(Script().bfcl) if c])


async def test_a_task_group_publishes_each_step_sample_exactly_once(agent_stack):
    stack, _ = agent_stack
    group_id = f"e2e-{uuid.uuid4().hex[:6]}"
    temporal_start(
        stack,
        "TaskGroupWorkflow",
        f"group/{group_id}",
        {"group_id": group_id, "setting": "terminal", "task_id": GROUP_TASK, "samples": 4},
    )
    result: TaskGroupResult = await result_of(stack, f"group/{group_id}", TaskGroupResult)
    assert sorted(result.outcomes) == [0.0, 0.0, 1.0, 1.0] and result.failed == 0
    r = redis.Redis.from_url(stack.redis)
    ids = [json.loads(f[b"meta"])["sample_id"] for _, f in r.xrange(redis_keys.sample_stream("terminal"))]
    mine = [i for i in ids if i.startswith(f"episode/{group_id}/")]
    assert len(mine) == result.published > 0 and len(set(mine)) == len(mine)  # no step sample twice
    shown = cli(stack, "episodes", "show", f"episode/{group_id}/0").stdout
    assert "advantage" in shown


def kill_env_worker_during_step(stack: RunningStack, wf_id: str) -> int:
    """kill -9 the env worker while the episode's slow command runs in its sandbox."""
    r = redis.Redis.from_url(stack.redis)
    deadline = time.monotonic() + 60
    while not r.exists(redis_keys.episode_action(redis_keys.episode_attempt(wf_id, 1), 0)):
        assert time.monotonic() < deadline, "the episode never reached its first step"
        time.sleep(0.1)
    time.sleep(1.0)  # env_step is now running `sleep 6` in the sandbox
    pid = stack.service_pid("worker-env")
    os.kill(pid, signal.SIGKILL)
    return pid


async def test_kill_9_of_the_env_worker_mid_episode_restarts_it_on_another_worker(agent_stack):
    stack, _ = agent_stack
    wf_id = f"episode/kill-{uuid.uuid4().hex[:6]}"
    temporal_start(
        stack,
        "EpisodeWorkflow",
        wf_id,
        {"setting": "terminal", "task_id": SLOW_TASK, "config": {"env_lost_after_s": 4}},
    )
    old = kill_env_worker_during_step(stack, wf_id)
    stack.wait_restarted("worker-env", old)
    result = await result_of(stack, wf_id)
    assert result.attempt == 2 and result.outcome == 1.0
    assert all(":a2:" in s.step_id for s in result.steps)


async def test_a_failed_episode_is_brought_to_success_by_episodes_retry(agent_stack):
    stack, _ = agent_stack
    wf_id = f"episode/retry-{uuid.uuid4().hex[:6]}"
    temporal_start(
        stack,
        "EpisodeWorkflow",
        wf_id,
        {"setting": "terminal", "task_id": SLOW_TASK, "config": {"attempts": 1, "env_lost_after_s": 4}},
    )
    old = kill_env_worker_during_step(stack, wf_id)
    client = await client_for(stack)
    with pytest.raises(Exception):
        await result_of(stack, wf_id)
    assert (await client.get_workflow_handle(wf_id).describe()).status == WorkflowExecutionStatus.FAILED
    stack.wait_restarted("worker-env", old)
    out = cli(stack, "episodes", "retry", "--task", SLOW_TASK, "--since", "10m").stdout
    new_id = re.search(rf"retrying {re.escape(wf_id)} \(failed\) as (\S+)", out).group(1)
    result = await result_of(stack, new_id)
    assert result.outcome == 1.0
    desc = await client.get_workflow_handle(new_id).describe()
    memo = await desc.memo()
    assert memo["retry_of"] == wf_id  # linked to the failed run
