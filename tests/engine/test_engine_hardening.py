"""The embedded engine's HTTP surface refuses what it must: foreign checkpoints, unsafe labels, cross-site bodies,
oversized bodies and requests, and callers without the key; the policy client and `config` keep the keys."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

import httpx
import pytest

from openclaw_rl.settings import EngineSettings, Settings
from policy_client import PolicyClient, PolicyRequestError, SamplingParams
from tests.conftest import start_engine

KEY = "engine-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
BODY_LIMIT = 64 * 1024
NEW_TOKENS_CAP = 64


class Engine(NamedTuple):
    url: str
    data_dir: Path
    port: int


@pytest.fixture(scope="module")
def engine(tiny_model, tmp_path_factory) -> Engine:
    """An engine with a key and small limits (one process for the whole module: starting one takes seconds)."""
    data_dir = tmp_path_factory.mktemp("hardened")
    proc, url = start_engine(
        tiny_model,
        data_dir,
        OPENCLAW_RL_ENGINE__API_KEY=KEY,
        OPENCLAW_RL_ENGINE__MAX_REQUEST_BYTES=str(BODY_LIMIT),
        OPENCLAW_RL_ENGINE__MAX_NEW_TOKENS_CAP=str(NEW_TOKENS_CAP),
    )
    yield Engine(url, data_dir, urlsplit(url).port)
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture()
def http(engine):
    with httpx.Client(base_url=engine.url, headers=AUTH, timeout=120) as client:
        yield client


def linked_checkpoint(source: Path, target: Path) -> Path:
    """A servable checkpoint folder at `target` whose files link to `source`'s (no 46 MB copy)."""
    target.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.is_file() and not (target / f.name).exists():
            (target / f.name).symlink_to(f)
    return target


def version(http: httpx.Client) -> str:
    return http.get("/get_weight_version").json()["weight_version"]


# ---- 1. weight updates -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def outside(tiny_model, tmp_path_factory) -> Path:
    """A valid checkpoint outside the data directory and the served model's folder."""
    return linked_checkpoint(tiny_model, tmp_path_factory.mktemp("elsewhere") / "ckpt")


def escape_paths(data_dir: Path, outside: Path) -> dict[str, str]:
    link = data_dir / "checkpoints" / "escape"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(outside, target_is_directory=True)
    ups = "/".join([".."] * len(data_dir.joinpath("checkpoints").parts[1:]))
    return {
        "outside": str(outside),
        "dot-dot": f"{data_dir}/checkpoints/{ups}{outside}",
        "symlink": str(link),
    }


@pytest.mark.parametrize("kind", ["outside", "dot-dot", "symlink"])
def test_update_from_outside_the_allowed_roots_is_refused(engine, http, outside, kind):
    path = escape_paths(engine.data_dir, outside)[kind]
    before = version(http)
    r = http.post("/update_weights_from_disk", json={"model_path": path, "weight_version": "77"})
    assert r.status_code == 400, r.text
    assert r.json()["success"] is False and "outside" in r.json()["message"] and path in r.json()["message"]
    assert version(http) == before


def unresolvable_path(data_dir: Path, kind: str) -> str:
    loop = data_dir / "checkpoints" / "loop"
    loop.parent.mkdir(parents=True, exist_ok=True)
    if not loop.is_symlink():
        loop.symlink_to(loop)
    return {
        "nul byte": f"{data_dir}/checkpoints/a\x00b",
        "symlink loop": f"{loop}/x",
        "unknown user": "~no-such-user-here/ckpt",  # a 500 before: pathlib raises RuntimeError
        "empty": "",  # the engine's working directory, which the old code tried to load
    }[kind]


@pytest.mark.parametrize("kind", ["nul byte", "symlink loop", "unknown user", "empty"])
def test_update_from_an_unresolvable_path_is_refused_not_a_500(engine, http, kind):
    r = http.post("/update_weights_from_disk", json={"model_path": unresolvable_path(engine.data_dir, kind)})
    assert r.status_code == 400, r.text
    assert r.json()["success"] is False and "model_path" in r.json()["message"]


