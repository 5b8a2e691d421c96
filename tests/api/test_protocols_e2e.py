"""Anthropic Messages and OpenAI Responses through the real stack, with the official `anthropic` and `openai` SDKs:
a tool loop over three turns per protocol, streamed and not; each turn judged into a sample, next states paired;
each stream's events in the provider's documented order; hostile input a 4xx in the protocol's error shape with
nothing written. One stack for the module (a scripted policy, so tool calls come when asked for)."""

from __future__ import annotations

import json
import time
import uuid

import anthropic
import httpx
import openai
import pytest
import redis

from store.samples import PersonalTurn, decode_sample
from tests.api.conftest import ScriptedStack, create_key
from tests.helpers import RunningStack
from tests.scripted_policy import tool_call

pytestmark = pytest.mark.timeout(600)

READ_TOOL = {
    "name": "read",
    "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}
THANKS = "thanks, perfect!"


def script(prompt: str) -> str:
    last = prompt.rsplit("<|im_start|>", 2)[-2]  # the last message before the assistant's header
    if "<tool_response>" in last:
        return "The notes say the meeting is at noon."
    if "read it with words" in last:
        return "Let me look.\n" + tool_call("read", path="notes.txt")
    if "read notes" in last or "What is in notes.txt?" in last:  # the latter: the docs' examples
        return tool_call("read", path="notes.txt")
    if "say stop" in last:
        return "alpha STOP beta"
    return "You are welcome."


@pytest.fixture(scope="module")
def stack(scripted_stack: ScriptedStack) -> RunningStack:
    return scripted_stack.answering(script)


@pytest.fixture(scope="module")
def key(stack: RunningStack) -> str:
    return create_key(stack, f"proto-{uuid.uuid4().hex[:6]}")


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def session_turns(stack: RunningStack, key: str, sid: str, judged: int, timeout: float = 120.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        log = httpx.get(f"{stack.api}/v1/sessions/{sid}/turns", headers=auth(key), timeout=30).json()
        turns = log.get("turns", [])
        if sum(1 for t in turns if t.get("judgement")) >= judged:
            return turns
        assert time.monotonic() < deadline, f"not {judged} judged turns within {timeout}s: {log}"
        time.sleep(0.3)


def sample_turn_ids(stack: RunningStack, timeout: float = 60.0, want: set[str] = frozenset()) -> set[str]:
    r = redis.Redis.from_url(stack.redis)
    deadline = time.monotonic() + timeout
    while True:
        ids = set()
        for name in r.scan_iter("oc:samples:*", _type="stream"):
            for _, fields in r.xrange(name):
                s = decode_sample(fields)
                if isinstance(s.provenance, PersonalTurn):
                    ids.add(s.provenance.turn_id)
        if want <= ids or time.monotonic() > deadline:
            return ids
        time.sleep(0.3)


def check_judged_tool_loop(stack: RunningStack, key: str, sid: str) -> None:
    """Turn 0 called the tool, turn 1 answered its result, turn 2 the thanks: 0 and 1 are paired and judged."""
    turns = session_turns(stack, key, sid, judged=2)
    assert [t["turn_type"] for t in turns] == ["main"] * 3 and all(t["status"] == "done" for t in turns)
    assert turns[0]["tool_calls"] and turns[0]["tool_calls"][0]["name"] == "read"
    assert turns[0]["next_state"]["role"] == "tool" and "notes of" in turns[0]["next_state"]["summary"]
    assert turns[1]["next_state"]["role"] == "user" and turns[1]["next_state"]["summary"] == THANKS
    assert turns[2]["next_state_status"] == "pending"
    for t in turns[:2]:
        assert t["judgement"]["result"]["published"] is True, t["judgement"]
        assert t["prompt_tokens"] > 0 and t["completion_tokens"] > 0  # token-exact data behind it
    wanted = {t["turn_id"] for t in turns[:2]}
    assert wanted <= sample_turn_ids(stack, want=wanted)


# ---- Anthropic Messages ----------------------------------------------------------------------------------------
def test_anthropic_sdk_tool_loop_streamed_and_not_is_judged_and_paired(stack, key):
    c = anthropic.Anthropic(base_url=stack.api, api_key=key, max_retries=0, timeout=120)
    sid = f"claude-{uuid.uuid4().hex[:8]}"
    meta = {"user_id": f"user_{'a' * 64}_account_{uuid.uuid4()}_session_{sid}"}
    tools = [{"name": "read", "description": "Read a file", "input_schema": READ_TOOL["parameters"]}]
    system = [{"type": "text", "text": "You are a helpful agent."}]
    history: list[dict] = [{"role": "user", "content": f"read notes {sid}"}]
    first = c.messages.create(
        model="policy", max_tokens=64, system=system, tools=tools, messages=history, metadata=meta
    )
    assert first.stop_reason == "tool_use" and first.type == "message" and first.role == "assistant"
    use = next(b for b in first.content if b.type == "tool_use")
    assert use.name == "read" and use.input == {"path": "notes.txt"}
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    history += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": f"notes of {sid}"}]},
    ]
    with c.messages.stream(
        model="policy", max_tokens=64, system=system, tools=tools, messages=history, metadata=meta
    ) as s:
        text = "".join(s.text_stream)
        second = s.get_final_message()
    assert text == "The notes say the meeting is at noon." == second.content[0].text
    assert second.stop_reason == "end_turn" and second.usage.output_tokens > 0 and second.usage.input_tokens > 0
    history += [{"role": "assistant", "content": text}, {"role": "user", "content": THANKS}]
    third = c.messages.with_raw_response.create(
        model="policy", max_tokens=64, system=system, tools=tools, messages=history, metadata=meta
    )
    assert third.headers["x-session-id"] == sid
    assert third.parse().content[0].text == "You are welcome."
    check_judged_tool_loop(stack, key, sid)


def test_anthropic_stop_sequence_is_named_streamed_and_not(stack, key):
    c = anthropic.Anthropic(base_url=stack.api, api_key=key, max_retries=0, timeout=120)
    ask = {"model": "policy", "max_tokens": 32, "stop_sequences": ["STOP", "never"]}
    msg = c.messages.create(**ask, messages=[{"role": "user", "content": f"say stop {uuid.uuid4().hex}"}])
    assert (msg.stop_reason, msg.stop_sequence, msg.content[0].text.strip()) == ("stop_sequence", "STOP", "alpha")
    with c.messages.stream(**ask, messages=[{"role": "user", "content": f"say stop {uuid.uuid4().hex}"}]) as s:
        final = s.get_final_message()
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "STOP")
    plain = c.messages.create(**ask, messages=[{"role": "user", "content": f"hi {uuid.uuid4().hex}"}])
    assert (plain.stop_reason, plain.stop_sequence) == ("end_turn", None)


