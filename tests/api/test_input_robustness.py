"""Hostile or unlucky input through real HTTP: a clear 4xx with a reason, nothing left in Redis, no duplicate turns."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import redis

from tests.api.conftest import create_key

pytestmark = pytest.mark.timeout(400)

GOOD = {"model": "policy", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@pytest.fixture(scope="module")
def keys(chat_stack) -> dict[str, str]:
    return {u: create_key(chat_stack, u) for u in ("rob", "ursula")}


def post(stack, key: str, body=None, *, raw: bytes | None = None, headers: dict | None = None) -> httpx.Response:
    h = {"Content-Type": "application/json", "Authorization": f"Bearer {key}", **(headers or {})}
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx.post(f"{stack.api}/v1/chat/completions", content=content, headers=h, timeout=120)


def stored_requests(stack) -> set[bytes]:
    return set(redis.Redis.from_url(stack.redis).scan_iter("oc:request:*"))


def user_turn_index(stack, user: str) -> set[bytes]:
    """The user's turn index in the store (what export and forget find their turns by)."""
    from contracts.chat import tenant_of
    from store import keys as store_keys

    return redis.Redis.from_url(stack.redis).smembers(store_keys.user_turns(tenant_of(user)))


def turn_log(stack, key: str, session_id: str) -> dict:
    r = httpx.get(f"{stack.api}/v1/sessions/{session_id}/turns", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def assert_refused(r: httpx.Response, statuses: tuple[int, ...], words: str) -> dict:
    assert r.status_code in statuses, r.text
    err = r.json()["error"]
    assert words.lower() in err["message"].lower(), err
    return err


# ---- 1. malformed input: a 4xx with a reason, nothing stored ----------------------------------------------------


def test_deeply_nested_json_is_a_400_not_a_500(chat_stack, keys):
    before = stored_requests(chat_stack)
    depth = 100_000
    raw = b'{"messages": [{"role": "user", "content": ' + b"[" * depth + b"]" * depth + b"}]}"
    err = assert_refused(post(chat_stack, keys["rob"], raw=raw), (400, 413, 422), "nested")
    assert err["type"] == "invalid_request_error"
    assert stored_requests(chat_stack) == before
    assert post(chat_stack, keys["rob"], GOOD).status_code == 200  # still serving


def test_lone_surrogate_is_a_400(chat_stack, keys):
    before = stored_requests(chat_stack)
    raw = b'{"messages": [{"role": "user", "content": "hi \\ud800 there"}], "max_tokens": 4}'
    err = assert_refused(post(chat_stack, keys["rob"], raw=raw), (400,), "surrogate")
    assert err["param"] == "messages.0.content"
    assert stored_requests(chat_stack) == before


@pytest.mark.parametrize("where", ["header", "body"])
def test_overlong_session_id_is_a_400(chat_stack, keys, where):
    before = stored_requests(chat_stack)
    sid = "s" * 5000
    if where == "header":
        r = post(chat_stack, keys["rob"], GOOD, headers={"X-Session-Id": sid})
    else:
        r = post(chat_stack, keys["rob"], {**GOOD, "session_id": sid})
    err = assert_refused(r, (400,), "256")
    assert err["code"] == "invalid_session_id"
    assert stored_requests(chat_stack) == before


def test_more_concurrent_turns_than_temporal_admits_on_one_session_is_a_429(chat_stack, keys):
    """Temporal admits 10 updates in flight per workflow; main-line turns of a session queue behind each other."""
    before = stored_requests(chat_stack)
    indexed = user_turn_index(chat_stack, "rob")
    sid = f"busy-{uuid.uuid4().hex[:6]}"
    body = {"messages": [{"role": "user", "content": "write a long story"}], "max_tokens": 100}  # ~0.5 s a turn
    with ThreadPoolExecutor(16) as pool:
        replies = list(
            pool.map(lambda _: post(chat_stack, keys["rob"], body, headers={"X-Session-Id": sid}), range(16))
        )
    statuses = [r.status_code for r in replies]
    assert set(statuses) <= {200, 429}, [(r.status_code, r.text[:200]) for r in replies]
    busy = [r for r in replies if r.status_code == 429]
    assert busy, statuses
    err = assert_refused(busy[0], (429,), "too many requests in flight on this session")
    assert err["code"] == "session_busy" and err["type"] == "rate_limit_error"
    served = statuses.count(200)
    assert served >= 10, statuses
    assert len(stored_requests(chat_stack) - before) == served  # the refused ones left nothing behind
    assert len(user_turn_index(chat_stack, "rob") - indexed) == served  # nor an entry in the user's turn index
    assert turn_log(chat_stack, keys["rob"], sid)["total"] == served
    assert post(chat_stack, keys["rob"], GOOD, headers={"X-Session-Id": sid}).status_code == 200  # free again


def test_session_cap_counts_turns_not_retries_of_one_turn():
    from api.admission import SESSION_MAX_INFLIGHT, Admission
    from api.errors import ApiError

    gate = Admission(max_per_user=100)
    for i in range(SESSION_MAX_INFLIGHT):
        gate.acquire("u", "session/u/s", f"t{i}")
    gate.acquire("u", "session/u/s", "t0")  # a retry with the same Idempotency-Key joins its turn
    gate.acquire("u", "session/u/other", "x")  # another session is not affected
    with pytest.raises(ApiError) as refused:
        gate.acquire("u", "session/u/s", "t-extra")
    assert refused.value.status == 429 and refused.value.code == "session_busy"
    gate.release("u", "session/u/s", "t0")
    with pytest.raises(ApiError):
        gate.acquire("u", "session/u/s", "t-extra")  # t0 still has its first request in flight
    gate.release("u", "session/u/s", "t0")
    gate.acquire("u", "session/u/s", "t-extra")


# What Temporal 1.32 (the dev server) answered the 11th concurrent Update-with-start on one workflow.
UPDATE_LIMIT_STATUS = (
    b"\x08\x08\x12(Update-with-Start could not be executed.\x1a\xdd\x02\nOtype.googleapis.com/temporal.api."
    b"errordetails.v1.MultiOperationExecutionFailure\x12\x89\x02\nh\x08\n\x12\x16Operation was aborted.\x1aL\nJ"
    b"type.googleapis.com/temporal.api.failure.v1.MultiOperationExecutionAborted\n\x9c\x01\x08\x08\x12Elimit on "
    b"number of concurrent in-flight updates has been reached (10)\x1aQ\nItype.googleapis.com/temporal.api."
    b"errordetails.v1.ResourceExhaustedFailure\x12\x04\x08\x02\x10\x01"
)


def test_update_limit_is_told_from_other_resource_exhaustion_by_its_cause():
    from temporalio.service import RPCError, RPCStatusCode

    from api.session_gateway import is_update_limit

    assert is_update_limit(RPCError("limit", RPCStatusCode.RESOURCE_EXHAUSTED, UPDATE_LIMIT_STATUS))
    assert not is_update_limit(RPCError("busy", RPCStatusCode.RESOURCE_EXHAUSTED, b""))  # no cause: an overload
    assert not is_update_limit(RPCError("x", RPCStatusCode.UNAVAILABLE, UPDATE_LIMIT_STATUS))


# What Temporal 1.32 answered an Update-with-start whose workflow task the server failed (here: an unknown search
# attribute; in a session: continuing as new the instant a judge child reported back, failed as UnhandledCommand).
TASK_FAILED_STATUS = (
    b"\x08\t\x12(Update-with-Start could not be executed.\x1a\xfd\x01\nOtype.googleapis.com/temporal.api.errordetails."
    b"v1.MultiOperationExecutionFailure\x12\xa9\x01\n\x00\n\xa4\x01\x08\t\x12TUnable to perform workflow execution "
    b"update due to unexpected workflow task failure.\x1aJ\nHtype.googleapis.com/temporal.api.errordetails.v1."
    b"WorkflowNotReadyFailure"
)


def test_an_update_dropped_with_a_failed_workflow_task_is_told_apart_so_the_turn_is_sent_again():
    from temporalio.service import RPCError, RPCStatusCode

    from api.session_gateway import is_update_limit, is_workflow_not_ready

    dropped = RPCError("Update-with-Start failed", RPCStatusCode.FAILED_PRECONDITION, TASK_FAILED_STATUS)
    assert is_workflow_not_ready(dropped) and not is_update_limit(dropped)
    assert not is_workflow_not_ready(RPCError("limit", RPCStatusCode.RESOURCE_EXHAUSTED, UPDATE_LIMIT_STATUS))
    assert not is_workflow_not_ready(RPCError("other", RPCStatusCode.FAILED_PRECONDITION, b""))


# ---- 2. a request refused as longer than the context leaves nothing behind --------------------------------------


def test_prompt_longer_than_the_context_leaves_no_stored_request(chat_stack, keys):
    before = stored_requests(chat_stack)
    sid = f"too-long-{uuid.uuid4().hex[:6]}"
    r = post(
        chat_stack,
        keys["rob"],
        {"messages": [{"role": "user", "content": "word " * 40000}]},
        headers={"X-Session-Id": sid},
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded", r.text
    assert stored_requests(chat_stack) == before


def test_refused_reply_that_pairs_an_earlier_turn_is_kept_for_its_judge(chat_stack, keys):
    """The too-long request's last user message is the next state of the turn before it: the judge reads it."""
    sid = f"pair-{uuid.uuid4().hex[:6]}"
    first = post(chat_stack, keys["rob"], GOOD, headers={"X-Session-Id": sid})
    assert first.status_code == 200, first.text
    reply = first.json()["choices"][0]["message"]
    history = [*GOOD["messages"], {"role": "assistant", "content": reply.get("content") or ""}]
    long_reply = {"messages": [*history, {"role": "user", "content": "word " * 40000}]}
    r = post(chat_stack, keys["rob"], long_reply, headers={"X-Session-Id": sid})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded", r.text
    paired = turn_log(chat_stack, keys["rob"], sid)["turns"][0]
    assert paired["next_state_status"] == "paired"
    assert redis.Redis.from_url(chat_stack.redis).exists(paired["next_state"]["request_key"])


@pytest.mark.parametrize("idempotency_key", [False, True])
def test_a_refused_request_adds_nothing_to_the_users_turn_index(chat_stack, idempotency_key):
    """Refused before it was served (too long), a request leaves no trace in the store: not its request, nor its
    turn (or its key's) in the user's turn index, which would otherwise grow with every refusal."""
    from contracts.chat import tenant_of
    from store import keys as store_keys

    user = f"refused-{uuid.uuid4().hex[:6]}"
    key = create_key(chat_stack, user)
    index = store_keys.user_turns(tenant_of(user))
    r = redis.Redis.from_url(chat_stack.redis)
    headers = {"X-Session-Id": f"idx-{uuid.uuid4().hex[:6]}"}
    if idempotency_key:
        headers["Idempotency-Key"] = uuid.uuid4().hex
    too_long = {"messages": [{"role": "user", "content": "word " * 40000}]}
    refused = post(chat_stack, key, too_long, headers=headers)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "context_length_exceeded", refused.text
    assert r.smembers(index) == set() and not r.exists(index)
    served = post(chat_stack, key, GOOD, headers={**headers, "Idempotency-Key": uuid.uuid4().hex})
    assert served.status_code == 200, served.text
    assert len(r.smembers(index)) == 1  # a served turn is indexed (what export and forget find it by)


# ---- 3. Idempotency-Key: a retried request gets the same turn, never a second one --------------------------------


def test_idempotency_key_replays_the_same_turn(chat_stack, keys):
    body = {"messages": [{"role": "user", "content": f"tell me something {uuid.uuid4().hex[:4]}"}], "max_tokens": 12}
    idem = {"Idempotency-Key": f"retry-{uuid.uuid4().hex}"}
    first = post(chat_stack, keys["rob"], body, headers=idem)
    again = post(chat_stack, keys["rob"], body, headers=idem)
    assert first.status_code == again.status_code == 200, (first.text, again.text)
    assert again.json() == first.json()  # same completion id, content, usage and timestamp
    sid = first.headers["X-Session-Id"]
    assert again.headers["X-Session-Id"] == sid  # no session hint: the retry still lands in the first's session
    assert turn_log(chat_stack, keys["rob"], sid)["total"] == 1

    other = post(
        chat_stack, keys["rob"], body, headers={"Idempotency-Key": f"other-{uuid.uuid4().hex}", "X-Session-Id": sid}
    )
    assert other.status_code == 200 and other.json()["id"] != first.json()["id"]
    assert turn_log(chat_stack, keys["rob"], sid)["total"] == 2


def test_a_streaming_retry_gets_the_finished_turn_streamed(chat_stack, keys):
    sid = f"idem-stream-{uuid.uuid4().hex[:6]}"
    body = {"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 12}
    headers = {"Idempotency-Key": uuid.uuid4().hex, "X-Session-Id": sid}
    first = post(chat_stack, keys["rob"], body, headers=headers)
    assert first.status_code == 200, first.text
    again = post(chat_stack, keys["rob"], {**body, "stream": True}, headers=headers)
    assert again.status_code == 200 and again.text.rstrip().endswith("data: [DONE]"), again.text
    chunks = [json.loads(line[6:]) for line in again.text.splitlines() if line.startswith("data: {")]
    assert {c["id"] for c in chunks} == {first.json()["id"]}
    streamed = "".join(ch["delta"].get("content") or "" for c in chunks for ch in c["choices"])
    assert streamed == first.json()["choices"][0]["message"]["content"]
    assert turn_log(chat_stack, keys["rob"], sid)["total"] == 1


def test_concurrent_retries_with_one_idempotency_key_share_one_turn(chat_stack, keys):
    sid = f"idem-race-{uuid.uuid4().hex[:6]}"
    body = {"messages": [{"role": "user", "content": "a story please"}], "max_tokens": 40}
    headers = {"Idempotency-Key": uuid.uuid4().hex, "X-Session-Id": sid}
    with ThreadPoolExecutor(3) as pool:
        replies = list(pool.map(lambda _: post(chat_stack, keys["rob"], body, headers=headers), range(3)))
    assert [r.status_code for r in replies] == [200] * 3, [r.text for r in replies]
    assert len({r.json()["id"] for r in replies}) == 1
    assert len({r.json()["choices"][0]["message"].get("content") for r in replies}) == 1
    assert turn_log(chat_stack, keys["rob"], sid)["total"] == 1


def test_same_idempotency_key_of_two_users_never_collides(chat_stack, keys):
    sid, idem = f"idem-users-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    headers = {"Idempotency-Key": idem, "X-Session-Id": sid}
    rob, ursula = (post(chat_stack, keys[u], GOOD, headers=headers) for u in ("rob", "ursula"))
    assert rob.status_code == ursula.status_code == 200, (rob.text, ursula.text)
    assert rob.json()["id"] != ursula.json()["id"]
    assert turn_log(chat_stack, keys["rob"], sid)["total"] == turn_log(chat_stack, keys["ursula"], sid)["total"] == 1


def test_idempotency_key_reused_with_another_request_is_a_422(chat_stack, keys):
    idem = {"Idempotency-Key": uuid.uuid4().hex}
    assert post(chat_stack, keys["rob"], GOOD, headers=idem).status_code == 200
    changed = {**GOOD, "messages": [{"role": "user", "content": "something else"}]}
    err = assert_refused(post(chat_stack, keys["rob"], changed, headers=idem), (422,), "idempotency-key")
    assert err["code"] == "idempotency_key_reused"


def test_overlong_idempotency_key_is_a_400(chat_stack, keys):
    err = assert_refused(post(chat_stack, keys["rob"], GOOD, headers={"Idempotency-Key": "k" * 300}), (400,), "256")
    assert err["param"] == "Idempotency-Key"
