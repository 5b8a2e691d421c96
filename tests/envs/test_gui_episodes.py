"""GUI episodes through the whole stack: `up`, the real workflows and pools, the env worker's own headless Chromium.

A scripted policy (tests/scripted_policy.py) plays the oracle or a wrong policy
from what the prompt shows (the task's utterance and the latest page listing).
The built-in tiny model's gui episode runs in tests/envs/test_tiny_model_episodes.py,
on that module's stack (one stack start fewer).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import redis
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter

from contracts.episodes import EpisodeResult
from envs.gui import oracle
from store import keys
from tests.envs.gui_support import gui_problem
from tests.helpers import CLI, REPO, RunningStack, stack_env
from tests.scripted_policy import ScriptedPolicy, tool_call

pytestmark = [pytest.mark.timeout(600), pytest.mark.skipif(gui_problem() is not None, reason=f"{gui_problem()}")]

TEMPORAL = REPO / ".venv" / "bin" / "temporal"
SLOW_STEPS = 3
"""The dialog task's script scrolls this many times before closing it: time to kill the browser mid-episode."""


def script(prompt: str) -> str:
    """The oracle on checkboxes, autocomplete and dialogs (after a few scrolls); the wrong policy on click-button."""
    if "You are a GUI agent" not in prompt:
        return "I cannot help with that."
    done = prompt.count("<|im_start|>assistant") - 1  # the last one is the generation prompt
    utterance = prompt.split("<|im_start|>user\n", 1)[1].split("\n\n", 1)[0]
    listing = oracle.latest_listing(prompt).split("<|im_end|>", 1)[0]
    if utterance.startswith("Select ") and "click Submit" in utterance:
        task, wrong = "click-checkboxes", False
    elif utterance.startswith("Enter an item that starts with"):
        task, wrong = "use-autocomplete", False
    elif utterance.startswith("Close the dialog box"):
        if done < SLOW_STEPS:
            return tool_call("scroll", direction="down")
        task, wrong = "click-dialog", False
    elif re.match(r'Click on the ".*" button', utterance):
        task, wrong = "click-button", True
    else:
        return tool_call("done")
    return "\n".join(tool_call(n, **a) for n, a in oracle.next_calls(task, utterance, listing, wrong))


@pytest.fixture(scope="module")
def gui_stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    with ScriptedPolicy(tiny_model, script) as policy:
        env = stack_env(tmp_path_factory.mktemp("gui-agents") / "data", model_path=tiny_model)
        env.update(
            OPENCLAW_RL_POLICY__SERVER_URLS=json.dumps([policy.url]),
            OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',
            OPENCLAW_RL_TRAINING__AUTO_START="false",
            OPENCLAW_RL_ENVS__SANDBOX__ROOT=f"/tmp/oc-gui-{uuid.uuid4().hex[:8]}",
            OPENCLAW_RL_ENVS__ENV_LOST_AFTER_S="4",
            OPENCLAW_RL_ENVS__GUI__MAX_STEPS="6",
            OPENCLAW_RL_ENVS__GUI__PRM_VOTES="1",
            OPENCLAW_RL_ENVS__GUI__SETTLE_S="0.05",
        )
        stack = RunningStack(env).start()
        yield stack
        stack.stop()