def sse(response: httpx.Response) -> list[tuple[str, dict]]:
    """(event name, data) of each server-sent event."""
    events, name = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[len("data: ") :])))
    return events


def collapse(kinds: list[str]) -> list[str]:
    """Runs of one delta kind as one: how many deltas a text takes is the server's choice."""
    out: list[str] = []
    for k in kinds:
        if not (out and out[-1] == k and k.endswith("delta")):
            out.append(k)
    return out


def test_anthropic_stream_follows_the_documented_event_sequence(stack, key):
    body = {
        "model": "policy",
        "max_tokens": 64,
        "stream": True,
        "tools": [{"name": "read", "input_schema": READ_TOOL["parameters"]}],
        "messages": [{"role": "user", "content": f"read it with words {uuid.uuid4().hex[:6]}"}],
    }
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    with httpx.stream("POST", f"{stack.api}/v1/messages", json=body, headers=headers, timeout=120) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = sse(r)
    assert all(name == data["type"] for name, data in events)  # the event line names the data's type
    kinds = [name for name, _ in events]
    assert collapse(kinds) == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    data = [d for _, d in events]
    assert data[0]["message"]["content"] == [] and data[0]["message"]["stop_reason"] is None
    assert data[1] == {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    texts = [d["delta"] for d in data if d["type"] == "content_block_delta" and d["index"] == 0]
    assert all(t["type"] == "text_delta" for t in texts) and "".join(t["text"] for t in texts) == "Let me look."
    tool_start = next(d for d in data if d["type"] == "content_block_start" and d["index"] == 1)
    assert tool_start["content_block"]["type"] == "tool_use" and tool_start["content_block"]["input"] == {}
    partial = "".join(
        d["delta"]["partial_json"] for d in data if d["type"] == "content_block_delta" and d["index"] == 1
    )
    assert json.loads(partial) == {"path": "notes.txt"}
    delta = next(d for d in data if d["type"] == "message_delta")
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] > 0


