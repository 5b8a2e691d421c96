"""Bad input and bad credentials: the right 4xx with a reason, nothing recorded, the server keeps serving."""

from __future__ import annotations

import json

import httpx
import pytest
import redis

from tests.api.conftest import create_key
from tests.helpers import CLI, REPO

pytestmark = pytest.mark.timeout(300)

GOOD = {"model": "policy", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@pytest.fixture(scope="module")
def keys(chat_stack) -> dict[str, str]:
    return {u: create_key(chat_stack, u) for u in ("mallory", "bob", "carol")}


def post(stack, key: str | None, body, *, raw: bytes | None = None, headers: dict | None = None) -> httpx.Response:
    h = {"Content-Type": "application/json", **(headers or {})}
    if key is not None:
        h["Authorization"] = f"Bearer {key}"
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx.post(f"{stack.api}/v1/chat/completions", content=content, headers=h, timeout=60)


def recorded_requests(stack) -> int:
    return len(list(redis.Redis.from_url(stack.redis).scan_iter("oc:request:*")))


@pytest.mark.parametrize(
    "case, body, raw, status, words",
    [
        ("malformed json", None, b'{"messages": [', 400, "not valid JSON"),
        ("not an object", None, b"[1, 2]", 422, "JSON object"),
        ("missing messages", {"model": "policy"}, None, 422, "messages"),
        ("empty messages", {"messages": []}, None, 422, "messages"),
        ("messages wrong type", {"messages": "hi"}, None, 422, "messages"),
        ("unknown role", {"messages": [{"role": "wizard", "content": "hi"}]}, None, 422, "role"),
        ("user without content", {"messages": [{"role": "user"}]}, None, 422, "content"),
        ("tool without id", {"messages": [{"role": "tool", "content": "x"}]}, None, 422, "tool_call_id"),
        ("temperature wrong type", {**GOOD, "temperature": "hot"}, None, 422, "temperature"),
        ("temperature out of range", {**GOOD, "temperature": 7}, None, 422, "temperature"),
        ("n above one", {**GOOD, "n": 3}, None, 422, "n=1"),
        ("max_tokens zero", {**GOOD, "max_tokens": 0}, None, 422, "max_tokens"),
        (
            "image part",
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            None,
            422,
            "messages",
        ),
        ("body over the limit", {"messages": [{"role": "user", "content": "x" * 300_000}]}, None, 413, "limit"),
    ],
)
def test_bad_requests_get_a_reason_and_record_nothing(chat_stack, keys, case, body, raw, status, words):
    before = recorded_requests(chat_stack)
    r = post(chat_stack, keys["mallory"], body, raw=raw)
    assert r.status_code == status, (case, r.text)
    err = r.json()["error"]
    assert words.lower() in err["message"].lower(), (case, err)
    assert err["type"]
    assert recorded_requests(chat_stack) == before
    assert post(chat_stack, keys["mallory"], GOOD).status_code == 200  # still serving


def test_prompt_longer_than_the_context_is_a_400(chat_stack, keys):
    r = post(
        chat_stack,
        keys["carol"],
        {"messages": [{"role": "user", "content": "word " * 40000}]},
        headers={"X-Session-Id": "too-long"},
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "context_length_exceeded"
    assert post(chat_stack, keys["carol"], GOOD).status_code == 200


def test_auth_errors(chat_stack, keys):
    assert post(chat_stack, None, GOOD).status_code == 401
    r = post(chat_stack, "ocrl-000000000000-notarealkeynotarealkey00", GOOD)
    assert r.status_code == 401 and "invalid api key" in r.json()["error"]["message"]
    key = create_key(chat_stack, "dave")
    assert post(chat_stack, key, GOOD).status_code == 200
    key_id = key.split("-")[1]
    out = subprocess_run(chat_stack, ["keys", "revoke", key_id])
    assert "revoked" in out
    r = post(chat_stack, key, GOOD)
    assert r.status_code == 403 and "revoked" in r.json()["error"]["message"]
    listing = subprocess_run(chat_stack, ["keys", "list"])
    assert key_id in listing and "revoked" in listing and key not in listing


def test_sessions_are_scoped_by_user(chat_stack, keys):
    sid = "shared-name"
    for user in ("bob", "carol"):
        assert post(chat_stack, keys[user], GOOD, headers={"X-Session-Id": sid}).status_code == 200
    bob_turns = httpx.get(
        f"{chat_stack.api}/v1/sessions/{sid}/turns", headers={"Authorization": f"Bearer {keys['bob']}"}
    ).json()
    assert bob_turns["total"] == 1  # carol's turn went to carol's own session
    r = httpx.get(
        f"{chat_stack.api}/v1/sessions/never-created/turns", headers={"Authorization": f"Bearer {keys['carol']}"}
    )
    assert r.status_code == 404
    bob_only = "bob-private"
    post(chat_stack, keys["bob"], GOOD, headers={"X-Session-Id": bob_only})
    r = httpx.get(
        f"{chat_stack.api}/v1/sessions/{bob_only}/turns", headers={"Authorization": f"Bearer {keys['carol']}"}
    )
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
    carol_sessions = httpx.get(
        f"{chat_stack.api}/v1/sessions", headers={"Authorization": f"Bearer {keys['carol']}"}
    ).json()["data"]
    assert carol_sessions and all(s["user_id"] == "carol" for s in carol_sessions)
    assert bob_only not in {s["session_id"] for s in carol_sessions}


def test_models_endpoint(chat_stack, keys):
    r = httpx.get(f"{chat_stack.api}/v1/models", headers={"Authorization": f"Bearer {keys['bob']}"})
    assert r.status_code == 200 and r.json()["data"][0]["id"] == "openclaw-rl-policy"


def test_cli_sessions_and_turns(chat_stack, keys):
    post(chat_stack, keys["bob"], GOOD, headers={"X-Session-Id": "cli-view"})
    assert "cli-view" in subprocess_run(chat_stack, ["sessions", "--user", "bob"])
    out = subprocess_run(chat_stack, ["turns", "cli-view", "--user", "bob"])
    assert "#0 main" in out and "prompt:   user: hi" in out
    missing = subprocess_run(chat_stack, ["turns", "cli-view", "--user", "carol"], ok=False)
    assert "no session" in missing


def subprocess_run(stack, args: list[str], ok: bool = True) -> str:
    import subprocess

    out = subprocess.run(CLI + args, env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=60)
    if ok:
        assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr
