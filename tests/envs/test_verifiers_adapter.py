"""`verifiers` environments as an episode setting (envs.verifiers_adapter), and verifiers' own rollout loop on
client-driven episodes (harnesses.verifiers_rollout).

The environment is examples/vf-arith, written against verifiers' public (classic) API: a SingleTurnEnv with an
XMLParser and a rubric, a ToolEnv with a python tool, and a MultiTurnEnv whose `env_response` answers each guess.
It is loaded by the env pool's plugin loader as a user's settings would name it and driven through the protocol
every setting speaks (reset, tools, step, outcome, close); then, through the whole stack, by our own agent loop
(server-driven episodes) and by verifiers' own rollout loop pointed at the episodes' endpoint. The only fake is
the remote LLM: a scripted server speaking SGLang's wire format.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import subprocess
import sys
import textwrap
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from contracts.episodes import EpisodeResult, TaskGroupResult
from envs.base import Action, ToolCallAction, UnknownTask
from envs.plugins import PluginError
from envs.registry import task_source
from openclaw_rl.settings import Settings
from store import keys
from store.samples import decode_sample
from tests.helpers import CLI, REPO, RunningStack, stack_env
from tests.scripted_policy import ScriptedPolicy, tool_call

EXAMPLE = REPO / "examples" / "vf-arith"
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}

BROKEN = textwrap.dedent(
    '''
    """Environments that break: a load_environment returning no Environment, a rubric that raises."""
    import verifiers as vf
    from datasets import Dataset


    def load_environment(kind="not_env"):
        if kind == "not_env":
            return {"prompt": "not an environment"}

        def exploding(completion, answer) -> float:
            raise ZeroDivisionError("the rubric divided by zero")

        rows = [{"question": "2+2?", "answer": "4"}]
        return vf.SingleTurnEnv(eval_dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[exploding]))
    '''
)


@pytest.fixture(scope="module", autouse=True)
def importable(tmp_path_factory: pytest.TempPathFactory):
    """The example environment on the path (as `pip install examples/vf-arith` would put it), datasets offline."""
    root = tmp_path_factory.mktemp("vfenvs")
    (root / "vf_broken_env.py").write_text(BROKEN)
    saved = {k: os.environ.get(k) for k in OFFLINE}
    os.environ.update(OFFLINE)
    sys.path[:0] = [str(EXAMPLE), str(root)]
    yield root
    sys.path.remove(str(EXAMPLE))
    sys.path.remove(str(root))
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def source(tmp_path: Path, name: str = "arith", **plugin: object):
    settings = Settings(
        data_dir=tmp_path, envs={"plugins": {name: {"factory": "envs.verifiers_adapter:source", **plugin}}}
    )
    return task_source(name, settings)


def say(text: str) -> Action:
    return Action(text=text)


def call(name: str, call_id: str = "c1", **arguments: object) -> Action:
    return Action(text="", tool_calls=[ToolCallAction(id=call_id, name=name, arguments=arguments)])


def test_a_single_turn_environment_scores_with_its_parser_and_rubric(tmp_path):
    src = source(tmp_path, environment="vf_arith", args={"kind": "single"})
    assert [(t.task_id, t.title) for t in src.tasks()] == [
        ("row/0", "What is 6 times 7?"),
        ("row/1", "What is 12 times 12?"),
        ("row/2", "What is 9 times 11?"),
    ]
    with pytest.raises(UnknownTask):
        src.make("row/3", None)
    outcomes = []
    for text in ("<answer>42</answer>", "<answer>41</answer>", "42"):  # right; wrong; right but not in the format
        env = src.make("row/0", None)
        opening = env.reset()
        assert [m["role"] for m in opening] == ["system", "user"] and "<answer>" in opening[0]["content"]
        assert opening[1]["content"] == "What is 6 times 7?" and env.tools() == []
        obs = env.step(say(text))
        assert obs.done and obs.done_reason == "answered"  # one turn: the environment's max_turns
        outcomes.append(env.outcome())
        env.close()
        env.close()  # twice is safe
    assert outcomes == [1.0, 0.0, 0.0]


def test_a_tool_environment_runs_its_python_tool_and_its_result_is_the_next_state(tmp_path):
    src = source(tmp_path, environment="vf_arith", args={"kind": "tools", "max_turns": 3})
    env = src.make("row/1", None)
    env.reset()
    (tool,) = env.tools()  # verifiers' own definition of the python function
    assert tool["type"] == "function" and tool["function"]["name"] == "multiply"
    assert tool["function"]["description"] == "Multiply two integers."
    params = tool["function"]["parameters"]
    assert params["required"] == ["a", "b"] and params["properties"]["a"]["type"] == "integer"
    first = env.step(call("multiply", a=12, b=12))
    assert not first.done and [(r.call_id, r.name, r.content) for r in first.tool_results] == [
        ("c1", "multiply", "144")
    ]
    bad = env.step(call("multiply", call_id="c2", a=12))  # the tool raises: verifiers' error text is the result
    assert not bad.done and "b" in bad.tool_results[0].content and bad.tool_results[0].call_id == "c2"
    last = env.step(say("<answer>144</answer>"))
    assert last.done and env.outcome() == 1.0
    env.close()

    # max_turns ends it: a third tool call is the last turn; the call is not run, the answer never came
    env = src.make("row/1", None)
    env.reset()
    for i in range(2):
        assert not env.step(call("multiply", call_id=f"k{i}", a=1, b=1)).done
    over = env.step(call("multiply", call_id="k2", a=12, b=12))
    assert over.done and over.done_reason == "no_more_turns"
    assert over.tool_results[0].error and "not run" in over.tool_results[0].content
    assert env.outcome() == 0.0
    env.close()


def test_a_multi_turn_environment_answers_each_step_and_stops_on_its_own(tmp_path):
    src = source(tmp_path, environment="vf_arith", args={"kind": "guess", "max_turns": 5})
    env = src.make("row/0", None)
    env.reset()
    assert env.step(say("<answer>5</answer>")).user_message == "higher"
    assert env.step(say("<answer>9</answer>")).user_message == "lower"
    assert env.step(say("a guess")).user_message.startswith("Give a whole number")
    final = env.step(say("<answer>7</answer>"))
    assert final.done and final.user_message == "Correct!"  # its final_env_response
    assert env.outcome() == 1.0
    env.close()

    # our episode ends first (its step limit): the rollout is stopped there and scored on what was said
    env = src.make("row/0", None)
    env.reset()
    assert env.step(say("<answer>3</answer>")).user_message == "higher"
    assert env.outcome() == 0.0
    env.close()
    env = src.make("row/0", None)  # closed before any outcome: nothing left running
    env.reset()
    env.close()


def test_a_broken_verifiers_setting_is_a_plugin_error_naming_it(tmp_path):
    with pytest.raises(PluginError, match="'arith'.*vf_nosuch_env"):
        source(tmp_path, environment="vf_nosuch_env")
    with pytest.raises(PluginError, match="'arith'.*not return a vf.Environment"):
        source(tmp_path, environment="vf_broken_env", args={"kind": "not_env"})
    with pytest.raises(PluginError, match="envs.plugins.arith.environment"):
        source(tmp_path)
    with pytest.raises(PluginError, match="envs.plugins.arith.split"):
        source(tmp_path, environment="vf_arith", split="test")
    env = source(tmp_path, environment="vf_broken_env", args={"kind": "raises"}).make("row/0", None)
    env.reset()
    with ThreadPoolExecutor(1) as other:  # the env pool's calls of one episode run on any of its threads
        with pytest.raises(PluginError, match="'arith'.*rubric raised.*divided by zero"):  # not silently scored 0
            other.submit(env.step, say("4")).result()
        with pytest.raises(PluginError, match="rubric raised"):
            other.submit(env.outcome).result()
    env.close()


def test_the_documented_settings_run_as_written(tmp_path):
    """docs/environments.md's verifiers example, as written."""
    import tomllib

    doc = (REPO / "docs" / "environments.md").read_text().split("## verifiers environments", 1)[1]
    block = re.search(r"```toml\n(.*?)```", doc, re.DOTALL).group(1)
    (name, plugin), *_ = tomllib.loads(block)["envs"]["plugins"].items()
    src = source(tmp_path, name, **plugin)
    env = src.make("row/0", None)
    env.reset()
    assert env.step(call("multiply", a=6, b=7)).tool_results[0].content == "42"
    assert env.step(say("<answer>42</answer>")).done and env.outcome() == 1.0
    env.close()