# ---- OpenAI Responses ------------------------------------------------------------------------------------------
def test_openai_sdk_responses_tool_loop_chained_by_previous_response_id(stack, key):
    c = openai.OpenAI(base_url=f"{stack.api}/v1", api_key=key, max_retries=0, timeout=120)
    tools = [{"type": "function", **READ_TOOL}]
    tag = uuid.uuid4().hex[:8]
    raw = c.responses.with_raw_response.create(
        model="policy", instructions="You are a helpful agent.", input=f"read notes {tag}", tools=tools
    )
    sid = raw.headers["x-session-id"]
    first = raw.parse()
    assert first.object == "response" and first.status == "completed" and first.id.startswith("resp_")
    call = next(item for item in first.output if item.type == "function_call")
    assert call.name == "read" and json.loads(call.arguments) == {"path": "notes.txt"}
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    with c.responses.stream(
        model="policy",
        instructions="You are a helpful agent.",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": f"notes of {tag}"}],
        tools=tools,
    ) as s:
        deltas = [e.delta for e in s if e.type == "response.output_text.delta"]
        second = s.get_final_response()
    assert "".join(deltas) == second.output_text == "The notes say the meeting is at noon."
    third = c.responses.create(
        model="policy", previous_response_id=second.id, input=[{"role": "user", "content": THANKS}], tools=tools
    )
    assert third.output_text == "You are welcome." and third.previous_response_id == second.id
    check_judged_tool_loop(stack, key, sid)  # the chain is one session


def test_responses_stream_follows_the_documented_event_sequence(stack, key):
    body = {
        "model": "policy",
        "stream": True,
        "tools": [{"type": "function", **READ_TOOL}],
        "input": [{"role": "user", "content": [{"type": "input_text", "text": f"read it with words {uuid.uuid4()}"}]}],
    }
    with httpx.stream("POST", f"{stack.api}/v1/responses", json=body, headers=auth(key), timeout=120) as r:
        assert r.status_code == 200, r.read()
        events = sse(r)
    data = [d for _, d in events]
    assert [d["sequence_number"] for d in data] == list(range(len(data)))
    assert collapse([d["type"] for d in data]) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert data[0]["response"]["status"] == "in_progress" and data[0]["response"]["output"] == []
    done = data[-1]["response"]
    assert done["status"] == "completed" and [i["type"] for i in done["output"]] == ["message", "function_call"]
    assert done["output"][0]["content"][0]["text"] == "Let me look."
    assert json.loads(done["output"][1]["arguments"]) == {"path": "notes.txt"}
    assert done["usage"]["total_tokens"] == done["usage"]["input_tokens"] + done["usage"]["output_tokens"]


# ---- the chat route's guarantees -----------------------------------------------------------------------------------
def test_an_idempotency_key_makes_a_retry_the_same_turn_on_both_routes(stack, key):
    sid = f"idem-{uuid.uuid4().hex[:8]}"
    h = {**auth(key), "X-Session-Id": sid, "Idempotency-Key": f"k-{uuid.uuid4().hex}"}
    body = {"model": "policy", "max_tokens": 16, "messages": [{"role": "user", "content": "hello there"}]}
    a, b = (httpx.post(f"{stack.api}/v1/messages", json=body, headers=h, timeout=120) for _ in range(2))
    assert a.status_code == b.status_code == 200 and a.json() == b.json()
    h["Idempotency-Key"] = f"k-{uuid.uuid4().hex}"
    body = {"model": "policy", "input": "thanks, perfect!", "max_output_tokens": 16}
    c, d = (httpx.post(f"{stack.api}/v1/responses", json=body, headers=h, timeout=120) for _ in range(2))
    assert c.status_code == d.status_code == 200 and c.json()["id"] == d.json()["id"]
    log = httpx.get(f"{stack.api}/v1/sessions/{sid}/turns", headers=auth(key), timeout=30).json()
    assert log["total"] == 2  # one turn per key, whichever protocol asked


def test_a_forgotten_user_leaves_no_kept_conversation_behind(stack):
    user = f"gone-{uuid.uuid4().hex[:6]}"
    k = create_key(stack, user)
    c = openai.OpenAI(base_url=f"{stack.api}/v1", api_key=k, max_retries=0, timeout=120)
    first = c.responses.create(model="policy", input=f"remember {user}")
    r = redis.Redis.from_url(stack.redis)
    kept = f"oc:response:{first.id.removeprefix('resp_')}"
    assert r.exists(kept)
    out = httpx.delete(f"{stack.api}/v1/me/data", headers=auth(k), timeout=180)
    assert out.status_code == 200, out.text
    assert not r.exists(kept)


# ---- hostile input -----------------------------------------------------------------------------------------------
WRITES = ("oc:request:*", "oc:response:*", "oc:idempotency:*", "oc:turn:*")


def written(stack: RunningStack) -> set[bytes]:
    r = redis.Redis.from_url(stack.redis)
    return {k for pattern in WRITES for k in r.scan_iter(pattern)}