def test_unsafe_label_inside_a_checkpoint_is_refused(engine, http, tiny_model):
    ckpt = linked_checkpoint(tiny_model, engine.data_dir / "checkpoints" / "policy-5")
    (ckpt / "openclaw-rl-version.json").write_text(json.dumps({"weight_version": "../../x"}))
    before = version(http)
    r = http.post("/update_weights_from_disk", json={"model_path": str(ckpt)})
    assert r.status_code == 400 and "weight_version" in r.json()["message"], r.text
    assert version(http) == before


def test_update_from_the_checkpoints_folder_is_applied(engine, http, tiny_model):
    ckpt = linked_checkpoint(tiny_model, engine.data_dir / "checkpoints" / "policy-2")
    r = http.post("/update_weights_from_disk", json={"model_path": str(ckpt), "weight_version": "2"})
    assert r.status_code == 200 and r.json()["success"] is True, r.text
    assert version(http) == "2"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_update_body_must_be_declared_json(engine, http, tiny_model, content_type):
    """A web page can POST text/plain or form bodies cross-site without a preflight: they must not load weights."""
    ckpt = linked_checkpoint(tiny_model, engine.data_dir / "checkpoints" / "policy-3")
    before = version(http)
    headers = dict(AUTH) | ({"Content-Type": content_type} if content_type else {})
    body = json.dumps({"model_path": str(ckpt), "weight_version": "3"}).encode()
    r = httpx.post(f"{engine.url}/update_weights_from_disk", content=body, headers=headers, timeout=120)
    assert r.status_code == 415, r.text
    assert "application/json" in r.json()["error"]["message"]
    assert version(http) == before


@pytest.mark.parametrize("label", ["../../etc/passwd", "a/b", "x" * 65, "", "v 1", "v\n1", "v1\n", "caf\u00e9"])
def test_unsafe_weight_version_is_refused(engine, http, tiny_model, label):
    ckpt = linked_checkpoint(tiny_model, engine.data_dir / "checkpoints" / "policy-4")
    before = version(http)
    r = http.post("/update_weights_from_disk", json={"model_path": str(ckpt), "weight_version": label})
    assert r.status_code == 400, r.text
    assert "weight_version" in r.json()["error"]["message"]
    assert version(http) == before


# ---- 2. generation limits ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("top", [-1, 21, 10**6, [1, -3]])
def test_out_of_range_top_logprobs_num_is_a_400(http, top):
    text = ["a b", "c d"] if isinstance(top, list) else "a b"
    body = {"text": text, "sampling_params": {"max_new_tokens": 2}, "return_logprob": True, "top_logprobs_num": top}
    r = http.post("/generate", json=body)
    assert r.status_code == 400, r.text
    assert "top_logprobs_num" in r.json()["error"]["message"]


def test_top_logprobs_num_at_the_cap_is_served(http):
    body = {"text": "a b", "sampling_params": {"max_new_tokens": 1}, "return_logprob": True, "top_logprobs_num": 20}
    r = http.post("/generate", json=body)
    assert r.status_code == 200, r.text
    assert len(r.json()["meta_info"]["output_top_logprobs"][0]) == 20


@pytest.mark.parametrize("n, status", [(NEW_TOKENS_CAP + 1, 400), (10**9, 400), (-1, 400), (NEW_TOKENS_CAP, 200)])
def test_max_new_tokens_is_capped_by_settings(http, n, status):
    r = http.post("/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": n, "ignore_eos": True}})
    assert r.status_code == status, r.text
    if status == 400:
        assert "max_new_tokens" in r.json()["error"]["message"]
    if n > NEW_TOKENS_CAP:
        assert f"cap of {NEW_TOKENS_CAP}" in r.json()["error"]["message"]


# ---- 3. body size ------------------------------------------------------------------------------------------------


def read_answer(sock: socket.socket) -> str:
    """One HTTP answer with its whole body (it may arrive in several packets)."""
    data = b""
    while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < _content_length(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace")


def _content_length(data: bytes) -> int:
    for line in data.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def test_declared_oversized_body_is_refused_before_it_is_read(engine):
    """Content-Length over the limit: 413 at once, while the client has sent almost nothing of it."""
    head = (
        f"POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {10**9}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", engine.port), timeout=10) as sock:
        sock.sendall(head.encode() + b'{"text": "')
        answer = read_answer(sock)
    assert answer.startswith("HTTP/1.1 413"), answer
    assert "limit" in answer