def cli(stack: RunningStack, *args: str, timeout: float = 180) -> str:
    out = subprocess.run(CLI + list(args), env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def temporal_start(stack: RunningStack, wf_id: str, payload: dict) -> None:
    args = ["workflow", "start", "--address", stack.temporal, "--type", "EpisodeWorkflow"]
    args += ["--task-queue", "openclaw-rl-workflow", "--workflow-id", wf_id, "--input", json.dumps(payload)]
    out = subprocess.run([str(TEMPORAL), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


async def result_of(stack: RunningStack, wf_id: str, timeout: float = 180) -> EpisodeResult:
    client = await Client.connect(stack.temporal, data_converter=pydantic_data_converter)
    return await asyncio.wait_for(client.get_workflow_handle(wf_id, result_type=EpisodeResult).result(), timeout)


async def test_the_oracle_solves_gui_tasks_and_a_wrong_policy_fails_through_the_real_workflows(gui_stack):
    out = cli(gui_stack, "episodes", "run", "--setting", "gui", "--task", "click-checkboxes", "--seed", "3")
    ok = EpisodeResult.model_validate_json(out[out.index("{") :])
    assert ok.task_id == "click-checkboxes/3" and ok.outcome == 1.0 and ok.end == "submitted"
    assert ok.steps[0].action.startswith("click(") and ok.steps[0].votes == [1]
    auto, bad = f"episode/gui-{uuid.uuid4().hex[:6]}", f"episode/gui-{uuid.uuid4().hex[:6]}"
    temporal_start(gui_stack, auto, {"setting": "gui", "task_id": "use-autocomplete/3"})
    temporal_start(gui_stack, bad, {"setting": "gui", "task_id": "click-button/3"})
    multi, ko = await result_of(gui_stack, auto), await result_of(gui_stack, bad)
    assert multi.outcome == 1.0 and len(multi.steps) == 2 and multi.steps[0].action.startswith("type(")
    assert ko.outcome == 0.0 and ko.steps
    r = redis.Redis.from_url(gui_stack.redis)
    assert r.hget(keys.turn_data(multi.steps[1].step_id), "response_ids")  # tokens kept for training
    stored = json.loads(r.hget(keys.episode_steps(multi.attempt_key), keys.step_observation_field(0)))["observation"]
    assert Path(stored["screenshot"]).is_file() and stored["screenshot"] not in multi.steps[0].observation
    shown = cli(gui_stack, "episodes", "show", auto)
    shots = re.findall(r"screenshot:\s+(\S+\.png)", shown)
    assert len(shots) == 2 and all(Path(s).read_bytes()[:4] == b"\x89PNG" for s in shots), shown
    opening = re.search(r"screenshots: (\S+)/ \(opening: (\S+)\)", shown)
    assert opening and (Path(opening[1]) / opening[2]).is_file()
    assert str(gui_stack.data_dir) in shots[0]  # in the stack's data directory


def browser_pids(stack: RunningStack) -> list[int]:
    """The env worker's Chromium main processes (chromedriver's children)."""
    todo, found = [stack.service_pid("worker-env")], []
    while todo:
        pid = todo.pop()
        try:
            kids = [int(k) for f in Path(f"/proc/{pid}/task").glob("*/children") for k in f.read_text().split()]
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if name == "chromedriver":
            found += kids
        else:
            todo += kids
    return found


def kill_browser_mid_episode(stack: RunningStack, wf_id: str) -> int:
    r = redis.Redis.from_url(stack.redis)
    deadline = time.monotonic() + 60
    while not r.hexists(keys.episode_steps(keys.episode_attempt(wf_id, 1)), keys.step_action_field(0)):
        assert time.monotonic() < deadline, "the episode never reached its first step"
        time.sleep(0.05)
    [pid] = browser_pids(stack)
    os.kill(pid, signal.SIGKILL)
    return pid


async def test_a_browser_killed_mid_episode_fails_it_cleanly_and_the_next_episode_gets_a_new_browser(gui_stack):
    failed = f"episode/gui-kill-{uuid.uuid4().hex[:6]}"
    temporal_start(gui_stack, failed, {"setting": "gui", "task_id": "click-dialog/3", "config": {"attempts": 1}})
    old = kill_browser_mid_episode(gui_stack, failed)
    with pytest.raises(Exception):
        await result_of(gui_stack, failed)
    client = await Client.connect(gui_stack.temporal, data_converter=pydantic_data_converter)
    assert (await client.get_workflow_handle(failed).describe()).status == WorkflowExecutionStatus.FAILED
    after = f"episode/gui-next-{uuid.uuid4().hex[:6]}"
    temporal_start(gui_stack, after, {"setting": "gui", "task_id": "click-dialog/3"})
    result = await result_of(gui_stack, after)
    assert result.outcome == 1.0 and result.attempt == 1 and len(result.steps) == SLOW_STEPS + 1
    assert browser_pids(gui_stack) and old not in browser_pids(gui_stack)  # a new browser, same worker
    # With attempts left, the episode whose browser dies starts over on a fresh one and succeeds.
    retried = f"episode/gui-retry-{uuid.uuid4().hex[:6]}"
    temporal_start(gui_stack, retried, {"setting": "gui", "task_id": "click-dialog/4"})
    kill_browser_mid_episode(gui_stack, retried)
    result = await result_of(gui_stack, retried)
    assert result.attempt == 2 and result.outcome == 1.0 and all(":a2:" in s.step_id for s in result.steps)
