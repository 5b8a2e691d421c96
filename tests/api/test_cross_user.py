"""The cross-user matrix: user B, with a key of their own, never reads, ends or joins user A's session.

For each awkward session id, A chats in it (X-Session-Id header, then body `session_id`), then B
audits it, deletes it and chats under the same id. B gets 404s and their own, separate session;
A's turn log is unchanged throughout and A carries on. Bad or absent keys get 401 on every route.
"""

from __future__ import annotations

import subprocess
import uuid
from urllib.parse import quote

import httpx
import pytest

from tests.api.conftest import create_key
from tests.helpers import CLI, REPO

pytestmark = pytest.mark.timeout(600)

SESSION_IDS = {
    "slash": "a/b",
    "dotdot": "..",
    "colon": "x:1",
    "unicode": "会话-é",
    "long": "L" * 199 + "é",
    "percent": "%2e%2e",
    "space": "with space",
}
TINY = 2
"""max_tokens: the matrix is about routing, not text."""


@pytest.fixture(scope="module")
def keys(chat_stack) -> dict[str, str]:
    return {u: create_key(chat_stack, u) for u in ("alice", "bob")}


def path_of(session_id: str) -> str:
    """The id as one path segment: '/' and '%' escaped, and dots too, or clients drop `..` as a dot-segment."""
    return quote(session_id, safe="").replace(".", "%2E")


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def chat(stack, key: str, session_id: str, text: str, via: str) -> httpx.Response:
    body: dict = {"messages": [{"role": "user", "content": text}], "max_tokens": TINY}
    headers: dict = {"Content-Type": "application/json", **auth(key)}
    if via == "header":
        headers["X-Session-Id"] = session_id.encode()  # UTF-8 bytes, as any client sends non-ASCII
    else:
        body["session_id"] = session_id
    return httpx.post(f"{stack.api}/v1/chat/completions", json=body, headers=headers, timeout=120)


def audit(stack, key: str, session_id: str) -> httpx.Response:
    return httpx.get(f"{stack.api}/v1/sessions/{path_of(session_id)}/turns", headers=auth(key), timeout=30)


def end(stack, key: str, session_id: str) -> httpx.Response:
    return httpx.delete(f"{stack.api}/v1/sessions/{path_of(session_id)}", headers=auth(key), timeout=30)


def turns_of(stack, key: str, session_id: str) -> dict:
    r = audit(stack, key, session_id)
    assert r.status_code == 200, r.text
    return r.json()


def fingerprint(log: dict) -> tuple:
    """What another user must never change; judgements and next-state pairing may move on by themselves."""
    turns = [(t["index"], t["turn_id"], t["prompt_summary"], t["response_summary"]) for t in log["turns"]]
    return log["workflow_id"], log["status"], log["closed_reason"], log["total"], turns


def served(r: httpx.Response, session_id: str) -> None:
    assert r.status_code == 200, r.text
    assert r.headers["X-Session-Id"] == session_id  # httpx reads the header's UTF-8 bytes as UTF-8


@pytest.mark.parametrize("session_id", list(SESSION_IDS.values()), ids=list(SESSION_IDS))
def test_another_user_never_reads_ends_or_joins_a_session(chat_stack, keys, session_id):
    a, b = keys["alice"], keys["bob"]
    secret = f"alice-secret-{uuid.uuid4().hex[:8]}"

    # A chats in the session through the header, then through the body: one session either way.
    served(chat(chat_stack, a, session_id, f"{secret} one", "header"), session_id)
    served(chat(chat_stack, a, session_id, f"{secret} two", "body"), session_id)
    before = turns_of(chat_stack, a, session_id)
    assert before["session_id"] == session_id and before["status"] == "running"
    assert before["total"] == 2 and all(secret in t["prompt_summary"] for t in before["turns"]), before

    # B asks for A's session: a 404 that gives nothing of A's away.
    seen = audit(chat_stack, b, session_id)
    assert seen.status_code == 404 and seen.json()["error"]["code"] == "session_not_found", seen.text
    assert secret not in seen.text and "alice" not in seen.text

    # B tries to end it: a 404, and A's session runs on untouched.
    ended = end(chat_stack, b, session_id)
    assert ended.status_code == 404 and ended.json()["error"]["code"] == "session_not_found", ended.text
    assert fingerprint(turns_of(chat_stack, a, session_id)) == fingerprint(before)

    # B chats under the same id, both ways: B's own session, holding only B's turns.
    for via in ("header", "body"):
        mine = chat(chat_stack, b, session_id, f"bob speaking via {via}", via)
        served(mine, session_id)
        assert secret not in mine.text
    bobs = turns_of(chat_stack, b, session_id)
    assert bobs["total"] == 2 and bobs["workflow_id"] != before["workflow_id"], bobs
    assert all("bob speaking" in t["prompt_summary"] and secret not in t["prompt_summary"] for t in bobs["turns"])
    assert fingerprint(turns_of(chat_stack, a, session_id)) == fingerprint(before)

    # B ends B's session: A's is still running, and A carries on in it.
    assert end(chat_stack, b, session_id).status_code == 200
    assert fingerprint(turns_of(chat_stack, a, session_id)) == fingerprint(before)
    served(chat(chat_stack, a, session_id, f"{secret} three", "body"), session_id)
    after = turns_of(chat_stack, a, session_id)
    assert after["status"] == "running" and after["total"] == 3
    assert fingerprint(after)[-1][:2] == fingerprint(before)[-1]
    assert secret in after["turns"][2]["prompt_summary"]
    assert after["turns"][1]["next_state_status"] == "paired"  # A's third request paired A's second turn


