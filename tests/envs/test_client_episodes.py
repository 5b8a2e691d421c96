"""Episodes an outside agent drives through the API, with the stock `openai` client, through the whole stack.

The agent's harness is a plain loop over the OpenAI SDK pointed at the episode's base URL: it runs the tool calls
the model makes (through the episode's tool route, in the task's sandbox) and sends their results back as `tool`
messages, as any agent framework does. The model is a scripted server speaking SGLang's wire format (it stands in
for a GPU LLM): agent "A" solves the terminal task with its reference solution, agent "B" quits at once, so the
group's outcomes and samples are known in advance.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import httpx
import pytest
import redis
from openai import OpenAI
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from contracts.episodes import EpisodeResult, TaskGroupResult
from envs.sandbox import sandbox_problem
from envs.swe import SweTasks
from envs.terminal.source import TerminalTasks
from store.samples import decode_sample
from tests.api.conftest import create_key
from tests.helpers import RunningStack, stack_env
from tests.scripted_policy import ScriptedPolicy, tool_call

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}"),
]

TASK = "text-top-ips"
SWE_TASK = "pager__paginate-1"
IDLE_S = 20
SOLVE = (TerminalTasks().get(TASK).solution_dir / "solve.sh").read_text()
SWE = SweTasks().get(SWE_TASK)


def script(prompt: str) -> str:
    if "Please solve this issue" in prompt and SWE.problem_statement.strip()[:80] in prompt:  # mini-swe-agent
        if prompt.count("<|im_start|>assistant") - 1 == 0:
            return tool_call("bash", command=f"git apply <<'EOF_PATCH'\n{SWE.patch}EOF_PATCH")
        return tool_call("bash", command="echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
    if "You are agent A" in prompt:
        if "<|im_start|>tool" not in prompt and "tool_response" not in prompt:
            return tool_call("bash", command=SOLVE)
        return "The top IPs are in /app/top_ips.txt."
    if "You are agent B" in prompt:
        return "I give up."
    if "free-form" in prompt:
        return tool_call("lookup", key="x") if "lookup result" not in prompt else "The value is 42."
    return "ok"


@pytest.fixture(scope="module")
def stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    with ScriptedPolicy(tiny_model, script) as policy:
        env = stack_env(tmp_path_factory.mktemp("client-episodes") / "data", model_path=tiny_model)
        env.update(
            OPENCLAW_RL_POLICY__SERVER_URLS=json.dumps([policy.url]),
            OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',
            OPENCLAW_RL_TRAINING__AUTO_START="false",
            OPENCLAW_RL_ENVS__SANDBOX__ROOT=f"/tmp/oc-client-{uuid.uuid4().hex[:8]}",
            OPENCLAW_RL_ENVS__CLIENT__IDLE_TIMEOUT_S=str(IDLE_S),
        )
        s = RunningStack(env).start()
        yield s
        s.stop()


def api(stack: RunningStack, key: str, method: str, path: str, body: dict | None = None) -> httpx.Response:
    return httpx.request(
        method, f"{stack.api}{path}", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=180
    )


def run_agent(stack: RunningStack, key: str, episode: dict, name: str) -> list[dict]:
    """The outside harness: the OpenAI SDK at the episode's base URL; tool calls run through the episode."""
    opening = api(stack, key, "GET", f"/v1/episodes/{episode['id']}").json()
    assert opening.get("ready") and opening.get("tools"), opening
    tools = opening["tools"]
    messages = [{"role": "system", "content": f"You are agent {name}."}, *opening["messages"][1:]]
    llm = OpenAI(base_url=episode["base_url"], api_key=key, max_retries=0)
    for _ in range(4):
        reply = llm.chat.completions.create(model="policy", messages=messages, tools=tools).choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            return messages
        for call in reply.tool_calls:
            r = api(
                stack,
                key,
                "POST",
                f"/v1/episodes/{episode['id']}/tools/{call.function.name}",
                {"arguments": json.loads(call.function.arguments)},
            )
            assert r.status_code == 200, r.text
            messages.append({"role": "tool", "tool_call_id": call.id, "content": r.json()["content"]})
    return messages


def temporal_result(stack: RunningStack, workflow_id: str, kind: type):
    async def go():
        client = await Client.connect(stack.temporal, data_converter=pydantic_data_converter)
        return await client.get_workflow_handle(workflow_id, result_type=kind).result()

    return asyncio.run(go())


