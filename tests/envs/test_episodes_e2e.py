"""General-agent episodes through the whole stack: `up`, the real workflows and pools, real sandboxes.

The policy is a scripted server speaking SGLang's wire format (it stands in for a
GPU LLM): per task it plays the oracle (the task's own solution) or a wrong
policy, so outcomes are known in advance. Judging is the heuristic step judge.
The last test mixes all four settings in one rollout (the oracle and a quitter
taking turns on one task of each, so every group has samples to publish) and
trains one step on what it published.
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
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter

from contracts.episodes import EpisodeResult, RolloutProgress, TaskGroupResult
from envs.gui import oracle as gui_oracle
from envs.sandbox import sandbox_problem
from envs.swe import SweTasks
from envs.swe.protocol import SUBMIT_COMMAND
from envs.terminal.source import TerminalTasks
from envs.toolcall.bfcl import BfclTasks, oracle_turns
from envs.toolcall.math_tasks import generate
from store import keys
from tests.envs.gui_support import gui_problem
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
MIX_MATH, MIX_SWE, MIX_GUI = "math/2", "pager__paginate-1", "click-button"
"""The mixed rollout's tasks besides GROUP_TASK: the oracle and a quitter take turns on each."""
SETTINGS = ("terminal", "toolcall", "swe", "gui")
CALC = "calc/1"
"""A task of the example environment plugin (examples/calc-env), installed for this module's stack."""


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
        self.swe = SweTasks().get(MIX_SWE)
        self.turns: dict[str, int] = {}

    def quits(self, task_id: str) -> bool:
        """Every other episode of `task_id` quits at once (decided at its first step): groups that are not constant."""
        with self.lock:
            self.turns[task_id] = self.turns.get(task_id, 0) + 1
            return self.turns[task_id] % 2 == 1

    def __call__(self, prompt: str) -> str:
        done = prompt.count("<|im_start|>assistant") - 1  # the last one is the generation prompt
        for task_id, task in self.terminal.items():
            if task.instruction.strip()[:80] in prompt:
                return self.terminal_step(task_id, task, prompt, done)
        for task_id in (ORACLE_MATH, WRONG_MATH, MIX_MATH):
            if MATH[task_id].question[:80] in prompt:
                truth = MATH[task_id].answer
                if task_id == WRONG_MATH:
                    return "The answer is \\boxed{-12345}."
                if task_id == MIX_MATH and done == 0 and self.quits(task_id):
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
        if self.swe.problem_statement.strip()[:80] in prompt:
            return self.swe_step(done)
        if "You are a GUI agent" in prompt:
            return self.gui_step(prompt, done)
        if "A crate holds" in prompt:
            return self.calc_step(prompt, done)
        return "I cannot help with that."

    def calc_step(self, prompt: str, done: int) -> str:
        """The plugin's arithmetic: the oracle asks the calculator, then boxes what it said; the quitter guesses."""
        if done == 0:
            if self.quits(CALC):
                return "It is \\boxed{0}."
            a, b, c = re.search(r"holds (\d+) boxes of (\d+) bolts, plus (\d+)", prompt).groups()
            return tool_call("calculator", expression=f"{a} * {b} + {c}")
        value = re.findall(r"<tool_response>\n?(-?\d+)", prompt)[-1]
        return f"So \\boxed{{{value}}}."

    def swe_step(self, done: int) -> str:
        """The oracle applies the fix patch, then submits; the quitter submits with nothing fixed."""
        if done == 0 and not self.quits(MIX_SWE):
            return f"THOUGHT: Apply the fix.\n\n```bash\ngit apply <<'EOF_PATCH'\n{self.swe.patch}EOF_PATCH\n```"
        return f"THOUGHT: Submitting.\n\n```bash\n{SUBMIT_COMMAND}\n```"

    def gui_step(self, prompt: str, done: int) -> str:
        """click-button: the oracle clicks the button the utterance names; the quitter says it is done."""
        utterance = prompt.split("<|im_start|>user\n", 1)[1].split("\n\n", 1)[0]
        if done > 0 or not re.match(r'Click on the ".*" button', utterance) or self.quits(MIX_GUI):
            return tool_call("done")
        listing = gui_oracle.latest_listing(prompt).split("<|im_end|>", 1)[0]
        return "\n".join(tool_call(n, **a) for n, a in gui_oracle.next_calls(MIX_GUI, utterance, listing, False))

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
    plugins = install_example_plugin(tmp_path_factory.mktemp("plugins"))
    with ScriptedPolicy(tiny_model, script) as policy:
        data = tmp_path_factory.mktemp("agents") / "data"
        env = stack_env(data, model_path=tiny_model)
        env.update(
            # The example plugin, installed as a user would (pip), beside one the settings name that cannot load.
            PYTHONPATH=os.pathsep.join(filter(None, [str(plugins), env.get("PYTHONPATH")])),
            OPENCLAW_RL_ENVS__PLUGINS=json.dumps(
                {"calc": {"max_steps": 3, "count": 5}, "broken": {"factory": "no_such_package.env:make"}}
            ),
            OPENCLAW_RL_POLICY__SERVER_URLS=json.dumps([policy.url]),
            OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',
            OPENCLAW_RL_TRAINING__AUTO_START="false",
            OPENCLAW_RL_ENVS__SANDBOX__ROOT=f"/tmp/oc-e2e-{uuid.uuid4().hex[:8]}",
            OPENCLAW_RL_ENVS__ENV_LOST_AFTER_S="4",
            OPENCLAW_RL_ENVS__TERMINAL__MAX_STEPS="4",
            OPENCLAW_RL_ENVS__SWE__MAX_STEPS="4",
            OPENCLAW_RL_ENVS__GUI__MAX_STEPS="4",
            OPENCLAW_RL_ENVS__GUI__SETTLE_S="0.05",
            # The mixed rollout's train step (started by the test: auto_start is off) draws on all four streams.
            OPENCLAW_RL_TRAINING__SOURCE_WEIGHTS=json.dumps({s: 1.0 for s in (*SETTINGS, "calc")}),
            OPENCLAW_RL_TRAINING__BATCH_SIZE="8",
            OPENCLAW_RL_TRAINING__WAIT_S="5",
            # the step's line in records/trained.jsonl is its durable checkpoint's, one per version here
            OPENCLAW_RL_TRAINING__CHECKPOINT__EVERY_VERSIONS="1",
        )
        stack = RunningStack(env).start()
        yield stack, policy
        stack.stop()


