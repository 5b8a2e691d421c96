"""End to end through the real stack with the official `openai` client."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import openai
import pytest

from store.client import Store, StoreAddress
from tests.api.conftest import create_key

pytestmark = pytest.mark.timeout(300)

SYSTEM = "You are a helpful agent. Keep answers short."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "exec",
            "description": "Run a command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
    },
]
INTERNAL = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\ncurrent time: 12:00\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"


@pytest.fixture(scope="module")
def alice(chat_stack) -> str:
    return create_key(chat_stack, "alice")


def client(stack, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.api}/v1", api_key=key, max_retries=0, timeout=120)


def turns(stack, key: str, session_id: str, **params) -> httpx.Response:
    return httpx.get(
        f"{stack.api}/v1/sessions/{session_id}/turns",
        params=params,
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def ask(
    c: openai.OpenAI, messages: list[dict], *, stream: bool, headers: dict | None = None, **kw
) -> tuple[dict, dict]:
    """One chat turn; returns (assistant message as the client would resend it, usage)."""
    if not stream:
        r = c.chat.completions.create(model="policy", messages=messages, tools=TOOLS, extra_headers=headers or {}, **kw)
        msg = r.choices[0].message
        return {
            "role": "assistant",
            "content": msg.content,
            **({"tool_calls": [t.model_dump() for t in msg.tool_calls]} if msg.tool_calls else {}),
        }, r.usage.model_dump()
    content, usage, finish = "", None, None
    for ch in c.chat.completions.create(
        model="policy",
        messages=messages,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=headers or {},
        **kw,
    ):
        if ch.usage is not None:
            usage = ch.usage.model_dump()
        for choice in ch.choices:
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
    assert finish in ("stop", "length")
    assert usage is not None, "stream_options.include_usage must yield a usage chunk"
    return {"role": "assistant", "content": content}, usage


def test_three_sessions_streaming_and_not_with_tool_history(chat_stack, alice):
    c = client(chat_stack, alice)
    tag = uuid.uuid4().hex[:8]
    # Three ways a session is named: the reference client's header, the stock client's
    # Runtime line (plus its internal-context message), and the stock affinity header.
    sessions = {
        f"ref-{tag}": dict(headers={"X-Session-Id": f"ref-{tag}", "X-Turn-Type": "main"}, runtime=None),
        f"stock-{tag}": dict(
            headers={}, runtime=f"Runtime: agent=main | session=agent:main:x | sessionId=stock-{tag} | model=policy"
        ),
        f"aff-{tag}": dict(headers={"session_id": f"aff-{tag}:2", "x-session-affinity": f"aff-{tag}:2"}, runtime=None),
    }
    sent: dict[str, list[list[dict]]] = {sid: [] for sid in sessions}
    replies: dict[str, list[str]] = {sid: [] for sid in sessions}
    for sid, how in sessions.items():
        first_user = f"hello from {sid}" + (f"\n{how['runtime']}" if how["runtime"] else "")
        history: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first_user}]
        for t in range(3):
            request = history + ([{"role": "user", "content": INTERNAL}] if how["runtime"] else [])
            reply, usage = ask(c, request, stream=(t % 2 == 0), headers=how["headers"], max_tokens=12, temperature=0.7)
            sent[sid].append(request)
            replies[sid].append(reply["content"])
            assert usage["completion_tokens"] >= 1 and usage["prompt_tokens"] > 10
            history = history + [reply]
            if t == 0:  # a tool round trip in the history: assistant tool call (content null) + tool result
                history += [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_a_3",
                                "type": "function",
                                "function": {"name": "read", "arguments": json.dumps({"path": "notes.txt"})},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "call_a_3", "content": f"notes of {sid}"},
                ]
            else:
                history.append({"role": "user", "content": [{"type": "text", "text": f"reply {t} in {sid}"}]})

    for sid in sessions:
        r = turns(chat_stack, alice, sid)
        assert r.status_code == 200, r.text
        log = r.json()
        assert log["total"] == 3 and [t["index"] for t in log["turns"]] == [0, 1, 2]
        for i, rec in enumerate(log["turns"]):
            assert rec["turn_type"] == "main" and rec["status"] == "done"
            assert rec["message_count"] == len(sent[sid][i])
            assert rec["response_summary"] == replies[sid][i][: len(rec["response_summary"])]
            tokens = asyncio.run(_load(chat_stack.redis, rec["turn_id"]))
            assert len(tokens.prompt_ids) == rec["prompt_tokens"]
            assert len(tokens.response_ids) == len(tokens.response_logprobs) == rec["completion_tokens"]
            assert all(lp <= 0 for lp in tokens.response_logprobs)
        # next state of turn t = the last real message of request t+1 (never the internal context)
        assert log["turns"][0]["next_state"]["role"] == "tool"
        assert log["turns"][0]["next_state"]["summary"] == f"notes of {sid}"
        assert log["turns"][1]["next_state"]["role"] == "user"
        assert log["turns"][1]["next_state"]["summary"] == f"reply 1 in {sid}"
        assert log["turns"][2]["next_state_status"] == "pending" and log["turns"][2]["next_state"] is None


async def _load(url: str, turn_id: str):
    async with Store.connect(StoreAddress(url, 3600)) as store:
        return await store.turns.load(turn_id)


def test_request_without_hints_is_linked_by_history_prefix(chat_stack, alice):
    c = client(chat_stack, alice)
    opening = [
        {"role": "system", "content": f"prefix test {uuid.uuid4().hex}"},
        {"role": "user", "content": "first question"},
    ]
    r1 = c.chat.completions.with_raw_response.create(
        model="policy", messages=opening + [{"role": "user", "content": INTERNAL}], max_tokens=8
    )
    sid = r1.headers["x-session-id"]
    msg = r1.parse().choices[0].message
    # The client resends the reply verbatim, drops the old internal context and adds a fresh one.
    follow = opening + [
        {"role": "assistant", "content": msg.content},
        {"role": "user", "content": "second question"},
        {"role": "user", "content": INTERNAL},
    ]
    r2 = c.chat.completions.with_raw_response.create(model="policy", messages=follow, max_tokens=8, stream=False)
    assert r2.headers["x-session-id"] == sid
    unrelated = c.chat.completions.with_raw_response.create(
        model="policy", messages=[{"role": "user", "content": "a new chat"}], max_tokens=4
    )
    assert unrelated.headers["x-session-id"] != sid
    log = turns(chat_stack, alice, sid).json()
    assert log["total"] == 2
    nxt = log["turns"][0]["next_state"]
    assert (nxt["role"], nxt["summary"]) == ("user", "second question")


def test_side_calls_are_recorded_but_never_pair(chat_stack, alice):
    c = client(chat_stack, alice)
    sid = f"side-{uuid.uuid4().hex[:8]}"
    h = {"X-Session-Id": sid}
    base = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "do the thing"}]
    reply, _ = ask(c, base, stream=False, headers=h, max_tokens=6)
    summary = [
        {"role": "system", "content": "You are a context summarization assistant. Summarize."},
        {"role": "user", "content": "long history"},
    ]
    c.chat.completions.create(model="policy", messages=summary, max_completion_tokens=6, extra_headers=h)
    ask(c, base + [reply, {"role": "user", "content": "thanks, next"}], stream=True, headers=h, max_tokens=6)
    log = turns(chat_stack, alice, sid).json()
    kinds = [(t["turn_type"], t["side_kind"]) for t in log["turns"]]
    assert kinds == [("main", None), ("side", "compaction_summary"), ("main", None)]
    assert log["turns"][0]["next_state"]["summary"] == "thanks, next"
    assert log["turns"][1]["next_state_status"] == "n/a"


def test_session_done_ends_the_workflow_and_a_new_request_starts_a_new_run(chat_stack, alice):
    c = client(chat_stack, alice)
    sid = f"done-{uuid.uuid4().hex[:8]}"
    msgs = [{"role": "user", "content": "hello"}]
    first = c.chat.completions.create(model="policy", messages=msgs, max_tokens=4, extra_headers={"X-Session-Id": sid})
    reply = {"role": "assistant", "content": first.choices[0].message.content or ""}
    c.chat.completions.create(  # the user's reply (the same request again would be a retry, not a reply)
        model="policy",
        messages=msgs + [reply, {"role": "user", "content": "bye"}],
        max_tokens=4,
        extra_headers={"X-Session-Id": sid, "X-Session-Done": "true"},
    )
    log = _wait_status(chat_stack, alice, sid, "completed")
    assert log["closed_reason"] == "client"
    assert log["turns"][0]["next_state_status"] == "paired"
    assert log["turns"][1]["next_state_status"] == "none"  # never got a next state
    c.chat.completions.create(model="policy", messages=msgs, max_tokens=4, extra_headers={"X-Session-Id": sid})
    assert _wait_status(chat_stack, alice, sid, "running")["total"] == 1


def _wait_status(stack, key, sid, status, timeout=20.0) -> dict:
    import time

    deadline = time.monotonic() + timeout
    while True:
        log = turns(stack, key, sid).json()
        if log["status"] == status or time.monotonic() > deadline:
            assert log["status"] == status, log
            return log
        time.sleep(0.2)


def test_long_session_continues_as_new_and_keeps_every_turn(chat_stack, alice):
    """turns_per_run is 5 in this stack: 12 turns span three runs."""
    c = client(chat_stack, alice)
    sid = f"long-{uuid.uuid4().hex[:8]}"
    history = [{"role": "user", "content": "turn 0"}]
    for t in range(12):
        reply, _ = ask(c, history, stream=bool(t % 2), headers={"X-Session-Id": sid}, max_tokens=4)
        history = history + [reply, {"role": "user", "content": f"turn {t + 1}"}]
    first = turns(chat_stack, alice, sid, offset=0, limit=7).json()
    rest = turns(chat_stack, alice, sid, offset=7, limit=50).json()
    records = first["turns"] + rest["turns"]
    assert first["total"] == 12 and [r["index"] for r in records] == list(range(12))
    assert first["runs"] >= 3
    for t, rec in enumerate(records[:-1]):
        assert rec["next_state"]["summary"] == f"turn {t + 1}", rec  # pairing crosses run boundaries
    assert records[-1]["next_state_status"] == "pending"
    sessions = httpx.get(f"{chat_stack.api}/v1/sessions", headers={"Authorization": f"Bearer {alice}"}).json()["data"]
    mine = [s for s in sessions if s["session_id"] == sid]
    assert mine and mine[0]["status"] == "running"


def test_requests_keep_being_served_during_a_weight_update(chat_stack, alice):
    """No 503 window: turns in flight while the engine swaps weights all succeed, each on one version."""
    from concurrent.futures import ThreadPoolExecutor

    c = client(chat_stack, alice)
    sid = f"swap-{uuid.uuid4().hex[:8]}"
    model_path = chat_stack.env["OPENCLAW_RL_ENGINE__MODEL_PATH"]

    def one(i: int) -> str | None:
        r = c.chat.completions.create(
            model="policy",
            messages=[{"role": "user", "content": f"q{i}"}],
            max_tokens=24,
            extra_headers={"X-Session-Id": f"{sid}-{i}"},
        )
        return r.system_fingerprint

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(one, i) for i in range(8)]
        update = httpx.post(
            f"{chat_stack.engine}/update_weights_from_disk",
            json={"model_path": model_path, "weight_version": "7"},
            timeout=120,
        )
        versions = [f.result() for f in futures]
    assert update.status_code == 200 and update.json()["success"], update.text
    assert set(versions) <= {"0", "7"}
    after = c.chat.completions.create(
        model="policy",
        messages=[{"role": "user", "content": "after"}],
        max_tokens=4,
        extra_headers={"X-Session-Id": sid},
    )
    assert after.system_fingerprint == "7"
    log = turns(chat_stack, alice, sid).json()
    assert log["turns"][0]["weight_version"] == "7"
    import time

    deadline = time.monotonic() + 15  # visibility is eventually consistent
    while True:
        sessions = httpx.get(f"{chat_stack.api}/v1/sessions", headers={"Authorization": f"Bearer {alice}"}).json()[
            "data"
        ]
        version = next((s["policy_version"] for s in sessions if s["session_id"] == sid), None)
        if version == 7 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert version == 7  # the search attribute follows the policy