def test_a_task_group_driven_by_an_outside_agent_is_checked_judged_and_published(stack):
    key = create_key(stack, "harness")
    r = api(stack, key, "POST", "/v1/episodes", {"setting": "terminal", "task_id": TASK, "samples": 2})
    assert r.status_code == 200, r.text
    group = r.json()
    a, b = group["episodes"]
    run_agent(stack, key, a, "A")
    run_agent(stack, key, b, "B")
    assert api(stack, key, "GET", f"/v1/episodes/{a['id']}").json()["steps"] == 2
    # another user's key sees no such episode, and cannot drive or end it
    other = create_key(stack, "someone-else")
    assert api(stack, other, "GET", f"/v1/episodes/{a['id']}").status_code == 404
    assert api(stack, other, "POST", f"/v1/episodes/{a['id']}/outcome", {}).status_code == 404
    # a task's outcome is its checker's: one posted by the client is refused
    assert api(stack, key, "POST", f"/v1/episodes/{a['id']}/outcome", {"outcome": 1}).status_code == 400
    done_a = api(stack, key, "POST", f"/v1/episodes/{a['id']}/outcome", {})
    assert done_a.status_code == 200 and done_a.json()["outcome"] == 1.0, done_a.text  # the oracle's work passes
    assert api(stack, key, "POST", f"/v1/episodes/{a['id']}/outcome", {}).json() == done_a.json()  # idempotent
    done_b = api(stack, key, "POST", f"/v1/episodes/{b['id']}/outcome", {})
    assert done_b.json()["outcome"] == 0.0
    # the episode is over: no more steps
    after = api(
        stack, key, "POST", f"/v1/episodes/{a['id']}/chat/completions", {"messages": [{"role": "user", "content": "x"}]}
    )
    assert after.status_code in (404, 409), after.text

    result: EpisodeResult = temporal_result(stack, a["workflow_id"], EpisodeResult)
    assert result.outcome == 1.0 and len(result.steps) == 2
    assert all(s.votes for s in result.steps)  # every step judged, the last one too
    assert "exit code 0" in result.steps[0].observation  # the tool's result is the first step's next state
    group_result: TaskGroupResult = temporal_result(stack, f"group/{group['group_id']}", TaskGroupResult)
    assert sorted(group_result.outcomes) == [0.0, 1.0] and group_result.published >= 2
    rds = redis.Redis.from_url(stack.redis)
    samples = [decode_sample(f) for _, f in rds.xrange("oc:samples:terminal")]
    mine = [s for s in samples if s.provenance.episode_id == a["workflow_id"]]
    assert len(mine) == 2 and all(s.advantages[0] > 0 for s in mine)  # the solved episode's steps are pushed up
    first = min(mine, key=lambda s: s.provenance.step)
    assert first.response_ids and len(first.rollout_logprobs) == len(first.response_ids)  # token-exact from the engine


def test_a_free_form_episode_takes_a_bounded_outcome_once(stack):
    key = create_key(stack, "freeform")
    r = api(stack, key, "POST", "/v1/episodes", {"samples": 1, "label": "myagent"})
    assert r.status_code == 200, r.text
    ep = r.json()["episodes"][0]
    llm = OpenAI(base_url=ep["base_url"], api_key=key, max_retries=0)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
    messages = [{"role": "user", "content": "A free-form task: find the value."}]
    first = llm.chat.completions.create(model="p", messages=messages, tools=tools).choices[0].message
    assert first.tool_calls and first.tool_calls[0].function.name == "lookup"
    messages += [
        first.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "lookup result: 42"},
    ]
    # a call retried with the same Idempotency-Key is the same step, not a second one
    body, headers = {"messages": messages, "tools": tools}, {"Authorization": f"Bearer {key}", "Idempotency-Key": "k1"}
    url = f"{stack.api}/v1/episodes/{ep['id']}/chat/completions"
    once, again = (httpx.post(url, json=body, headers=headers, timeout=120) for _ in range(2))
    assert once.headers["X-Episode-Step"] == again.headers["X-Episode-Step"] == "1"
    assert api(stack, key, "GET", f"/v1/episodes/{ep['id']}").json()["steps"] == 2
    too_long = httpx.post(url, json=body, headers={**headers, "Idempotency-Key": "k" * 1000}, timeout=120)
    assert too_long.status_code == 400 and "Idempotency-Key" in too_long.json()["error"]["message"]  # no step run
    assert api(stack, key, "GET", f"/v1/episodes/{ep['id']}").json()["steps"] == 2
    stream = llm.chat.completions.create(model="p", messages=messages, tools=tools, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "The value is 42."
    # the tools of a free-form episode are the client's own
    assert api(stack, key, "POST", f"/v1/episodes/{ep['id']}/tools/lookup", {"arguments": {}}).status_code == 409
    assert api(stack, key, "POST", f"/v1/episodes/{ep['id']}/outcome", {}).status_code == 400  # it needs one
    assert api(stack, key, "POST", f"/v1/episodes/{ep['id']}/outcome", {"outcome": 7}).status_code == 400  # bounded
    ok = api(stack, key, "POST", f"/v1/episodes/{ep['id']}/outcome", {"outcome": 0.75})
    assert ok.status_code == 200 and ok.json()["outcome"] == 0.75 and ok.json()["steps"] == 3
    assert api(stack, key, "POST", f"/v1/episodes/{ep['id']}/outcome", {"outcome": 0.75}).json() == ok.json()
    assert api(stack, key, "POST", f"/v1/episodes/{ep['id']}/outcome", {"outcome": 0.25}).status_code == 409
    result: EpisodeResult = temporal_result(stack, ep["workflow_id"], EpisodeResult)
    assert result.setting == "myagent" and result.outcome == 0.75
    assert "lookup result: 42" in result.steps[0].observation


def test_an_abandoned_episode_ends_cleanly_and_bad_requests_get_reasons(stack):
    key = create_key(stack, "leaver")
    for body, status in (
        ({"setting": "terminal"}, 400),  # a task needs its id
        ({"setting": "nosuch", "task_id": "t"}, 400),
        ({"samples": 0}, 422),
        ({"samples": 1000}, 422),
        ({"samples": 1, "label": "terminal"}, 400),  # a setting's stream is not a free-form episode's to write
    ):
        r = api(stack, key, "POST", "/v1/episodes", body)
        assert r.status_code == status, (body, r.text)
        assert r.json()["error"]["message"]
    assert api(stack, key, "GET", "/v1/episodes/client-nosuch.0").status_code == 404
    assert api(stack, key, "GET", "/v1/episodes/../etc").status_code == 404
    ep = api(stack, key, "POST", "/v1/episodes", {"setting": "terminal", "task_id": TASK}).json()["episodes"][0]
    llm = OpenAI(base_url=ep["base_url"], api_key=key, max_retries=0)
    llm.chat.completions.create(model="p", messages=[{"role": "user", "content": "hello"}])
    deadline = time.monotonic() + IDLE_S + 60
    while True:  # its client went away: after the idle timeout the episode fails, and its environment is closed
        view = api(stack, key, "GET", f"/v1/episodes/{ep['id']}").json()
        if view.get("failed"):
            break
        assert time.monotonic() < deadline, view
        time.sleep(1)
    assert "abandoned" in view["failed"]
    late = api(stack, key, "POST", f"/v1/episodes/{ep['id']}/outcome", {})
    assert late.status_code in (404, 409), late.text


def test_a_call_over_temporals_payload_limit_is_a_413_with_a_reason_and_the_episode_lives_on(stack):
    """A tool argument bigger than Temporal's payload limit (2 MiB), well under the API's body limit (8 MiB), is
    refused before it is sent (Temporal refused it with an error the API answered as a 500); the next call runs."""
    key = create_key(stack, "big-arguments")
    ep = api(stack, key, "POST", "/v1/episodes", {"setting": "terminal", "task_id": TASK}).json()["episodes"][0]
    assert api(stack, key, "GET", f"/v1/episodes/{ep['id']}").json().get("ready")
    tool = f"/v1/episodes/{ep['id']}/tools/bash"
    big = api(stack, key, "POST", tool, {"arguments": {"command": "echo " + "x" * (3 * 1024 * 1024)}})
    assert big.status_code == 413, big.text
    err = big.json()["error"]
    assert err["code"] == "call_too_large" and "temporal.max_payload_bytes" in err["message"], err
    ok = api(stack, key, "POST", tool, {"arguments": {"command": "echo still-here"}})
    assert ok.status_code == 200 and "still-here" in ok.json()["content"], ok.text
    view = api(stack, key, "GET", f"/v1/episodes/{ep['id']}").json()
    assert view["failed"] is None and view["finished"] is None, view


def test_mini_swe_agents_own_loop_solves_a_swe_task_with_its_commands_in_the_sandbox(stack):
    """mini-swe-agent 2.4 (PyPI), unmodified: its DefaultAgent, its litellm model at the episode's base URL, its
    default config (tool calls); only its environment is ours (harnesses.mini_swe_agent)."""
    from harnesses.mini_swe_agent import run_episode

    key = create_key(stack, "mini")
    out = run_episode(stack.api, key, "swe", SWE_TASK, step_limit=5)
    assert out["exit_status"] == "Submitted", out
    assert out["commands"][0].startswith("git apply") and out["outcome"] == 1.0  # the hidden tests pass
    result: EpisodeResult = temporal_result(stack, f"episode/{out['episode'].replace('.', '/')}", EpisodeResult)
    assert result.setting == "swe" and len(result.steps) == 2 and result.steps[0].tool_calls == 1
    assert all(s.votes for s in result.steps)


def test_the_documented_harness_loop_runs_as_written(stack):
    """docs/outside-agents.md's example, copied as a user would, with this stack's address and a key."""
    import re
    import subprocess
    import sys

    from tests.helpers import REPO

    doc = (REPO / "docs" / "outside-agents.md").read_text()
    code = re.search(r"```python\n(.*?)```", doc, re.DOTALL).group(1)
    assert '"http://127.0.0.1:8000"' in code and '"ocrl-..."' in code
    key = create_key(stack, "reader")
    code = code.replace('"http://127.0.0.1:8000"', repr(stack.api)).replace('"ocrl-..."', repr(key))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "'outcome': 0.0" in out.stdout and "'end': 'client_finished'" in out.stdout  # it ran to its end
