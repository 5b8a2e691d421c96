"""The `llm` judge against a scripted OpenAI-compatible judge server: votes, aggregation, faults."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import redis

from control.sessions import session_workflow_id
from judges.prompts import PRM_SYSTEM
from tests.helpers import RunningStack
from tests.learning.conftest import ScriptedJudge, chat, chat_stack_env, create_key, samples_of, wait_judged

pytestmark = pytest.mark.timeout(400)

ANSWERS = ["The user is pleased. \\boxed{1}", "\\boxed{1}", "I cannot tell."]


@pytest.fixture(scope="module")
def judge_server():
    with ScriptedJudge(ANSWERS, delays={"HANG": 60.0, "SLOW": 2.0}) as server:
        yield server


@pytest.fixture(scope="module")
def llm_stack(tiny_model, tmp_path_factory, judge_server):
    env = chat_stack_env(
        tmp_path_factory.mktemp("llm") / "data",
        tiny_model,
        OPENCLAW_RL_LEARNING__METHOD="binary",
        OPENCLAW_RL_LEARNING__JUDGE=json.dumps({"type": "llm", "url": judge_server.url, "timeout_s": 3}),
        OPENCLAW_RL_LEARNING__VOTE_TIMEOUT_S="6",
    )
    stack = RunningStack(env).start()
    assert "judge: llm at" in stack.output()
    yield stack
    stack.stop()


def _talk(stack, key, sid, replies: list[str]) -> None:
    history = [{"role": "user", "content": "hello"}]
    for text in replies:
        reply = chat(stack, key, sid, history)
        history = history + [{"role": "assistant", "content": reply["content"]}, {"role": "user", "content": text}]
    chat(stack, key, sid, history)


def test_m_votes_are_issued_aggregated_and_recorded(llm_stack, judge_server):
    key = create_key(llm_stack, "ivan")
    before = len(judge_server.requests)
    _talk(llm_stack, key, "votes", ["great, thanks"])
    turn = wait_judged(llm_stack, key, "votes", [0])[0]
    j = turn["judgement"]
    assert sorted(j["judge"]["prm_votes"], key=str) == sorted([1, 1, None], key=str)  # three votes, one unparsable
    assert j["judge"]["eval_score"] == 1 and j["result"]["reward"] == 1.0
    assert "boxed{1}" in j["judge"]["representative"]
    sent = judge_server.requests[before:]
    assert len(sent) == 3  # binary RL: m = 3 votes, each its own call
    assert all(
        r["messages"][0]["content"] == PRM_SYSTEM
        and "great, thanks" in r["messages"][1]["content"]
        and r["temperature"] == 0.6
        for r in sent
    )
    assert [s.reward for s in samples_of(llm_stack, session_workflow_id("ivan", "votes"))] == [1.0]


def test_a_judge_that_hangs_leaves_the_turn_neutral_never_stuck(llm_stack):
    key = create_key(llm_stack, "judy")
    _talk(llm_stack, key, "hang", ["thanks", "HANG please"])
    turns = wait_judged(llm_stack, key, "hang", [0, 1], timeout=120)
    hung = turns[1]["judgement"]
    assert hung["judge"]["prm_votes"] == [None, None, None] and hung["judge"]["failed_votes"] == 3
    assert hung["judge"]["eval_score"] == 0
    assert hung["result"]["published"] is False  # score 0 after an effective sample: dropped by the rules


def test_killing_the_judge_worker_mid_vote_loses_nothing_and_duplicates_nothing(llm_stack, judge_server):
    key = create_key(llm_stack, "kate")
    old = llm_stack.service_pid("worker-judge")
    before = len(judge_server.requests)
    history = [{"role": "user", "content": "hello"}]
    reply = chat(llm_stack, key, "kill", history)
    chat(
        llm_stack,
        key,
        "kill",
        history + [{"role": "assistant", "content": reply["content"]}, {"role": "user", "content": "SLOW thanks"}],
    )
    deadline = time.monotonic() + 30
    while len(judge_server.requests) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(old, signal.SIGKILL)  # votes are in flight at the judge server
    llm_stack.wait_restarted("worker-judge", old)
    turn = wait_judged(llm_stack, key, "kill", [0], timeout=120)[0]
    assert turn["judgement"]["result"]["published"] is True
    assert len(samples_of(llm_stack, session_workflow_id("kate", "kill"))) == 1
    records = [
        f
        for _, f in redis.Redis.from_url(llm_stack.redis).xrange("oc:records:personal:v0")
        if f[b"id"].decode().split("@")[0] == session_workflow_id("kate", "kill") and f[b"id"].endswith(b"#0")
    ]
    assert len(records) == 1
