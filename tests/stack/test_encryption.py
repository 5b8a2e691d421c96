"""Conversation data encrypted at rest: the keyring itself, the banner, and a real stack whose Temporal histories,
store values and data directory (records, logs, curves, checkpoints) hold only ciphertext of what a user said,
readable through the API's codec server with the key."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import openai
import pytest
import redis
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.client import Client

from activities.curves import wandb_runs
from openclaw_rl.encryption import ENCODING, DecryptError, Keyring, KeyringError
from openclaw_rl.settings import Settings
from store.client import Store, StoreAddress
from store.samples import PersonalTurn, TrainingSample
from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import CLI, REPO, RunningStack

KEY_A = base64.b64encode(bytes(range(32))).decode()
KEY_B = base64.b64encode(bytes(range(32, 64))).decode()
SECRET_PHRASE = "my-secret-pet-is-a-marmoset-named-Ximena"
KEYS = f"k2:{KEY_B},k1:{KEY_A}"
CODEC_TOKEN = Keyring.parse(KEYS).derive("codec-token")
"""What the API and `up` derive from the first key (api.codec_token is left empty)."""
CODEC_AUTH = {"Authorization": f"Bearer {CODEC_TOKEN}"}
EPISODE_WORDS = "Zanzibar-Okonkwo-Fennimore"
"""In a client-driven episode's messages."""
HINT_WORDS = "Quetzalcoatlus-Brimblewick"
"""In the user's correction: the heuristic judge's hint is the user's own sentence, so these words reach the
judgement, its records and the teacher's prompt."""


def test_a_sealed_blob_opens_with_its_key_and_context_only():
    ring = Keyring.parse(f"a:{KEY_A}")
    blob = ring.seal(b"hello", context=b"oc:request:t1")
    assert b"hello" not in blob and ring.open(blob, context=b"oc:request:t1") == b"hello"
    with pytest.raises(DecryptError, match="authenticate"):
        ring.open(blob, context=b"oc:request:t2")  # copied under another key: refused
    tampered = blob[:-1] + bytes([blob[-1] ^ 1])
    with pytest.raises(DecryptError, match="authenticate"):
        ring.open(tampered, context=b"oc:request:t1")


def test_rotation_new_key_first_old_blobs_still_open_and_a_dropped_key_is_named():
    old = Keyring.parse(f"a:{KEY_A}")
    blob = old.seal(b"written under a")
    rotated = Keyring.parse(f"b:{KEY_B},a:{KEY_A}")
    assert rotated.current == "b" and rotated.open(blob) == b"written under a"
    assert rotated.open(rotated.seal(b"new")) == b"new"
    with pytest.raises(DecryptError, match="'b'"):
        old.open(rotated.seal(b"new"))