# ---- through the stack -------------------------------------------------------------------------------------------
FIRST_CALLS = itertools.count()


def script(prompt: str) -> str:
    """The remote LLM: multiplies with the tool, then answers; gets 12 x 12 wrong when it answers at once, and 9 x 11
    wrong on every other episode (a group of two with outcomes 1 and 0)."""
    numbers = {"6 times 7": (6, 7), "12 times 12": (12, 12), "9 times 11": (9, 11)}
    for text, (a, b) in numbers.items():
        if text in prompt:
            offered = "multiply" in prompt.split("<|im_start|>user")[0]
            if "<tool_response>" not in prompt and (text == "12 times 12" or not offered):
                return "<answer>143</answer>" if text == "12 times 12" else f"<answer>{a * b}</answer>"
            if "<tool_response>" not in prompt:
                if text == "9 times 11" and next(FIRST_CALLS) % 2:
                    return "<answer>98</answer>"
                return tool_call("multiply", a=a, b=b)
            return f"<answer>{a * b}</answer>"
    return "I do not know."


@pytest.fixture(scope="module")
def stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory, importable: Path):
    with ScriptedPolicy(tiny_model, script) as policy:
        env = stack_env(tmp_path_factory.mktemp("verifiers") / "data", model_path=tiny_model)
        env.update(
            OFFLINE,
            PYTHONPATH=os.pathsep.join(filter(None, [str(EXAMPLE), env.get("PYTHONPATH")])),
            OPENCLAW_RL_ENVS__PLUGINS=json.dumps(
                {
                    "arith": {
                        "factory": "envs.verifiers_adapter:source",
                        "environment": "vf_arith",
                        "args": {"kind": "tools"},
                    }
                }
            ),
            OPENCLAW_RL_POLICY__SERVER_URLS=json.dumps([policy.url]),
            OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',
            OPENCLAW_RL_TRAINING__AUTO_START="false",
            OPENCLAW_RL_ENVS__SANDBOX__ROOT=f"/tmp/oc-vf-{uuid.uuid4().hex[:8]}",
        )
        s = RunningStack(env).start()
        yield s
        s.stop()