def install_example_plugin(target: Path) -> Path:
    """`pip install examples/calc-env` into `target` (offline: setuptools is in the venv); its entry point with it."""
    subprocess.run(
        [str(REPO / ".venv" / "bin" / "pip"), "install", "-q", "--no-deps", "--no-build-isolation"]
        + ["--target", str(target), str(REPO / "examples" / "calc-env")],
        check=True,
        capture_output=True,
        timeout=180,
    )
    return target


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
    assert r.hget(keys.turn_data(ok.steps[0].step_id), "response_ids")  # token data kept for training
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
    ids = [f[b"id"].decode() for _, f in r.xrange(keys.sample_stream("terminal"))]
    mine = [i for i in ids if i.startswith(f"episode/{group_id}/")]
    assert len(mine) == result.published > 0 and len(set(mine)) == len(mine)  # no step sample twice
    shown = cli(stack, "episodes", "show", f"episode/{group_id}/0").stdout
    assert "advantage" in shown


async def test_an_installed_environment_plugin_runs_like_a_built_in_setting_and_a_broken_one_is_named(agent_stack):
    stack, _ = agent_stack
    listing = subprocess.run(
        CLI + ["episodes", "tasks"], env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=120
    )
    # The broken plugin is named with its cause; every other setting, the installed plugin's included, is listed.
    assert listing.returncode == 1 and "environment plugin 'broken'" in listing.stderr
    assert "no_such_package" in listing.stderr and "calc/4" in listing.stdout and ORACLE_TASK in listing.stdout
    tasks = json.loads(cli(stack, "episodes", "tasks", "--setting", "calc", "--json").stdout)
    assert [t["task_id"] for t in tasks] == [f"calc/{i}" for i in range(5)]  # `count` from [envs.plugins.calc]

    out = cli(stack, "episodes", "group", "--setting", "calc", "--task", CALC, "--samples", "4", "--wait").stdout
    group_id = re.search(r"started group/(\S+)", out)[1]
    result = TaskGroupResult.model_validate_json(out[out.index("{") :])
    assert sorted(result.outcomes) == [0.0, 0.0, 1.0, 1.0] and result.failed == 0
    r = redis.Redis.from_url(stack.redis)
    ids = [f[b"id"].decode() for _, f in r.xrange(keys.sample_stream("calc"))]
    mine = [i for i in ids if i.startswith(f"episode/{group_id}/")]
    assert len(mine) == result.published > 0  # its own stream, standardised and published like a built-in's
    shown = cli(stack, "episodes", "show", f"episode/{group_id}/0").stdout
    assert "calculator(" in shown or "boxed" in shown

    broken = f"episode/broken-{uuid.uuid4().hex[:6]}"
    temporal_start(stack, "EpisodeWorkflow", broken, {"setting": "broken", "task_id": "x"})
    with pytest.raises(WorkflowFailureError) as failed:
        await result_of(stack, broken)
    assert "environment plugin 'broken'" in str(failed.value.cause) + str(getattr(failed.value.cause, "cause", ""))


def kill_env_worker_during_step(stack: RunningStack, wf_id: str) -> int:
    """kill -9 the env worker while the episode's slow command runs in its sandbox."""
    r = redis.Redis.from_url(stack.redis)
    deadline = time.monotonic() + 60
    while not r.hexists(keys.episode_steps(keys.episode_attempt(wf_id, 1)), keys.step_action_field(0)):
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