@pytest.mark.parametrize(
    "value, reason",
    [("a:notbase64!", "base64"), (f"a:{base64.b64encode(b'short').decode()}", "32"), (f"a:{KEY_A},a:{KEY_B}", "twice")],
)
def test_a_bad_keys_setting_is_refused_naming_why_never_echoing_the_key(value, reason, tmp_path):
    with pytest.raises(KeyringError, match=reason):
        Keyring.parse(value)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_RL_")}
    env |= {"OPENCLAW_RL_DATA_DIR": str(tmp_path), "OPENCLAW_RL_ENCRYPTION_KEYS": value}
    res = subprocess.run(CLI + ["encryption", "status"], env=env, capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 1 and "encryption_keys" in res.stderr and reason in res.stderr
    assert value.split(":", 1)[1].split(",")[0] not in res.stderr


def test_the_banner_says_whether_conversations_are_encrypted(tmp_path, capsys, monkeypatch):
    from tests.stack.test_secrets_and_data import banner_and_state

    for name in list(os.environ):
        if name.startswith("OPENCLAW_RL_"):
            monkeypatch.delenv(name)
    off, _ = banner_and_state(Settings(data_dir=tmp_path / "off"), capsys)
    assert "encryption" in off and "OFF" in off and "OPENCLAW_RL_ENCRYPTION_KEYS" in off
    on, state = banner_and_state(Settings(data_dir=tmp_path / "on", encryption_keys=f"k1:{KEY_A}"), capsys)
    assert "AES-256-GCM" in on and "'k1'" in on
    assert KEY_A not in on and KEY_A not in state


@pytest.fixture(scope="module")
def encrypted_stack(tiny_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("enc")
    home = root / "wandb-home"
    env = chat_stack_env(
        root / "data",
        tiny_model,
        OPENCLAW_RL_ENCRYPTION_KEYS=KEYS,
        # Trained too (started by the test, once the sample was read): the step's records, curves and checkpoint,
        # its side files included, are scanned with the rest.
        OPENCLAW_RL_TRAINING__BATCH_SIZE="1",
        OPENCLAW_RL_TRAINING__SOURCE_WEIGHTS='{"personal": 1.0, "client": 1.0}',  # the episode's steps train too
        OPENCLAW_RL_TRAINING__WAIT_S="1",
        OPENCLAW_RL_TRAINING__CHECKPOINT__EVERY_VERSIONS="1",
        OPENCLAW_RL_CURVES__WANDB__ENABLED="true",  # W&B's offline runs are scanned too
        WANDB_SILENT="true",
        **{f"WANDB_{v}_DIR": str(home / v.lower()) for v in ("CONFIG", "CACHE", "DATA")},  # W&B's own, not ours
    )
    stack = RunningStack(env).start()
    yield stack
    stack.stop()


async def _histories(address: str) -> list:
    """Every workflow's history events, read with a client that has no key (what the server holds)."""
    client = await Client.connect(address)
    events = []
    async for wf in client.list_workflows():
        history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        events += list(history.events)
    return events


def _is_patch_marker(event) -> bool:
    return event.HasField("marker_recorded_event_attributes") and (
        event.marker_recorded_event_attributes.marker_name == "core_patch"
    )


def _payloads(message, out: list) -> list:
    """Every Payload anywhere inside a protobuf message."""
    from google.protobuf.message import Message
    from temporalio.api.common.v1 import Payload

    if isinstance(message, Payload):
        out.append(message)
        return out
    for field, value in message.ListFields():
        if field.message_type is None or field.name == "search_attributes":  # indexed by the server: never encoded
            continue
        if isinstance(value, Message):
            _payloads(value, out)
            continue
        for item in value.values() if hasattr(value, "values") else value:  # a map's values, or a repeated field
            if isinstance(item, Message):
                _payloads(item, out)
    return out


@pytest.mark.timeout(600)
def test_histories_store_and_data_directory_hold_no_user_words_after_a_judged_trained_turn(encrypted_stack):
    key = create_key(encrypted_stack, "enc-user")
    chat = openai.OpenAI(base_url=f"{encrypted_stack.api}/v1", api_key=key, max_retries=0, timeout=120)
    # A session: the first turn streamed (its tokens relayed through a token stream), then a next state that gets
    # it judged into a sample.
    said = [{"role": "user", "content": f"Remember this: {SECRET_PHRASE}"}]
    session = {"X-Session-Id": "enc-session"}
    parts = chat.chat.completions.create(
        model="policy", messages=said, max_tokens=8, stream=True, extra_headers=session
    )
    answer = "".join(c.choices[0].delta.content or "" for c in parts if c.choices)
    correction = f"That's wrong, you should write it in French instead and name {HINT_WORDS}."
    said += [{"role": "assistant", "content": answer}, {"role": "user", "content": correction}]
    reply = chat.chat.completions.create(model="policy", messages=said, max_tokens=8, extra_headers=session)
    assert reply.choices[0].message is not None  # served as usual
    first = _wait_judged(encrypted_stack, key, "enc-session")
    assert HINT_WORDS in json.dumps(first["judgement"]), first["judgement"]  # the hint holds the user's words

    events = asyncio.run(_histories(encrypted_stack.temporal))
    # A workflow.patched() marker (a session's later turn hits one) holds the patch id, which the SDK's core writes
    # past the codec: nothing of the user's.
    markers = [p for e in events if _is_patch_marker(e) for p in _payloads(e, [])]
    assert all(SECRET_PHRASE.encode() not in p.data for p in markers)
    payloads = [p for e in events if not _is_patch_marker(e) for p in _payloads(e, [])]
    assert payloads, "the histories carry payloads"
    plain = [p for p in payloads if p.metadata.get("encoding") != ENCODING]
    assert not plain, plain[:3]
    assert all(SECRET_PHRASE.encode() not in p.data for p in payloads)
    assert {p.metadata["encryption-key-id"] for p in payloads} == {b"k2"}  # the first key encrypts
    db = encrypted_stack.data_dir / "temporal"
    for f in db.iterdir():  # nor is it anywhere in the server's files
        assert SECRET_PHRASE.encode() not in f.read_bytes(), f

    body = json_format.MessageToJson(Payloads(payloads=payloads))
    r = httpx.post(f"{encrypted_stack.api}/codec/decode", content=body, headers=CODEC_AUTH, timeout=30)
    assert r.status_code == 200, r.text
    decoded = json_format.Parse(r.text, Payloads()).payloads
    assert len(decoded) == len(payloads)
    assert any(SECRET_PHRASE.encode() in p.data for p in decoded)
    assert all(p.metadata.get("encoding") != ENCODING for p in decoded)

    # The store seals the user's content too: the request as sent, the answer's text and token ids, the token
    # stream, the judgement and its record, the sample. The trainer's reader opens the sample (with the keys).
    entry_id, sample = asyncio.run(_sample_of(encrypted_stack, first["turn_id"]))
    assert sample.prompt_ids and sample.response_ids
    needles = [SECRET_PHRASE.encode(), HINT_WORDS.encode(), EPISODE_WORDS.encode()]
    needles += [_packed(sample.prompt_ids), _packed(sample.response_ids)]
    needles += [
        ", ".join(map(str, sample.response_ids[i : i + 2])).encode() for i in range(len(sample.response_ids) - 1)
    ]
    if len(answer) >= 8:
        needles.append(answer.encode())
    r = redis.Redis.from_url(encrypted_stack.redis)
    assert set(r.xrange("oc:samples:personal", entry_id, entry_id)[0][1]) == {b"id", b"sealed"}
    stream_entries = [f for k in r.scan_iter(match="oc:stream:*", _type="stream") for _, f in r.xrange(k)]
    assert stream_entries and all(set(f) == {b"a", b"sealed", b"done"} for f in stream_entries)
    assert _redis_holding(r, needles) == []
    request_keys = list(r.scan_iter(match="oc:request:*"))
    assert request_keys and all(r.get(k).startswith(b"ocx1") for k in request_keys)

    # The audit trail still reads (every process has the keyring).
    res = subprocess.run(CLI + ["sessions"], env=encrypted_stack.env, capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0, res.stderr
    # The user's export opens what was sealed: their request, the judgement, the sample.
    export = httpx.get(f"{encrypted_stack.api}/v1/me/data", headers={"Authorization": f"Bearer {key}"}, timeout=60)
    assert export.status_code == 200, export.text
    doc = export.json()
    turn = next(t for t in doc["turns"] if t["turn_id"] == first["turn_id"])
    assert SECRET_PHRASE in turn["request"]["messages"][0]["content"] and turn["judgement"]
    assert sample.sample_id in {s["sample_id"] for s in doc["samples"]}

    # Trained into a durable checkpoint: nothing of the user in the clear anywhere in the data directory (records,
    # logs, curves, checkpoints and their side files, the store's append-only file, Temporal's database) nor in any
    # Redis value. Token ids are looked for packed and as text (runs of three, as JSON or a Python list prints them).
    # A client-driven episode's words (its model calls' messages, its step samples) are trained and scanned too.
    _free_form_episode(encrypted_stack, key)
    waiting = sum(r.xlen(k) for k in r.scan_iter(match="oc:samples:*", _type="stream"))
    assert waiting >= 2, "the turn's sample and the episode's step samples wait for training"
    encrypted_stack.cli("train", "start")
    _wait_trained(encrypted_stack, samples=waiting)
    as_text = [
        sep.join(map(str, ids[i : i + 3])).encode()
        for ids in (sample.prompt_ids, sample.response_ids)
        for i in range(len(ids) - 2)
        for sep in (", ", ",")
    ]
    assert _redis_holding(r, needles + as_text) == []
    assert _files_holding(encrypted_stack.data_dir, needles + as_text) == []
    assert wandb_runs(encrypted_stack.data_dir), "a W&B offline run was written (and scanned)"
    assert list((encrypted_stack.data_dir / "tensorboard").rglob("events.out.tfevents.*")), "curves were written"
    judged_lines = list((encrypted_stack.data_dir / "records").glob("policy-*/personal.jsonl"))
    assert judged_lines, "the judged turn's line was written (sealed)"
    # The operator's readers open what was sealed: the turn log, the judged-turn lines.
    res = subprocess.run(
        CLI + ["turns", "enc-session", "--user", "enc-user", "--json"],
        env=encrypted_stack.env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert res.returncode == 0 and SECRET_PHRASE in res.stdout, res.stdout + res.stderr
    from activities.judgement_log import read_judgements

    opened = read_judgements(judged_lines[0], Keyring.parse(KEYS))
    assert any(rec.turn_id == first["turn_id"] and rec.judge.hint and HINT_WORDS in rec.judge.hint for rec in opened)
    # A forget still finds the user's sealed lines (by their user_id, left readable) and drops them.
    forget = subprocess.run(
        CLI + ["users", "forget", "enc-user", "--yes"],
        env=encrypted_stack.env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert forget.returncode == 0, forget.stdout + forget.stderr
    assert (
        read_judgements(judged_lines[0], Keyring.parse(KEYS)) == [] and b"enc-user" not in judged_lines[0].read_bytes()
    )


def _sealed_payloads(stack: RunningStack, text: bytes) -> str:
    """A payload holding `text`, encoded through the codec server (the accepted path), as protobuf JSON."""
    plain = Payloads(payloads=[Payload(metadata={"encoding": b"json/plain"}, data=text)])
    r = httpx.post(f"{stack.api}/codec/{CODEC_TOKEN}/encode", content=json_format.MessageToJson(plain), timeout=30)
    assert r.status_code == 200, r.text
    assert text not in base64.b64decode(r.json()["payloads"][0]["data"])
    return r.text


@pytest.mark.timeout(300)
def test_the_codec_server_answers_its_token_on_its_own_host_names_and_origins_only(encrypted_stack):
    sealed = _sealed_payloads(encrypted_stack, SECRET_PHRASE.encode())
    decode = f"{encrypted_stack.api}/codec/decode"

    def post(url: str = decode, body: bytes | str = sealed, **headers: str) -> httpx.Response:
        return httpx.post(url, content=body, headers=headers, timeout=30)

    def refused(r: httpx.Response, status: int, words: str) -> None:
        assert r.status_code == status, (status, r.status_code, r.text)
        assert words in r.json()["error"]["message"], r.text
        assert SECRET_PHRASE not in r.text

    # Accepted: the token as a bearer header (the Temporal CLI's --codec-auth) or in the path (the Web UI's).
    for r in (post(**CODEC_AUTH), post(f"{encrypted_stack.api}/codec/{CODEC_TOKEN}/decode")):
        assert r.status_code == 200, r.text
        assert base64.b64decode(r.json()["payloads"][0]["data"]) == SECRET_PHRASE.encode()
    refused(post(), 401, "token")
    refused(post(Authorization="Basic Zm9vOmJhcg=="), 401, "token")
    refused(post(Authorization="Bearer not-the-token"), 403, "wrong codec token")
    refused(post(f"{encrypted_stack.api}/codec/{'0' * 64}/decode"), 403, "wrong codec token")
    # DNS rebinding: a foreign name that resolves to this machine is refused, even from it and with the token.
    refused(post(**CODEC_AUTH, Host="attacker.example:8000"), 403, "attacker.example")
    refused(post(**CODEC_AUTH, Host="127.0.0.1.nip.io"), 403, "host name")
    assert post(**CODEC_AUTH, Host="localhost:1").status_code == 200  # the allowed names, whatever the port
    # Another page in the operator's browser: its Origin is refused (CORS alone would only hide the answer).
    ui = f"http://127.0.0.1:{encrypted_stack.env['OPENCLAW_RL_TEMPORAL__UI_PORT']}"
    refused(post(**CODEC_AUTH, Origin="http://attacker.example"), 403, "attacker.example")
    refused(post(**CODEC_AUTH, Origin="null"), 403, "null")
    ok = post(**CODEC_AUTH, Origin=ui)
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == ui, ok.headers
    # Malformed bodies: a 4xx with a reason, never a 500 nor a 200.
    cut_short = sealed[: len(sealed) // 2].encode()
    for body, status, words in (
        (b"{not json", 400, "not valid JSON"),
        (cut_short, 400, "not valid JSON"),
        (b"\xff\xfe\x00", 400, "not valid JSON"),
        (b"", 400, "not valid JSON"),
        (b"[]", 422, "JSON object"),
        (b'[{"payloads": []}]', 422, "JSON object"),
        (b"{}", 400, "payloads"),
        (b'{"payloads": "x"}', 400, "payloads"),
        (b'{"payloads": [1]}', 400, "payloads.0"),
        (b'{"payloads": [{"data": "!!! not base64"}]}', 400, "base64"),
        (b'{"payloads": [{"metadata": {"encoding": 7}}]}', 400, "base64"),
        (b'{"payloads": [], "extra": 1}', 400, "extra"),
        (b'{"payloads": [{"metadata": {"encoding": "YmluYXJ5L2VuY3J5cHRlZA=="}, "data": "AAAA"}]}', 422, "decrypt"),
    ):
        refused(post(body=body, **CODEC_AUTH), status, words)
    # What `up` gives the embedded Web UI (the Temporal server's --ui-codec-endpoint) answers the UI's origin,
    # its CORS preflight included, and nothing in that endpoint is a key.
    argv = Path(f"/proc/{encrypted_stack.service_pid('temporal')}/cmdline").read_bytes().split(b"\0")
    endpoint = argv[argv.index(b"--ui-codec-endpoint") + 1].decode()
    assert endpoint.endswith(f"/codec/{CODEC_TOKEN}") and KEY_A not in endpoint and KEY_B not in endpoint
    preflight = httpx.options(
        f"{endpoint}/decode",
        headers={
            "Origin": ui,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-namespace",
        },
        timeout=30,
    )
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == ui
    from_ui = post(f"{endpoint}/decode", Origin=ui, **{"Content-Type": "application/json", "X-Namespace": "default"})
    assert from_ui.status_code == 200 and SECRET_PHRASE.encode() in base64.b64decode(
        from_ui.json()["payloads"][0]["data"]
    )
    # The token is a secret: no file of the data directory (the services' logs, the API's) holds it.
    assert _files_holding(encrypted_stack.data_dir, [CODEC_TOKEN.encode()]) == []


def test_the_codec_server_answers_no_peer_but_this_machine(tmp_path):
    """A peer elsewhere (a port forwarded to the API) is refused before anything else is looked at."""
    from api.app import create_app

    settings = Settings(data_dir=tmp_path, encryption_keys=KEYS)
    app = create_app(settings)
    app.state.settings = settings  # the codec needs nothing the lifespan opens

    async def go(peer: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=(peer, 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            return await client.post("/codec/decode", content=b'{"payloads": []}', headers=CODEC_AUTH)

    far = asyncio.run(go("203.0.113.7"))
    assert far.status_code == 403 and "only on this machine" in far.json()["error"]["message"], far.text
    assert asyncio.run(go("127.0.0.1")).status_code == 200  # the same request from this machine


def _redis_holding(r, needles: list[bytes]) -> list[bytes]:
    """Keys with a value (of any type, hash field names and set members too) holding one of `needles`."""
    holding = []
    for name in r.scan_iter(count=1000):
        kind = r.type(name)
        if kind == b"string":
            values = [r.get(name)]
        elif kind == b"hash":
            values = [b for kv in r.hgetall(name).items() for b in kv]
        elif kind == b"stream":
            values = [b for _, fields in r.xrange(name) for kv in fields.items() for b in kv]
        elif kind == b"set":
            values = list(r.smembers(name))
        elif kind == b"list":
            values = r.lrange(name, 0, -1)
        elif kind == b"zset":
            values = r.zrange(name, 0, -1)
        else:
            values = []
        if any(n in (v or b"") for v in values for n in needles):
            holding.append(name)
    return holding


def _files_holding(data_dir, needles: list[bytes]) -> list[str]:
    """Every file under the data directory holding one of `needles`, with which (its first 40 bytes)."""
    hits = []
    for path in sorted(data_dir.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            blob = path.read_bytes()
        except OSError:
            continue
        found = [n[:40] for n in needles if n in blob]
        if found:
            hits.append(f"{path.relative_to(data_dir)}: {found[:3]}")
    return hits


def _free_form_episode(stack: RunningStack, key: str) -> None:
    """A free-form client episode of two model calls (the second's user message is the first step's next state),
    ended with an outcome: its steps become samples."""
    headers = {"Authorization": f"Bearer {key}"}
    opened = httpx.post(f"{stack.api}/v1/episodes", json={"samples": 1}, headers=headers, timeout=60)
    assert opened.status_code == 200, opened.text
    url = opened.json()["episodes"][0]["base_url"]
    messages = [{"role": "user", "content": f"plan a trip with {EPISODE_WORDS}"}]
    for nxt in (f"cheaper please, {EPISODE_WORDS}", None):
        r = httpx.post(
            f"{url}/chat/completions", json={"messages": messages, "max_tokens": 6}, headers=headers, timeout=120
        )
        assert r.status_code == 200, r.text
        if nxt is not None:
            messages += [r.json()["choices"][0]["message"], {"role": "user", "content": nxt}]
    done = httpx.post(f"{url}/outcome", json={"outcome": 0.75}, headers=headers, timeout=60)
    assert done.status_code == 200, done.text
    deadline = time.monotonic() + 120
    while not any(True for _ in redis.Redis.from_url(stack.redis).scan_iter(match="oc:samples:client", _type="stream")):
        assert time.monotonic() < deadline, "the episode's steps were not published within 120 s"
        time.sleep(0.5)


def _wait_trained(stack: RunningStack, samples: int = 1, timeout: float = 300.0) -> dict:
    """Training's status once `samples` were trained into a durable checkpoint."""
    deadline = time.monotonic() + timeout
    while True:
        status = json.loads(stack.cli("train", "status", "--json"))
        if status["samples_trained"] >= samples and status["durable_version"] is not None:
            return status
        assert time.monotonic() < deadline, f"nothing trained into a durable checkpoint within {timeout}s: {status}"
        time.sleep(1)


def _wait_judged(stack: RunningStack, key: str, sid: str, timeout: float = 180.0) -> dict:
    """The session's first turn once judged (the judge reads the sealed answer and request)."""
    deadline = time.monotonic() + timeout
    while True:
        turns = httpx.get(
            f"{stack.api}/v1/sessions/{sid}/turns", headers={"Authorization": f"Bearer {key}"}, timeout=30
        ).json()["turns"]
        if turns and turns[0].get("judgement"):
            return turns[0]
        assert time.monotonic() < deadline, f"the first turn was not judged within {timeout}s: {turns}"
        time.sleep(0.5)


async def _sample_of(stack: RunningStack, turn_id: str) -> tuple[str, TrainingSample]:
    """The turn's sample as the train step reads it (`SampleStreams.load`, by entry id), with the stack's keys."""
    async with Store.connect(StoreAddress(stack.redis, 3600), keyring=Keyring.parse(KEYS)) as st:
        for entry_id, _ in await st.samples.entries("personal"):
            s = await st.samples.load("personal", entry_id)
            if isinstance(s.provenance, PersonalTurn) and s.provenance.turn_id == turn_id:
                return entry_id, s
    raise AssertionError(f"turn {turn_id} has no sample")


def _packed(ids: list[int]) -> bytes:
    return b"".join(i.to_bytes(4, "little", signed=True) for i in ids)
