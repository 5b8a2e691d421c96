"""A user's rights over their data, through the real stack (Temporal dev server, valkey, the tiny engine, the
heuristic judge): export what is held, opt out of training (per user, per key), and be forgotten, with nothing of
the user left in the store or the data directory afterwards (docs/user-data.md)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
import redis

from store.samples import PersonalTurn, decode_sample
from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import CLI, REPO, RunningStack

pytestmark = pytest.mark.timeout(900)

CORRECTION = "That's wrong, you should write it in French instead."
THANKS = "thanks, perfect!"


@pytest.fixture(scope="module")
def stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    env = chat_stack_env(
        tmp_path_factory.mktemp("userdata") / "data", tiny_model, OPENCLAW_RL_SESSION__IDLE_TIMEOUT_S="30"
    )
    s = RunningStack(env).start()
    yield s
    s.stop()


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def chat(stack: RunningStack, key: str, sid: str | None, messages: list[dict], **headers: str) -> httpx.Response:
    h = {**auth(key), **headers}
    if sid is not None:
        h["X-Session-Id"] = sid
    return httpx.post(
        f"{stack.api}/v1/chat/completions", json={"messages": messages, "max_tokens": 6}, headers=h, timeout=120
    )


def converse(stack: RunningStack, key: str, sid: str, marker: str, nexts: list[str]) -> list[dict]:
    """A session of len(nexts) + 1 turns, each next message the previous answer's next state; returns the history."""
    history = [{"role": "user", "content": f"write a poem about {marker}"}]
    for nxt in nexts:
        r = chat(stack, key, sid, history)
        assert r.status_code == 200, r.text
        history += [
            {"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]},
            {"role": "user", "content": f"{nxt} ({marker})"},
        ]
    r = chat(stack, key, sid, history)
    assert r.status_code == 200, r.text
    return history


def wait_judged(stack: RunningStack, key: str, sid: str, count: int, timeout: float = 120.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        log = httpx.get(f"{stack.api}/v1/sessions/{sid}/turns", headers=auth(key), timeout=30).json()
        judged = [t for t in log["turns"] if t.get("judgement")]
        if len(judged) >= count:
            return log["turns"]
        assert time.monotonic() < deadline, f"not {count} judged turns within {timeout}s: {log}"
        time.sleep(0.3)


def samples_of(stack: RunningStack, user: str) -> list:
    r = redis.Redis.from_url(stack.redis)
    out = []
    for name in r.scan_iter("oc:samples:*", _type="stream"):
        for _, fields in r.xrange(name):
            s = decode_sample(fields)
            if isinstance(s.provenance, PersonalTurn) and s.provenance.user_id == user:
                out.append(s)
    return out


def users_cli(stack: RunningStack, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + ["users", *args], env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=180)


# ---- the scans: nothing of the user anywhere ---------------------------------------------------------------------
def store_hits(stack: RunningStack, needles: list[str]) -> list[str]:
    """Every key whose name or value holds one of `needles` (every type read back whole)."""
    r = redis.Redis.from_url(stack.redis)
    wanted = [n.encode() for n in needles]
    hits = []
    for name in r.scan_iter(count=1000):
        kind = r.type(name).decode()
        if kind == "string":
            blobs = [r.get(name) or b""]
        elif kind == "hash":
            blobs = [b for kv in r.hgetall(name).items() for b in kv]
        elif kind == "set":
            blobs = list(r.smembers(name))
        elif kind == "list":
            blobs = r.lrange(name, 0, -1)
        elif kind == "zset":
            blobs = [m for m, _ in r.zrange(name, 0, -1, withscores=True)]
        elif kind == "stream":
            blobs = [b for _, fields in r.xrange(name) for kv in fields.items() for b in kv]
        else:
            blobs = []
        for blob in [name, *blobs]:
            if any(w in blob for w in wanted):
                hits.append(f"{name.decode()} ({kind})")
                break
    return hits


def temporal_tables_holding(db: Path, needle: str) -> set[str]:
    """The tables of Temporal's database holding `needle`; a workflow history's rows as `history:<workflow id>`."""
    import re
    import sqlite3

    def has(row: tuple) -> bool:
        return any(needle.encode() in (v if isinstance(v, bytes) else str(v).encode()) for v in row)

    with sqlite3.connect(db) as conn:
        trees = {}
        for tree_id, info in conn.execute("SELECT tree_id, data FROM history_tree"):
            m = re.search(rb"[0-9a-f-]{36}:(.+?):[0-9a-f-]{36}", info)
            trees[tree_id] = m.group(1).decode() if m else "?"
        out = set()
        for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            if t == "history_node":
                out |= {
                    f"history:{trees.get(r[0], '?')}"
                    for r in conn.execute("SELECT tree_id, data FROM history_node")
                    if has(r)
                }
            elif any(has(r) for r in conn.execute(f"SELECT * FROM {t}")):
                out.add(t)
        return out


TEMPORAL_DB_FILES = ("temporal/temporal.sqlite",)
"""Temporal's database and its write-ahead log and shared-memory index (`-wal`, `-shm`): read through SQLite
(`temporal_tables_holding`), not as bytes, since a page the database has freed, or an earlier image of a page in the
write-ahead log, is no longer any table's."""


def nothing_left_on_disk(data_dir: Path, user: str, marker: str, old_ids: bool = False) -> None:
    """No file holds the user's content and none names them: Temporal's database (every table, its task queues
    and the training workflow's history included) and every log, the Temporal server's and the SDK's warnings about
    a deleted workflow included, name the user's workflows by pseudonym only (docs/user-data.md).

    `old_ids`: the user had a session started before ids were pseudonyms (`session/<user id>/...`): Temporal's task
    queues may still name that workflow, and the server's and the SDK's warnings about it, by its id, until they
    fire (the migration's leftover, docs/user-data.md)."""
    assert file_hits(data_dir, [marker]) == []
    assert file_hits(data_dir, [user], skip=(*TEMPORAL_DB_FILES, "logs/") if old_ids else TEMPORAL_DB_FILES) == []
    assert log_lines_naming(data_dir, user, old_ids) == []
    allowed = OLD_ID_TASK_TABLES if old_ids else set()
    assert temporal_tables_holding(data_dir / "temporal" / "temporal.sqlite", user) <= allowed


OLD_ID_TASK_TABLES = {"timer_tasks", "transfer_tasks", "visibility_tasks"}
"""Temporal's own queues of pending timers and tasks: they name a deleted workflow by its id until they fire and are
cleaned, at most the namespace's retention later; an old-form id names the user (docs/user-data.md)."""


def log_lines_naming(data_dir: Path, user: str, old_ids: bool = False) -> list[tuple[str, str]]:
    """(log, line) of the stack's logs naming `user` at all (workflow ids hold pseudonyms: the server's and the SDK's
    warnings about a deleted workflow, which may come after the forget returned, name no one). `old_ids`: but for
    Temporal's warnings naming an old-form workflow id (`session/<user>/...`, its judges') and nothing else of the
    user."""
    bad = []
    for log in sorted((data_dir / "logs").glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if user not in line:
                continue
            if old_ids and log.name == "temporal.log":
                allowed = line.count(user) == line.count(f"session/{user}/")
            elif old_ids:
                ids = (f'workflow ID \\"session/{user}/', f'workflow ID \\"judge/session/{user}/')
                allowed = "temporalio_sdk_core" in line and any(i in line for i in ids)
            else:
                allowed = False
            if not allowed:
                bad.append((log.name, line))
    return bad


def test_a_log_line_naming_a_user_even_inside_a_workflow_id_is_found(tmp_path: Path):
    """Under load a visibility task of a deleted session ran after the forget had returned, and the server's
    warning named the workflow (issue 42, item 14): ids hold pseudonyms now, so any line naming the user fails."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "temporal.log").write_text(
        '{"level":"warn","msg":"Fail to process task","wf-id":"session/u-0123456789abcdef/s3"}\n'
        '{"level":"warn","msg":"unrelated"}\n'
    )
    assert log_lines_naming(tmp_path, "tess-1") == []
    (logs / "temporal.log").write_text('{"level":"warn","wf-id":"session/tess-1/s3"}\n')
    assert len(log_lines_naming(tmp_path, "tess-1")) == 1
    assert log_lines_naming(tmp_path, "tess-1", old_ids=True) == []  # a session of before: its id, nothing else
    (logs / "temporal.log").write_text('{"level":"warn","wf-id":"session/tess-1/s3","msg":"tess-1 said okapi"}\n')
    assert len(log_lines_naming(tmp_path, "tess-1", old_ids=True)) == 1
    (logs / "api.log").write_text("request from tess-1\n")
    assert ("api.log", "request from tess-1") in log_lines_naming(tmp_path, "tess-1")


def file_hits(data_dir: Path, needles: list[str], skip: tuple[str, ...] = ()) -> list[str]:
    wanted = [n.encode() for n in needles]
    hits = []
    for path in sorted(data_dir.rglob("*")):
        rel = path.relative_to(data_dir).as_posix()
        if not path.is_file() or rel.startswith(skip):
            continue
        try:
            blob = path.read_bytes()
        except OSError:
            continue
        if any(w in blob for w in wanted):
            hits.append(rel)
    return hits


# ---- say no ------------------------------------------------------------------------------------------------------
def test_an_opted_out_user_is_served_but_never_trained_on(stack):
    user = f"olga-{uuid.uuid4().hex[:6]}"
    key = create_key(stack, user)
    r = httpx.post(f"{stack.api}/v1/me/opt-out", headers=auth(key), timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["opted_out"] is True
    converse(stack, key, "poems", "lagoon", [CORRECTION, THANKS])
    turns = wait_judged(stack, key, "poems", 2)
    assert all(t["status"] == "done" and t["response_summary"] is not None for t in turns)  # served
    for t in turns[:2]:
        result = t["judgement"]["result"]
        assert result["published"] is False and result["reason"] == "opted out of training", t["judgement"]
        assert t["judgement"]["judge"]["hint"] is None  # never shown to a judge
    assert samples_of(stack, user) == []
    # Back in: the next turns train again.
    r = httpx.delete(f"{stack.api}/v1/me/opt-out", headers=auth(key), timeout=30)
    assert r.status_code == 200 and r.json()["opted_out"] is False
    converse(stack, key, "poems-again", "lagoon", [CORRECTION, THANKS])
    wait_judged(stack, key, "poems-again", 2)
    assert len(samples_of(stack, user)) >= 1


def test_opting_out_one_key_keeps_the_other_keys_turns_training(stack):
    user = f"kim-{uuid.uuid4().hex[:6]}"
    quiet, loud = create_key(stack, user), create_key(stack, user)
    quiet_id = quiet.split("-")[1]
    out = users_cli(stack, "opt-out", "--key", quiet_id)
    assert out.returncode == 0 and "opted out" in out.stdout, out.stdout + out.stderr
    converse(stack, quiet, "by-quiet", "fjord", [CORRECTION, THANKS])
    converse(stack, loud, "by-loud", "fjord", [CORRECTION, THANKS])
    wait_judged(stack, quiet, "by-quiet", 2)
    wait_judged(stack, loud, "by-loud", 2)
    sessions = {s.provenance.session_id for s in samples_of(stack, user)}
    assert sessions == {"by-loud"}, sessions
    export = httpx.get(f"{stack.api}/v1/me/data", headers=auth(loud), timeout=60).json()
    assert {k["key_id"]: k["opted_out"] for k in export["api_keys"]}[quiet_id] is True
    assert export["opted_out"] is False


# ---- see, then be forgotten --------------------------------------------------------------------------------------
def test_export_holds_everything_and_forget_leaves_nothing(stack):
    user = f"frida-{uuid.uuid4().hex[:6]}"
    marker = f"zanzibar{uuid.uuid4().hex[:8]}"
    key = create_key(stack, user)
    bystander = create_key(stack, f"ben-{uuid.uuid4().hex[:6]}")
    converse(stack, key, "trip", marker, [CORRECTION, THANKS, CORRECTION])
    # A keyed request, and one with no session hint (linked by its history's prefix later).
    r = chat(stack, key, "trip-2", [{"role": "user", "content": f"keyed {marker}"}], **{"Idempotency-Key": "k-1"})
    assert r.status_code == 200, r.text
    first = [{"role": "user", "content": f"unhinted {marker}"}]
    r = chat(stack, key, None, first)
    assert r.status_code == 200, r.text
    reply = r.json()["choices"][0]["message"]["content"]
    r = chat(stack, key, None, first + [{"role": "assistant", "content": reply}, {"role": "user", "content": THANKS}])
    assert r.status_code == 200, r.text
    assert chat(stack, bystander, "other", [{"role": "user", "content": "hello"}]).status_code == 200
    wait_judged(stack, key, "trip", 3)

    export = httpx.get(f"{stack.api}/v1/me/data", headers=auth(key), timeout=60)
    assert export.status_code == 200, export.text
    doc = export.json()
    assert doc["user_id"] == user and doc["adapter_versions"] == []
    assert {s["session_id"] for s in doc["sessions"]} >= {"trip", "trip-2"}
    trip = [t for t in doc["turns"] if t["session_id"] == "trip"]
    assert len(trip) == 4 and all(t["request"] and t["response"] is not None for t in trip)
    assert marker in trip[0]["request"]["messages"][0]["content"]
    judged = [t for t in trip if t["judgement"]]
    assert len(judged) == 3 and any(t["judgement"]["judge"]["hint"] for t in judged)
    assert doc["samples"] and all(s["entry_id"] for s in doc["samples"])
    assert {s["sample_id"] for s in doc["samples"]} == {s.sample_id for s in samples_of(stack, user)}
    assert len(doc["api_keys"]) == 1
    records = stack.data_dir / "records"
    assert any(user in p.read_text() for p in records.rglob("*.jsonl")), "the judged turns' JSONL mirror"

    r = httpx.delete(f"{stack.api}/v1/me/data", headers=auth(key), timeout=120)
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["already_forgotten"] is False and report["api_keys"] == 1 and report["workflows"] >= 2
    assert report["samples"] >= 1 and report["record_lines"] >= 1 and report["store_keys"] > 0
    assert report["append_only_file_rewritten"] is True and report["temporal_log_truncated"] is True

    time.sleep(3)  # anything still in flight had its chance to write back
    needles = [user, marker]
    assert store_hits(stack, needles) == []
    assert samples_of(stack, user) == []
    nothing_left_on_disk(stack.data_dir, user, marker)
    # The key is gone with the user; the bystander is untouched.
    assert httpx.get(f"{stack.api}/v1/me/data", headers=auth(key), timeout=30).status_code == 401
    assert httpx.get(f"{stack.api}/v1/sessions/other/turns", headers=auth(bystander), timeout=30).status_code == 200
    # Twice is a no-op; an unknown user is told so.
    again = users_cli(stack, "forget", user, "--yes")
    assert again.returncode == 0 and "already forgotten" in again.stdout, again.stdout + again.stderr
    unknown = users_cli(stack, "export", f"nobody-{uuid.uuid4().hex[:6]}")
    assert unknown.returncode == 1 and "users: nothing is held" in unknown.stderr, unknown.stdout + unknown.stderr
    assert users_cli(stack, "forget", "nobody-at-all", "--yes").returncode == 1
    assert store_hits(stack, needles) == []


def test_forgetting_during_an_open_turn_crashes_nothing_and_nothing_comes_back(stack):
    user = f"gus-{uuid.uuid4().hex[:6]}"
    marker = f"quokka{uuid.uuid4().hex[:8]}"
    key = create_key(stack, user)
    converse(stack, key, "open", marker, [CORRECTION])
    statuses: list[int] = []

    def long_turn() -> None:
        body = {"messages": [{"role": "user", "content": f"a long story about {marker}"}], "max_tokens": 200}
        try:
            r = httpx.post(
                f"{stack.api}/v1/chat/completions",
                json=body,
                headers={**auth(key), "X-Session-Id": "open"},
                timeout=120,
            )
            statuses.append(r.status_code)
        except httpx.HTTPError:
            statuses.append(-1)

    t = threading.Thread(target=long_turn)
    t.start()
    time.sleep(0.5)
    out = users_cli(stack, "forget", user, "--yes")
    assert out.returncode == 0, out.stdout + out.stderr
    t.join(timeout=150)
    assert statuses and statuses[0] != -1 and statuses[0] < 600, statuses
    time.sleep(5)
    assert store_hits(stack, [user, marker]) == []
    nothing_left_on_disk(stack.data_dir, user, marker)
    assert httpx.get(f"{stack.api}/readyz", timeout=30).status_code == 200
    other = create_key(stack, f"after-{uuid.uuid4().hex[:6]}")
    assert chat(stack, other, "fine", [{"role": "user", "content": "still up?"}]).status_code == 200


# ---- sessions started before workflow ids were pseudonyms ----------------------------------------------------------
def start_old_form_session(stack: RunningStack, monkeypatch: pytest.MonkeyPatch, user: str, sid: str) -> str:
    """A session as the API started one before ids were pseudonyms: `session/<user id>/<session>`, `OpenclawUser`
    the user id, the user id in its summary. Returns its workflow id."""
    import asyncio

    from temporalio.common import SearchAttributePair, TypedSearchAttributes

    from contracts.session import SessionInput
    from control.sessions import legacy_session_workflow_id, session_config
    from openclaw_rl.search_attributes import SESSION_ID, USER_ID
    from openclaw_rl.settings import Pool, load_settings
    from openclaw_rl.temporal_client import connect
    from workflows.session import SessionWorkflow

    for name, value in stack.env.items():
        if name.startswith("OPENCLAW_RL_"):
            monkeypatch.setenv(name, value)
    settings = load_settings()
    wf_id = legacy_session_workflow_id(user, sid)

    async def start() -> None:
        client = await connect(settings.temporal, keyring=settings.keyring())
        await client.start_workflow(
            SessionWorkflow.run,
            SessionInput(user_id=user, session_id=sid, config=session_config(settings)),
            id=wf_id,
            task_queue=settings.temporal.task_queue(Pool.WORKFLOW),
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(USER_ID, user), SearchAttributePair(SESSION_ID, sid)]
            ),
            static_summary=f"chat session {sid} of {user}",
        )

    asyncio.run(start())
    return wf_id


def test_a_session_under_its_old_id_keeps_it_and_goes_with_its_user(stack, monkeypatch):
    """A session started under `session/<user id>/...` before the change takes its next turns there (not in a new
    workflow), is listed, exported and forgotten with the user's new sessions; then nothing names the user."""
    from contracts.chat import tenant_of
    from control.sessions import session_workflow_id

    user = f"otto-{uuid.uuid4().hex[:6]}"
    marker = f"axolotl{uuid.uuid4().hex[:8]}"
    key = create_key(stack, user)
    old = start_old_form_session(stack, monkeypatch, user, "old")
    converse(stack, key, "old", marker, [CORRECTION, THANKS])
    converse(stack, key, "new", marker, [])
    log = wait_judged(stack, key, "old", 2)
    assert len(log) == 3
    audit = httpx.get(f"{stack.api}/v1/sessions/old/turns", headers=auth(key), timeout=30).json()
    assert audit["workflow_id"] == old and audit["total"] == 3  # every turn went to the old workflow
    new = httpx.get(f"{stack.api}/v1/sessions/new/turns", headers=auth(key), timeout=30).json()
    assert new["workflow_id"] == session_workflow_id(user, "new") == f"session/{tenant_of(user)}/new"
    assert {s.sample_id.split("@")[0] for s in samples_of(stack, user)} == {old}  # sample ids follow the workflow
    # The operator sees the user's name on both: the old one's attribute is the id, the new one's a pseudonym.
    listed = {s["workflow_id"]: s["user_id"] for s in json.loads(stack.cli("sessions", "--json", "--limit", "500"))}
    assert listed[old] == listed[session_workflow_id(user, "new")] == user
    mine = json.loads(stack.cli("sessions", "--user", user, "--json"))
    assert {s["workflow_id"] for s in mine} == {old, session_workflow_id(user, "new")}

    doc = httpx.get(f"{stack.api}/v1/me/data", headers=auth(key), timeout=60).json()
    assert {s["workflow_id"] for s in doc["sessions"]} == {old, session_workflow_id(user, "new")}
    assert len([t for t in doc["turns"] if t["session_id"] == "old"]) == 3
    assert any(s["sample_id"].startswith(f"{old}@") for s in doc["samples"])

    r = httpx.delete(f"{stack.api}/v1/me/data", headers=auth(key), timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["workflows"] >= 4  # both sessions and the old one's judges
    time.sleep(3)
    assert store_hits(stack, [user, marker]) == []
    assert not redis.Redis.from_url(stack.redis).exists(f"oc:user-name:{tenant_of(user)}")
    nothing_left_on_disk(stack.data_dir, user, marker, old_ids=True)