def cli(stack: RunningStack, *args: str, timeout: float = 300) -> str:
    out = subprocess.run(CLI + list(args), env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def temporal_result(stack: RunningStack, workflow_id: str, kind: type):
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    async def go():
        client = await Client.connect(stack.temporal, data_converter=pydantic_data_converter)
        return await client.get_workflow_handle(workflow_id, result_type=kind).result()

    return asyncio.run(go())


def test_a_verifiers_setting_runs_in_the_env_pool_like_a_built_in_one(stack):
    """Our agent loop, the env pool holding the verifiers environment: its tool runs as a step, its rubric scores."""
    listed = json.loads(cli(stack, "episodes", "tasks", "--setting", "arith", "--json"))
    assert [t["task_id"] for t in listed] == ["row/0", "row/1", "row/2"]
    out = cli(stack, "episodes", "group", "--setting", "arith", "--task", "row/2", "--samples", "2", "--wait")
    group_id = re.search(r"started group/(\S+)", out)[1]
    result = TaskGroupResult.model_validate_json(out[out.index("{") :])
    assert sorted(result.outcomes) == [0.0, 1.0] and result.failed == 0  # the rubric's: 99 right, 98 wrong
    episodes = [temporal_result(stack, f"episode/{group_id}/{i}", EpisodeResult) for i in range(2)]
    solved = next(e for e in episodes if e.outcome == 1.0)
    assert solved.setting == "arith" and solved.steps[0].tool_calls == 1 and "99" in solved.steps[0].observation
    assert len(solved.steps) == 2 and solved.end == "answered"  # the tool's result, then the answer: no more turns
    failed = next(e for e in episodes if e.outcome == 0.0)
    assert len(failed.steps) == 1 and failed.steps[0].tool_calls == 0
    r = redis.Redis.from_url(stack.redis)
    ids = [f[b"id"].decode() for _, f in r.xrange(keys.sample_stream("arith"))]
    assert len([i for i in ids if i.startswith(f"episode/{group_id}/")]) == result.published > 0


def test_verifiers_own_rollout_loop_drives_client_episodes_and_posts_its_rubrics_reward(stack):
    """verifiers' run_rollout, its AsyncOpenAI client at each episode's base URL; the reward is the outcome."""
    from harnesses.verifiers_rollout import run_rollouts
    from tests.api.conftest import create_key

    key = create_key(stack, "vf")
    results = asyncio.run(
        run_rollouts(stack.api, key, "vf_arith", {"kind": "single"}, num_examples=2, rollouts_per_example=2, label="vf")
    )
    by_row = sorted((r["example_id"], r["reward"], r["outcome"], r["error"]) for r in results)
    assert by_row == [(0, 1.0, 1.0, None)] * 2 + [(1, 0.0, 0.0, None)] * 2  # 6 x 7 right, 12 x 12 wrong
    first = next(r for r in results if r["example_id"] == 0)
    episode: EpisodeResult = temporal_result(stack, f"episode/{first['episode'].replace('.', '/')}", EpisodeResult)
    assert episode.setting == "vf" and episode.outcome == 1.0 and len(episode.steps) == 1

    # a ToolEnv: verifiers runs the tool itself, between two model calls (two steps) of the episode; on 9 x 11 the
    # model uses it in one rollout of the group and answers wrongly at once in the other
    results = asyncio.run(
        run_rollouts(stack.api, key, "vf_arith", {"kind": "tools"}, num_examples=3, rollouts_per_example=2, label="vf")
    )
    by_row = sorted((r["example_id"], r["reward"], r["outcome"]) for r in results)
    assert by_row == [(0, 1.0, 1.0)] * 2 + [(1, 0.0, 0.0)] * 2 + [(2, 0.0, 0.0), (2, 1.0, 1.0)]
    tooled = next(r for r in results if r["example_id"] == 0)
    assert tooled["metrics"]["multiply_calls"] == 1.0 and tooled["stop_condition"] == "no_tools_called"
    episode = temporal_result(stack, f"episode/{tooled['episode'].replace('.', '/')}", EpisodeResult)
    assert len(episode.steps) == 2 and "42" in episode.steps[0].observation  # the tool's result, as sent back
    mixed = [r for r in results if r["example_id"] == 2]
    group: TaskGroupResult = temporal_result(stack, f"group/{mixed[0]['group']}", TaskGroupResult)
    assert sorted(group.outcomes) == [0.0, 1.0] and group.published > 0
    rds = redis.Redis.from_url(stack.redis)
    samples = [decode_sample(f) for _, f in rds.xrange(keys.sample_stream("vf"))]
    published = [s for s in samples if s.provenance.episode_id in {r["workflow_id"] for r in mixed}]
    assert len(published) == group.published  # the label's stream, token-exact from the engine
    assert all(s.response_ids and len(s.rollout_logprobs) == len(s.response_ids) for s in published)


def test_the_documented_rollout_loop_runs_as_written(stack):
    """docs/outside-agents.md's verifiers example, copied as a user would, with this stack's address and a key."""
    from tests.api.conftest import create_key

    doc = (REPO / "docs" / "outside-agents.md").read_text().split("## A verifiers environment", 1)[1]
    code = re.search(r"```python\n(.*?)```", doc, re.DOTALL).group(1)
    assert '"http://127.0.0.1:8000"' in code and '"ocrl-..."' in code
    key = create_key(stack, "vf-reader")
    code = code.replace('"http://127.0.0.1:8000"', repr(stack.api)).replace('"ocrl-..."', repr(key))
    env = {**os.environ, **OFFLINE, "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(REPO)])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "reward 1.0 outcome 1.0" in out.stdout and "reward 0.0 outcome 0.0" in out.stdout