def test_session_listing_shows_only_the_callers_own_sessions(chat_stack, keys):
    sid = f"listed-{uuid.uuid4().hex[:6]}"
    served(chat(chat_stack, keys["alice"], sid, "hello", "header"), sid)
    for user, key in keys.items():
        r = httpx.get(f"{chat_stack.api}/v1/sessions", params={"limit": 500}, headers=auth(key), timeout=30)
        assert r.status_code == 200, r.text
        sessions = r.json()["data"]
        assert sessions and {s["user_id"] for s in sessions} == {user}
        assert (sid in {s["session_id"] for s in sessions}) == (user == "alice")


def test_a_slash_in_the_session_id_may_also_travel_unescaped(chat_stack, keys):
    sid = f"team/{uuid.uuid4().hex[:6]}/chat"
    served(chat(chat_stack, keys["alice"], sid, "hello", "body"), sid)
    r = httpx.get(f"{chat_stack.api}/v1/sessions/{sid}/turns", headers=auth(keys["alice"]), timeout=30)
    assert r.status_code == 200 and r.json()["session_id"] == sid and r.json()["total"] == 1, r.text
    assert httpx.delete(f"{chat_stack.api}/v1/sessions/{sid}", headers=auth(keys["alice"]), timeout=30).is_success


# ---- keys ---------------------------------------------------------------------------------------------------------

ROUTES = [
    ("GET", "/v1/models"),
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/sessions"),
    ("GET", "/v1/sessions/x:1/turns"),
    ("DELETE", "/v1/sessions/x:1"),
]


def bad_keys(good: str) -> dict[str, dict[str, str]]:
    forged = good[:-1] + ("A" if good[-1] != "A" else "B")
    return {
        "absent": {},
        "empty": {"Authorization": ""},
        "bearer-nothing": {"Authorization": "Bearer"},
        "quoted-empty": {"Authorization": 'Bearer ""'},
        "basic": {"Authorization": f"Basic {good}"},
        "bare-key": {"Authorization": good},
        "garbage": {"Authorization": "Bearer not-a-key"},
        "forged-secret": {"Authorization": f"Bearer {forged}"},
        "unknown-id": {"Authorization": "Bearer ocrl-000000000000-" + "x" * 32},
        "huge": {"Authorization": "Bearer " + "k" * 8000},
        "x-api-key-only": {"X-Api-Key": good},
    }


def call(stack, method: str, path: str, headers: dict) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": TINY}
    return httpx.request(
        method, f"{stack.api}{path}", json=body if method == "POST" else None, headers=headers, timeout=60
    )


def test_bad_or_absent_keys_get_a_401_on_every_route(chat_stack, keys):
    sid = "x:1"  # alice's session from the matrix (or a fresh one): a 401 must leave it as it is
    served(chat(chat_stack, keys["alice"], sid, "keep me", "body"), sid)
    before = turns_of(chat_stack, keys["alice"], sid)
    failures = []
    for name, headers in bad_keys(keys["alice"]).items():
        for method, path in ROUTES:
            r = call(chat_stack, method, path, headers)
            err = r.json().get("error", {}) if r.headers.get("content-type", "").startswith("application/json") else {}
            if r.status_code != 401 or err.get("type") != "authentication_error" or "keep me" in r.text:
                failures.append((name, method, path, r.status_code, r.text[:200]))
            elif r.headers.get("WWW-Authenticate") != "Bearer":
                failures.append((name, method, path, "no WWW-Authenticate", dict(r.headers)))
    assert not failures, failures
    assert fingerprint(turns_of(chat_stack, keys["alice"], sid)) == fingerprint(before)


def test_a_revoked_key_gets_a_403_on_every_route(chat_stack, keys):
    key = create_key(chat_stack, "carol")
    key_id = key.split("-")[1]
    assert call(chat_stack, "GET", "/v1/models", auth(key)).status_code == 200
    out = subprocess.run(
        CLI + ["keys", "revoke", key_id], env=chat_stack.env, capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for method, path in ROUTES:
        r = call(chat_stack, method, path, auth(key))
        assert r.status_code == 403 and r.json()["error"]["code"] == "revoked_api_key", (method, path, r.text)
