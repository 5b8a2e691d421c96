"""Turns survive a policy worker killed mid-generation and a Temporal server restart."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import uuid

import httpx
import openai
import pytest

from store.client import Store, StoreAddress
from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import RunningStack

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def fault_stack(tiny_model, tmp_path_factory):
    env = chat_stack_env(
        tmp_path_factory.mktemp("faults") / "data", tiny_model, OPENCLAW_RL_SESSION__GENERATE_HEARTBEAT_S="3"
    )
    stack = RunningStack(env).start()
    yield stack
    stack.stop()


def _turn_log(stack, key, sid) -> dict:
    r = httpx.get(f"{stack.api}/v1/sessions/{sid}/turns", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


async def _tokens(url, turn_id):
    async with Store.connect(StoreAddress(url, 3600)) as store:
        return await store.turns.load(turn_id)


def test_policy_worker_killed_mid_generation_turn_completes(fault_stack):
    key = create_key(fault_stack, "erin")
    c = openai.OpenAI(base_url=f"{fault_stack.api}/v1", api_key=key, max_retries=0, timeout=180)
    sid = f"kill-{uuid.uuid4().hex[:6]}"
    old_pid = fault_stack.service_pid("worker-policy")
    streamed, killed = "", threading.Event()
    stream = c.chat.completions.create(
        model="policy",
        messages=[{"role": "user", "content": "write a long story"}],
        max_tokens=1200,
        temperature=0.8,
        stream=True,
        extra_headers={"X-Session-Id": sid},
    )
    finish = None
    for ch in stream:
        for choice in ch.choices:
            streamed += choice.delta.content or ""
            finish = choice.finish_reason or finish
        if len(streamed) > 40 and not killed.is_set():
            os.kill(old_pid, signal.SIGKILL)  # mid-generation; the supervisor starts another worker
            killed.set()
    assert killed.is_set(), "the generation ended before the worker could be killed"
    assert finish in ("stop", "length")
    fault_stack.wait_restarted("worker-policy", old_pid)
    rec = _turn_log(fault_stack, key, sid)["turns"][0]
    assert rec["status"] == "done" and rec["attempts"] >= 2
    tokens = asyncio.run(_tokens(fault_stack.redis, rec["turn_id"]))
    assert tokens.resumed_at > 0, "the retry should resume from the tokens already streamed"
    assert len(tokens.response_ids) == len(tokens.response_logprobs) == rec["completion_tokens"]
    # What the client saw is exactly the recorded response: nothing taken back, nothing duplicated.
    from policy_client.chat import renderer_for

    recorded = renderer_for(fault_stack.env["OPENCLAW_RL_ENGINE__MODEL_PATH"]).decode(tokens.response_ids)
    assert streamed == recorded


def test_temporal_restart_mid_session_loses_nothing(fault_stack):
    key = create_key(fault_stack, "frank")
    c = openai.OpenAI(base_url=f"{fault_stack.api}/v1", api_key=key, max_retries=0, timeout=180)
    sid = f"restart-{uuid.uuid4().hex[:6]}"
    h = {"X-Session-Id": sid}
    history = [{"role": "user", "content": "turn 0"}]
    for t in range(2):
        r = c.chat.completions.create(model="policy", messages=history, max_tokens=6, extra_headers=h)
        history += [
            {"role": "assistant", "content": r.choices[0].message.content},
            {"role": "user", "content": f"turn {t + 1}"},
        ]
    old = fault_stack.service_pid("temporal")
    os.kill(old, signal.SIGKILL)
    # The next turn is sent while Temporal is down: the API waits for it to come back.
    r = c.chat.completions.create(model="policy", messages=history, max_tokens=6, extra_headers=h)
    assert r.choices[0].finish_reason in ("stop", "length")
    fault_stack.wait_restarted("temporal", old)
    log = _turn_log(fault_stack, key, sid)
    assert log["total"] == 3 and [t["status"] for t in log["turns"]] == ["done"] * 3
    assert [t["next_state"]["summary"] for t in log["turns"][:2]] == ["turn 1", "turn 2"]