@pytest.mark.timeout(900)
async def test_one_rollout_mixes_all_four_settings_and_feeds_one_train_step(agent_stack):
    """`episodes rollout --mix`: a group per setting, interleaved; each publishes to its own stream, and one train
    step (batch 8, the four sources weighted alike) trains on samples of all four."""
    stack, policy = agent_stack
    no_gui = gui_problem()
    settings = [s for s in SETTINGS if not (s == "gui" and no_gui)]
    parts = {"terminal": GROUP_TASK, "toolcall": MIX_MATH, "swe": MIX_SWE, "gui": MIX_GUI}
    mix = [f"{s}:{parts[s]}" for s in settings]
    out = cli(stack, "episodes", "rollout", "--mix", *mix, "--samples", "2", "--parallel", "8").stdout
    wf_id = out.split()[1]
    assert wf_id.startswith("rollout/mixed-") and "+".join(settings) in out, out
    progress: RolloutProgress = await result_of(stack, wf_id, RolloutProgress, timeout=420)
    assert progress.settings == settings and progress.groups_done == len(settings), progress
    assert progress.episodes_done == 2 * len(settings) and progress.running == 0
    for s in settings:  # oracle and quitter: one success and one failure in each setting's group
        assert progress.per_setting[s].groups_done == 1 and progress.per_setting[s].published > 0, (s, progress)
        assert progress.per_setting[s].episodes_done == 2
    watched = cli(stack, "episodes", "watch", wf_id, "--once").stdout
    assert all(f"  {s}: 1/1 groups" in watched for s in settings), watched

    r = redis.Redis.from_url(stack.redis)
    prefix = f"episode/{wf_id.split('/', 1)[1]}.g"
    published = {
        s: {f[b"id"].decode() for _, f in r.xrange(keys.sample_stream(s)) if f[b"id"].decode().startswith(prefix)}
        for s in settings
    }
    assert {s: len(ids) for s, ids in published.items()} == {s: progress.per_setting[s].published for s in settings}

    # every entry each stream holds now (earlier tests of this module published terminal samples too)
    in_stream = {s: {f[b"id"].decode() for _, f in r.xrange(keys.sample_stream(s))} for s in settings}
    cli(stack, "train", "start")
    trained = stack.data_dir / "records" / "trained.jsonl"
    deadline = time.monotonic() + 300
    while not (trained.exists() and trained.read_text().strip()):
        assert time.monotonic() < deadline, "no train step within 300 s:\n" + cli(stack, "train", "status").stdout
        await asyncio.sleep(1.0)
    step = json.loads(trained.read_text().splitlines()[0])
    assert step["version"] == 1 and step["from_version"] == 0 and len(step["sample_ids"]) >= 8, step
    ids = set(step["sample_ids"])
    mixed = {s: len(ids & published[s]) for s in settings}
    print(f"train step 1: {len(ids)} samples, of this rollout's by setting {mixed}; published {published_n(progress)}")
    by_source = {s: len(ids & in_stream[s]) for s in settings}
    assert sum(by_source.values()) == len(ids) == 8, by_source  # the batch size, not a count per stream
    assert all(by_source.values()), by_source  # every setting's stream fed the step, by its weight
    if len(settings) == 4:
        assert by_source == {s: 2 for s in settings}, by_source  # weighted alike: 2 of 8 each
    assert all(mixed[s] for s in settings if s != "terminal"), mixed  # this rollout's samples among them
    deadline = time.monotonic() + 120
    # published: the servers load it, then the version is set. Earlier tests' samples wait in the terminal stream,
    # so version 2 may follow before this loop first looks: at least 1, not exactly 1.
    while int(r.get(keys.POLICY_VERSION) or 0) < 1:
        assert time.monotonic() < deadline, "version 1 never published"
        await asyncio.sleep(0.5)
    assert int(policy.weight_version) >= 1
    status = json.loads(cli(stack, "train", "status", "--json").stdout)
    assert status["version"] >= 1
    if no_gui:
        pytest.skip(f"terminal, toolcall and swe mixed and trained; the gui part was left out: {no_gui}")


def published_n(progress: RolloutProgress) -> dict[str, int]:
    return {s: p.published for s, p in progress.per_setting.items()}


def test_mix_parts_parse_and_interleave_round_robin():
    from cli.episodes import parse_mix
    from contracts.episodes import RolloutPart
    from workflows.rollout import mixed_order

    parsed = parse_mix(["terminal:files-dedupe,text-top-ips", "swe", "toolcall:math/0@4", "gui:click-button/3"])
    assert parsed == [
        ("terminal", ["files-dedupe", "text-top-ips"], None),
        ("swe", [], None),
        ("toolcall", ["math/0"], 4),
        ("gui", ["click-button/3"], None),
    ]
    for bad, why in (("chess:e4", "unknown setting"), ("swe:a,,b", "empty task id"), ("swe@0", "1 to 64")):
        with pytest.raises(ValueError, match=why):
            parse_mix([bad])
    parts = [RolloutPart(setting="terminal", task_ids=["a", "b"]), RolloutPart(setting="gui", task_ids=["g"])]
    assert mixed_order(parts, 2) == [(0, "a"), (1, "g"), (0, "b"), (1, "g"), (0, "a"), (0, "b")]