def test_hostile_input_is_a_4xx_in_each_protocols_shape_and_writes_nothing(stack, key):
    other = create_key(stack, f"mallory-{uuid.uuid4().hex[:6]}")
    c = openai.OpenAI(base_url=f"{stack.api}/v1", api_key=key, max_retries=0, timeout=120)
    mine = c.responses.create(model="policy", input=f"hello {uuid.uuid4().hex}")
    before = written(stack)
    deep = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 4, "x": json.loads("[" * 200 + "]" * 200)}
    huge = b'{"max_tokens": 4, "messages": [{"role": "user", "content": "' + b"a" * 1_100_000 + b'"}]}'
    anthropic_cases = [
        (b"{not json", {"x-api-key": key}, 400, "invalid_request_error"),
        (json.dumps({"max_tokens": 4, "messages": "hi"}).encode(), {"x-api-key": key}, 400, "invalid_request_error"),
        (json.dumps({"max_tokens": "many", "messages": []}).encode(), {"x-api-key": key}, 400, "invalid_request_error"),
        (
            json.dumps({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image"}]}]}).encode(),
            {"x-api-key": key},
            400,
            "invalid_request_error",
        ),
        (json.dumps(deep).encode(), {"x-api-key": key}, 400, "invalid_request_error"),
        (b'{"max_tokens": 4, "messages": [{"role": "user", "content": "\xff\xfe"}]}', {"x-api-key": key}, 400, None),
        (huge, {"x-api-key": key}, 413, "request_too_large"),
        (b"{}", {"x-api-key": "ocrl-nope-nope"}, 401, "authentication_error"),
        (b"{}", {}, 401, "authentication_error"),
    ]
    for raw, headers, status, kind in anthropic_cases:
        r = httpx.post(
            f"{stack.api}/v1/messages",
            content=raw,
            headers={**headers, "content-type": "application/json", "anthropic-version": "2023-06-01"},
            timeout=60,
        )
        assert r.status_code == status, (raw[:80], r.status_code, r.text)
        body = r.json()
        assert body["type"] == "error" and body["error"]["message"], body
        if kind:
            assert body["error"]["type"] == kind, body
    theirs = {"model": "policy", "input": "continue", "previous_response_id": mine.id}
    responses_cases = [
        (b"[1, 2", auth(key), 400),
        (json.dumps({"input": 5}).encode(), auth(key), 400),
        (json.dumps({"input": [{"type": "function_call", "name": "x"}]}).encode(), auth(key), 400),
        (json.dumps({"input": "hi", "temperature": "hot"}).encode(), auth(key), 400),
        (json.dumps({"input": [{"type": "input_image", "image_url": "x"}]}).encode(), auth(key), 400),
        (json.dumps({**deep, "input": "hi"}).encode(), auth(key), 400),
        (huge, auth(key), 413),
        (json.dumps(theirs).encode(), auth(other), 404),  # another user's response id
        (json.dumps({**theirs, "previous_response_id": "resp_" + "0" * 32}).encode(), auth(key), 404),
        (json.dumps({**theirs, "previous_response_id": "../../etc"}).encode(), auth(key), 404),
        (b"{}", {}, 401),
    ]
    for raw, headers, status in responses_cases:
        r = httpx.post(
            f"{stack.api}/v1/responses",
            content=raw,
            headers={**headers, "content-type": "application/json"},
            timeout=60,
        )
        assert r.status_code == status, (raw[:80], r.status_code, r.text)
        error = r.json()["error"]
        assert error["message"] and error["type"], error
    assert written(stack) == before
    with pytest.raises(openai.NotFoundError):  # and as the SDK sees it
        openai.OpenAI(base_url=f"{stack.api}/v1", api_key=other, max_retries=0).responses.create(
            model="policy", input="continue", previous_response_id=mine.id
        )
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=stack.api, api_key="ocrl-x-y", max_retries=0).messages.create(
            model="policy", max_tokens=4, messages=[{"role": "user", "content": "hi"}]
        )


# ---- the docs' examples ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("page", ["protocol-anthropic-messages.md", "protocol-openai-responses.md"])
def test_the_documented_example_runs_as_written(stack, key, page):
    """Each protocol page's example, copied as a user would, with this stack's address and a key."""
    import re
    import subprocess
    import sys

    from tests.helpers import REPO

    code = re.search(r"```python\n(.*?)```", (REPO / "docs" / page).read_text(), re.DOTALL).group(1)
    assert '"http://127.0.0.1:8000"' in code and '"ocrl-..."' in code
    code = code.replace('"http://127.0.0.1:8000"', repr(stack.api)).replace('"ocrl-..."', repr(key))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "The notes say the meeting is at noon." in out.stdout, out.stdout
