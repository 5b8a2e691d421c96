"""A scripted conversation of corrections and thanks through the real endpoint, judged by the heuristic judge."""

from __future__ import annotations

import json

import pytest
import redis
import torch

from control.sessions import session_workflow_id
from rlmath.logprobs import token_logprobs
from rlmath.signals import teacher_messages
from tests.learning.conftest import chat, create_key, samples_of, wait_judged

pytestmark = pytest.mark.timeout(300)


def test_corrections_and_thanks_become_the_expected_samples(heuristic_stack, tiny_model):
    stack = heuristic_stack
    key = create_key(stack, "hana")
    sid = "lesson"
    tool_error = "Traceback (most recent call last):\nValueError: boom\nexit code 1"
    history = [{"role": "user", "content": "write a poem"}]
    nexts = [
        {"role": "user", "content": "That's wrong, you should write it in French instead."},
        {"role": "user", "content": "thanks, perfect!"},
        "tool",
        {"role": "user", "content": "ok"},
    ]
    for nxt in nexts:
        reply = chat(stack, key, sid, history)
        history = history + [{"role": "assistant", "content": reply["content"]}]
        if nxt == "tool":
            history += [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{}"}}],
                },
                {"role": "tool", "tool_call_id": "c1", "content": tool_error},
            ]
        else:
            history.append(nxt)
    chat(stack, key, sid, history)

    turns = wait_judged(stack, key, sid, [0, 1, 2, 3])
    judged = [
        (
            t["judgement"]["judge"]["eval_score"],
            t["judgement"]["result"]["published"],
            t["judgement"]["result"]["reward"],
        )
        for t in turns[:4]
    ]
    assert judged == [(-1, True, -1.0), (1, True, 1.0), (-1, True, -1.0), (0, False, None)]
    assert turns[0]["judgement"]["judge"]["hint"] == "That's wrong, you should write it in French instead."
    assert "ValueError: boom" in turns[2]["judgement"]["judge"]["hint"]
    assert turns[1]["judgement"]["judge"]["hint"] is None
    assert turns[4]["judgement"] is None  # no next state yet

    session_key = session_workflow_id("hana", sid)
    # Turns are judged concurrently, so the stream's order is the order judging finished in.
    samples = sorted(samples_of(stack, session_key), key=lambda s: s.provenance.turn_index)
    assert [s.provenance.turn_index for s in samples] == [0, 1, 2]  # exactly once each, the dropped turn absent
    r = redis.Redis.from_url(stack.redis)
    for s in samples:
        n = len(s.response_ids)
        assert n == len(s.rollout_logprobs) == len(s.advantages) and n > 0
        assert s.token_mask() == [1] * n
        if s.provenance.use_teacher:
            expected = [s.reward + (t - o) for t, o in zip(s.teacher_logprobs, s.rollout_logprobs)]
            assert s.advantages == pytest.approx(expected, abs=1e-5)
        else:
            assert s.teacher_logprobs is None and s.advantages == [s.reward] * n
    assert [s.provenance.use_teacher for s in samples] == [True, False, True]

    # Teacher log-probs from the real engine equal a direct forward pass of the enhanced prompt.
    from transformers import AutoModelForCausalLM

    from contracts.chat import StoredChatRequest
    from policy_client.chat import renderer_for

    first = samples[0]
    req = StoredChatRequest.model_validate_json(r.get(f"oc:request:{first.provenance.turn_id}"))
    enhanced = renderer_for(str(tiny_model)).render(
        teacher_messages(req.messages, first.provenance.judge.hint), req.tools
    )
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    ids = torch.tensor([enhanced + first.response_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(enhanced) - 1 : -1]
    direct = token_logprobs(logits, torch.tensor(first.response_ids), first.temperature)
    assert torch.allclose(direct, torch.tensor(first.teacher_logprobs), atol=1e-4)

    # Records: one line per judged turn, kept under the policy version.
    lines = [
        json.loads(x) for x in (stack.data_dir / "records" / "policy-0" / "personal.jsonl").read_text().splitlines()
    ]
    mine = [x for x in lines if x["session_id"] == sid]
    assert sorted(x["turn_index"] for x in mine) == [0, 1, 2, 3]
    assert r.xlen("oc:records:personal:v0") >= 4


def test_an_idle_session_ends_and_closes_its_last_turn(heuristic_stack):
    import time

    import httpx

    key = create_key(heuristic_stack, "ida")
    chat(heuristic_stack, key, "idle", [{"role": "user", "content": "hi"}])
    deadline = time.monotonic() + 40  # idle timeout is 8 s in this stack
    while True:
        log = httpx.get(
            f"{heuristic_stack.api}/v1/sessions/idle/turns", headers={"Authorization": f"Bearer {key}"}
        ).json()
        if log["status"] == "completed" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert log["status"] == "completed" and log["closed_reason"] == "idle"
    assert log["turns"][0]["next_state_status"] == "none"