def test_chunked_oversized_body_is_refused(engine):
    def chunks():
        yield b'{"text": "'
        for _ in range(BODY_LIMIT // 1024 + 8):
            yield b"a" * 1024
        yield b'"}'

    headers = AUTH | {"Content-Type": "application/json"}
    r = httpx.post(f"{engine.url}/generate", content=chunks(), headers=headers, timeout=60)
    assert r.status_code == 413, r.text
    assert str(BODY_LIMIT) in r.json()["error"]["message"]


def test_body_under_the_limit_is_served(http):
    padded = json.dumps({"text": "hi", "sampling_params": {"max_new_tokens": 1}}) + " " * (BODY_LIMIT - 1024)
    r = http.post("/generate", content=padded, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text


def test_default_body_limit_is_16_mib():
    assert EngineSettings().max_request_bytes == 16 * 1024 * 1024


# ---- 4. bearer key -----------------------------------------------------------------------------------------------

ROUTES = [
    ("POST", "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 1}}),
    ("POST", "/update_weights_from_disk", {"model_path": "/nowhere"}),
    ("GET", "/get_model_info", None),
    ("GET", "/get_server_info", None),
    ("GET", "/get_weight_version", None),
    ("GET", "/health_generate", None),
    ("POST", "/flush_cache", None),
]


@pytest.mark.parametrize("method, path, body", ROUTES)
@pytest.mark.parametrize("auth", [None, "Bearer wrong-key", f"Basic {KEY}", f"Bearer {KEY}x", "Bearer"])
def test_requests_without_the_key_get_401(engine, method, path, body, auth):
    headers = {"Authorization": auth} if auth else {}
    r = httpx.request(method, f"{engine.url}{path}", json=body, headers=headers, timeout=60)
    assert r.status_code == 401, r.text
    assert r.headers.get("www-authenticate") == "Bearer"
    assert "key" in r.json()["error"]["message"]


def test_health_needs_no_key_and_the_key_opens_the_rest(engine, http):
    assert httpx.get(f"{engine.url}/health", timeout=10).status_code == 200
    assert http.get("/get_model_info").status_code == 200
    lower = {"Authorization": f"bearer {KEY}"}  # the scheme is case-insensitive (RFC 9110)
    assert httpx.get(f"{engine.url}/get_weight_version", headers=lower, timeout=10).status_code == 200


@pytest.fixture()
def settings(monkeypatch, tmp_path):
    """Settings from the given sections only: no environment variable or config file of the machine running tests."""
    for key in list(os.environ):
        if key.startswith("OPENCLAW_RL_") or key in ("TEMPORAL_ADDRESS", "REDIS_URL"):
            monkeypatch.delenv(key)
    return lambda **sections: Settings(data_dir=tmp_path, **sections)


async def test_policy_client_from_settings_uses_the_embedded_engines_key(engine, settings):
    cfg = settings(engine={"port": engine.port, "api_key": KEY}, policy={"api_key": "not-this"})
    async with PolicyClient.from_settings(cfg) as client:
        gen = await client.generate([9707, 1879], SamplingParams(max_new_tokens=2))
        assert len(gen.output_ids) == 2
        assert (await client.model_info()).weight_version


async def test_policy_client_from_settings_uses_the_policy_key_for_external_servers(engine, settings):
    cfg = settings(engine={"api_key": "not-this"}, policy={"server_urls": [engine.url], "api_key": KEY})
    async with PolicyClient.from_settings(cfg) as client:
        assert len((await client.generate([9707], SamplingParams(max_new_tokens=1))).output_ids) == 1


async def test_policy_client_without_the_key_is_refused_at_once(engine):
    async with PolicyClient([engine.url], max_attempts=3, backoff_s=0.0) as client:
        with pytest.raises(PolicyRequestError) as err:
            await client.generate([9707], SamplingParams(max_new_tokens=1))
    assert err.value.status == 401


SGLANG = json.loads((Path(__file__).parents[1] / "fixtures" / "sglang_generate_response.json").read_text())


def sglang_answer(request: httpx.Request) -> httpx.Response:
    """What an SGLang server answers on each route the client uses (the recorded /generate answer)."""
    path, body = request.url.path, request.content
    if path == "/generate" and b'"stream"' in body:
        return httpx.Response(200, text=f"data: {json.dumps(SGLANG)}\n\ndata: [DONE]\n\n")
    if path == "/generate" and b"logprob_start_len" in body:
        meta = SGLANG["meta_info"] | {"input_token_logprobs": [[-0.5, 3, None], [-0.25, 4, None]]}
        return httpx.Response(200, json=SGLANG | {"meta_info": meta})
    if path == "/generate":
        return httpx.Response(200, json=SGLANG)
    if path == "/update_weights_from_disk":
        return httpx.Response(200, json={"success": True, "message": "ok"})
    if path == "/get_model_info":
        return httpx.Response(200, json={"model_path": "/m"})
    return httpx.Response(200, text="")


async def test_policy_client_sends_the_key_on_every_call():
    seen: dict[str, str | None] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        streamed = " stream" if b'"stream"' in request.content else ""
        seen[request.url.path + streamed] = request.headers.get("authorization")
        return sglang_answer(request)

    client = PolicyClient(["http://sglang:30000"], api_key="s3cret", transport=httpx.MockTransport(handler))
    async with client:
        await client.generate([1, 2], SamplingParams())
        _ = [s async for s in client.generate_stream([1, 2], SamplingParams())]
        await client.score([1, 2, 3, 4], start=2)
        await client.update_weights_from_disk("/ckpt", "1")
        await client.model_info()
        await client.health()
        await client.flush_cache()
    assert set(seen) == {
        "/generate",
        "/generate stream",
        "/update_weights_from_disk",
        "/get_model_info",
        "/health",
        "/flush_cache",
    }
    assert set(seen.values()) == {"Bearer s3cret"}


async def test_policy_client_without_a_key_sends_no_authorization_header():
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, text="")

    async with PolicyClient(["http://sglang:30000"], transport=httpx.MockTransport(handler)) as client:
        await client.flush_cache()
    assert seen == [None]


# ---- settings: defaults and masking ------------------------------------------------------------------------------


def test_engine_settings_defaults(settings, tmp_path):
    s = settings()
    assert s.engine.api_key.get_secret_value() == "" and s.policy.api_key.get_secret_value() == ""
    assert s.engine.max_new_tokens_cap == 8192 and s.engine.weight_roots is None
    served = tmp_path / "models" / "served"
    assert s.engine_weight_roots(served) == [tmp_path, tmp_path / "checkpoints", served]
    custom = settings(engine={"weight_roots": [str(tmp_path / "only")]})
    assert custom.engine_weight_roots(served) == [tmp_path / "only"]


def test_masked_hides_keys_and_credentials_in_urls(settings):
    s = settings(
        api_key_pepper="pepper-secret",
        engine={"api_key": "engine-secret"},
        policy={
            "api_key": "policy-secret",
            "server_urls": ["http://alice:pw-one@gpu1:30000", "https://gpu2:30000/?token=tok-two&x=1"],
        },
        redis={"url": "redis://:pw-three@cache:6379/0"},
        temporal={"address": "bob:pw-four@temporal:7233"},
        learning={
            "teacher_url": "http://carol:pw-five@teacher:30000",
            "judge": {"type": "llm", "url": "http://judge:30000", "api_key": "judge-secret"},
        },
    )
    data = s.masked()
    text = json.dumps(data)
    for secret in ("pepper-secret", "engine-secret", "policy-secret", "pw-", "tok-two", "judge-secret"):
        assert secret not in text, secret
    assert data["engine"]["api_key"] == data["policy"]["api_key"] == "**********"
    # URLs are masked as the start-up banner masks them (openclaw_rl.masking): the user name stays, the password goes
    assert data["policy"]["server_urls"] == [
        "http://alice:****@gpu1:30000",
        "https://gpu2:30000/?token=****&x=1",
    ]
    assert data["redis"]["url"] == "redis://:****@cache:6379/0"
    assert data["temporal"]["address"] == "bob:****@temporal:7233"
    assert data["learning"]["teacher"]["url"] == "http://carol:****@teacher:30000"
    assert data["learning"]["judge"]["url"] == "http://judge:30000"  # nothing to hide: unchanged
    empty = settings().masked()
    assert empty["engine"]["api_key"] == "" and empty["redis"]["url"] is None
