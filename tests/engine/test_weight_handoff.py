"""Weights handed to a real engine from memory (/update_weights_from_tensor, shared-memory buckets packed on the
CPU), updates that name the version already served, and memory released and resumed around a train step.

Every test that changes weights or releases memory starts its own engine on the tiny model. CUDA IPC buckets are
not tested here: this machine has no GPU (only their refusal by a CPU engine is)."""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest
import torch

from policy_client.weight_handoff import SHM_DIR, SHM_PREFIX, Packed, UpdateWeightsFromTensorRequest, pack
from policy_client.weight_sync import WeightSyncClient, WeightSyncError
from tests.conftest import start_engine

PROMPT = [9707, 1879, 11, 1246, 525, 498, 30] * 6
"""42 token ids: two whole blocks of the prefix cache (16 tokens each)."""
TOLERANCE = 1e-4
"""Engine log-probs against transformers' on the same float32 weights: both compute in float32, along different
kernels (oneDNN packed linears, the engine's attention): measured differences are ~1e-6."""


def score(ids: list[int] = PROMPT) -> dict:
    return {"input_ids": ids, "sampling_params": {"max_new_tokens": 0}, "return_logprob": True, "logprob_start_len": 1}


async def logprobs(http: httpx.AsyncClient) -> list[float]:
    r = await http.post("/generate", json=score())
    assert r.status_code == 200, r.text
    return [e[0] for e in r.json()["meta_info"]["input_token_logprobs"] if e[0] is not None]


def reference_logprobs(model: torch.nn.Module, ids: list[int] = PROMPT) -> list[float]:
    """Log-probs of ids[1:] under `model` (transformers' own forward)."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    lps = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(ids[1:]).unsqueeze(1))
    return lps.squeeze(1).tolist()


def max_delta(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b) == len(PROMPT) - 1
    return max(abs(x - y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def hf_model(tiny_model):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()


def modified(hf_model, seed: int, dtype: torch.dtype = torch.float32) -> list[tuple[str, torch.Tensor]]:
    """Every parameter of the tiny model nudged (tied weights once, as named_parameters gives them), in `dtype`."""
    gen = torch.Generator().manual_seed(seed)
    return [
        (name, (p.detach() + torch.randn(p.shape, generator=gen) * 0.05).to(dtype))
        for name, p in hf_model.named_parameters()
    ]


def with_weights(hf_model, named: list[tuple[str, torch.Tensor]]) -> torch.nn.Module:
    """A copy of the tiny model holding `named` (cast to float32)."""
    import copy

    model = copy.deepcopy(hf_model)
    state = model.state_dict()
    with torch.no_grad():
        for name, t in named:
            state[name].copy_(t.float())
    return model


def packed(named: list[tuple[str, torch.Tensor]], dtype: torch.dtype | None = None) -> Packed:
    """`named` in two shared-memory buckets."""
    half = len(named) // 2
    return pack([named[:half], named[half:]], dtype, torch.device("cpu"))


def handoff(p: Packed, version: str, **fields) -> dict:
    return UpdateWeightsFromTensorRequest(buckets=p.buckets, weight_version=version, **fields).model_dump()


async def server_info(http: httpx.AsyncClient) -> dict:
    return (await http.get("/get_server_info")).json()


async def updates_counted(http: httpx.AsyncClient, source: str) -> int:
    """engine_weight_updates_total{source=...} from /metrics (0 when never counted)."""
    for line in (await http.get("/metrics")).text.splitlines():
        if line.startswith(f'engine_weight_updates_total{{source="{source}"}}'):
            return int(float(line.split()[-1]))
    return 0


async def fill_prefix_cache(http: httpx.AsyncClient) -> dict:
    r = await http.post("/generate", json={"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 2}})
    assert r.status_code == 200, r.text
    cache = (await server_info(http))["prefix_cache"]
    assert cache["cached_blocks"] >= 2, cache
    return cache


@pytest.fixture()
async def own_engine(tiny_model, tmp_path):
    """An engine of this test's own (its weights or memory change)."""
    proc, url = start_engine(tiny_model, tmp_path)
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        yield http
    proc.terminate()
    proc.wait(timeout=30)


# ---- 1. the hand-off -----------------------------------------------------------------------------------------------


async def test_handed_over_weights_serve_and_the_same_version_is_not_reloaded(own_engine, hf_model):
    http = own_engine
    before = await logprobs(http)
    named = modified(hf_model, seed=7, dtype=torch.bfloat16)  # sent in bf16: the engine casts to its float32
    p = packed(named)
    try:
        r = await http.post("/update_weights_from_tensor", json=handoff(p, "h1"))
        assert r.status_code == 200 and r.json()["success"] is True, r.text
        assert "version h1" in r.json()["message"]
        assert (await http.get("/get_weight_version")).json() == {"weight_version": "h1"}
        after = await logprobs(http)
        assert max_delta(after, reference_logprobs(with_weights(hf_model, named))) < TOLERANCE
        assert max_delta(after, before) > 1e-2

        # The same version again: answered, not reloaded (the prefix cache keeps its blocks and generation).
        cache = await fill_prefix_cache(http)
        again = await http.post("/update_weights_from_tensor", json=handoff(p, "h1"))
        assert again.status_code == 200 and again.json()["success"] is True, again.text
        assert "not reloaded" in again.json()["message"]
        kept = (await server_info(http))["prefix_cache"]
        assert (kept["generation"], kept["cached_blocks"]) == (cache["generation"], cache["cached_blocks"])
        assert await updates_counted(http, "tensor") == 1

        # The same weights under another version are loaded (what the two checks above would have seen).
        other = await http.post("/update_weights_from_tensor", json=handoff(p, "h2"))
        assert other.status_code == 200 and "Succeeded" in other.json()["message"], other.text
        flushed = (await server_info(http))["prefix_cache"]
        assert flushed["generation"] == cache["generation"] + 1 and flushed["cached_blocks"] == 0
        assert await updates_counted(http, "tensor") == 2
    finally:
        p.close()
    assert not list(SHM_DIR.glob(f"{SHM_PREFIX}{os.getpid()}-*"))  # the sender's files are gone once closed


async def test_the_same_checkpoint_and_version_is_not_reloaded_another_folder_is(own_engine, tiny_model, tmp_path):
    http = own_engine  # its data directory is tmp_path, one of the folders it loads from
    cache = await fill_prefix_cache(http)
    link = tmp_path / "checkpoints" / "link"  # another path to the same folder: the same source once resolved
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(tiny_model, target_is_directory=True)
    for path in (tiny_model, link):
        r = await http.post("/update_weights_from_disk", json={"model_path": str(path), "weight_version": "0"})
        assert r.status_code == 200 and r.json()["success"] is True, r.text
        assert "not reloaded" in r.json()["message"]
    kept = (await server_info(http))["prefix_cache"]
    assert (kept["generation"], kept["cached_blocks"]) == (cache["generation"], cache["cached_blocks"])
    assert await updates_counted(http, "disk") == 0

    other = tmp_path / "checkpoints" / "copy"  # another folder under the same label: an operator's load
    other.mkdir()
    for f in tiny_model.iterdir():
        if f.is_file():
            (other / f.name).symlink_to(f)
    r = await http.post("/update_weights_from_disk", json={"model_path": str(other), "weight_version": "0"})
    assert r.status_code == 200 and "Succeeded" in r.json()["message"], r.text
    assert (await server_info(http))["prefix_cache"]["generation"] == cache["generation"] + 1
    assert await updates_counted(http, "disk") == 1


# ---- 2. refusals: nothing applied, the old weights serve on ------------------------------------------------------


@pytest.fixture(scope="module")
async def refusing_engine(tiny_model, tmp_path_factory):
    """One engine for the refusals (none may change its weights: each test checks they did not)."""
    proc, url = start_engine(tiny_model, tmp_path_factory.mktemp("refusals"))
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        yield http
    proc.terminate()
    proc.wait(timeout=30)


def _wrong_shape(named):
    return [(n, t[:-1] if n.endswith("q_proj.weight") else t) for n, t in named]


def _unknown_name(named):
    return named + [("model.layers.9.mlp.extra.weight", torch.zeros(4))]


def _missing_weight(named):
    return [(n, t) for n, t in named if not n.endswith("layers.1.mlp.down_proj.weight")]


def _wrong_dtype(named):
    return [(n, t.to(torch.int64) if n.endswith("input_layernorm.weight") else t) for n, t in named]


def _not_finite(named):
    return [(n, t.clone().fill_(float("nan")) if n.endswith("0.self_attn.k_norm.weight") else t) for n, t in named]


REFUSALS = {
    "wrong shape": (_wrong_shape, None, "shape"),
    "unknown name": (_unknown_name, None, "is not a weight of the served model"),
    "a weight missing": (_missing_weight, None, "layers.1.mlp.down_proj.weight"),
    "integer for a float weight": (_wrong_dtype, None, "dtype int64"),
    "NaN": (_not_finite, None, "NaN"),
    "shm name outside the prefix": (None, lambda b: b["buckets"][0].update(name="other-weights-x"), "should match"),
    "shm name with a path": (None, lambda b: b["buckets"][0].update(name=f"{SHM_PREFIX}a/../../x"), "should match"),
    "missing file": (None, lambda b: b["buckets"][1].update(name=f"{SHM_PREFIX}gone-{os.getpid()}"), "No such file"),
    "file shorter than declared": (
        None,
        lambda b: b["buckets"][0].update(nbytes=b["buckets"][0]["nbytes"] + 64),
        "holds",
    ),
    "CUDA IPC on a CPU engine": (
        None,
        lambda b: b["buckets"][0].update(kind="cuda_ipc", handle={"device": 0}, name=None),
        "CUDA",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
async def test_a_refused_handoff_applies_nothing(refusing_engine, hf_model, case):
    http = refusing_engine
    change_weights, change_body, reason = REFUSALS[case]
    before = await logprobs(http)
    named = modified(hf_model, seed=11)
    p = packed(change_weights(named) if change_weights else named)
    try:
        body = handoff(p, "bad")
        if change_body is not None:
            change_body(body)
            body["buckets"] = [{k: v for k, v in b.items() if v is not None} for b in body["buckets"]]
        r = await http.post("/update_weights_from_tensor", json=body)
    finally:
        p.close()
    assert r.status_code == 400, r.text
    message = r.json().get("message") or r.json()["error"]["message"]
    assert reason in message, message
    assert (await http.get("/get_weight_version")).json() == {"weight_version": "0"}
    assert await logprobs(http) == before
    assert await updates_counted(http, "tensor") == 0


async def test_memory_report_counts_the_weights_once(refusing_engine, hf_model):
    info = await server_info(refusing_engine)
    memory = info["memory"]
    params = sum(p.numel() * p.element_size() for p in hf_model.parameters())  # the tied embedding once
    assert memory["weights_bytes"] == params == 9_822_592 * 4
    assert memory["weights_device"] == "cpu" and memory["cuda"] is None
    assert memory["released"] == [] and memory["released_bytes"] == {} and memory["releasing"] is False
    assert memory["kv_cache_bytes"] == 0  # idle: no batch holds KV
    assert memory["prefix_cache_bytes"] == info["prefix_cache"]["bytes"]


# ---- 3. memory released and resumed -------------------------------------------------------------------------------


async def release(http: httpx.AsyncClient, tags: list[str] | None = None) -> httpx.Response:
    return await http.post("/release_memory_occupation", json={"tags": tags})


async def resume(http: httpx.AsyncClient, tags: list[str] | None = None) -> httpx.Response:
    return await http.post("/resume_memory_occupation", json={"tags": tags})


def succeeded(r: httpx.Response, says: str) -> None:
    assert r.status_code == 200 and r.json()["success"] is True, r.text
    assert says in r.json()["message"], r.json()["message"]


async def test_a_request_sent_while_released_waits_and_completes_after_resume(own_engine):
    http = own_engine
    before = await logprobs(http)
    cache = await fill_prefix_cache(http)
    succeeded(await release(http), "kept where they are")  # a CPU engine: its weights stay in place
    memory = (await server_info(http))["memory"]
    assert memory["released"] == ["kv_cache", "weights"]
    assert memory["prefix_cache_bytes"] == 0 and memory["kv_cache_bytes"] == 0
    assert memory["released_bytes"] == {"kv_cache": cache["bytes"], "weights": 0}
    succeeded(await release(http), "Nothing to release")

    waiting = asyncio.create_task(http.post("/generate", json=score()))
    await asyncio.sleep(1.5)
    assert not waiting.done()
    assert (await server_info(http))["queue_depth"] == 1  # waiting, not refused
    succeeded(await resume(http, ["weights"]), "still released: kv_cache")
    await asyncio.sleep(0.5)
    assert not waiting.done()
    succeeded(await http.post("/resume_memory_occupation", json={}), "requests are admitted")
    answer = await asyncio.wait_for(waiting, 60)
    assert answer.status_code == 200, answer.text
    assert [e[0] for e in answer.json()["meta_info"]["input_token_logprobs"] if e[0] is not None] == before
    succeeded(await resume(http), "Nothing to resume")
    assert (await server_info(http))["memory"]["released"] == []


async def test_release_waits_for_running_requests_and_an_update_while_released_serves_after_resume(
    own_engine, hf_model
):
    http = own_engine
    body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 400, "ignore_eos": True, "temperature": 0}}
    running = asyncio.create_task(http.post("/generate", json=body))
    kv = 0
    while kv == 0 and not running.done():
        kv = (await server_info(http))["memory"]["kv_cache_bytes"]
    # Two layers of keys and values for two KV heads of 16 floats, for the prompt at least; not absurdly more.
    assert 2 * 2 * 2 * 16 * 4 * len(PROMPT) <= kv < 10 * 2**20

    succeeded(await release(http, ["kv_cache", "weights", "cuda_graph"]), "decode graphs go and come back")
    assert (await server_info(http))["requests_done"] == 1  # the release answered once the request had finished
    answer = (await asyncio.wait_for(running, 10)).json()
    assert answer["meta_info"]["finish_reason"]["type"] == "length" and len(answer["output_ids"]) == 400

    named = modified(hf_model, seed=5)
    p = packed(named)
    try:
        succeeded(await http.post("/update_weights_from_tensor", json=handoff(p, "r1")), "version r1")
    finally:
        p.close()
    assert (await http.get("/get_weight_version")).json() == {"weight_version": "r1"}
    waiting = asyncio.create_task(logprobs(http))
    await asyncio.sleep(1.0)
    assert not waiting.done()
    succeeded(await resume(http), "requests are admitted")
    after = await asyncio.wait_for(waiting, 60)
    assert max_delta(after, reference_logprobs(with_weights(hf_model, named))) < TOLERANCE


async def test_a_release_is_refused_while_a_pause_holds_running_rows(own_engine):
    http = own_engine
    body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 8000, "ignore_eos": True}}
    running = asyncio.create_task(http.post("/generate", json=body))
    while (await server_info(http))["memory"]["kv_cache_bytes"] == 0:
        assert not running.done()
    assert (await http.post("/pause_generation", json={"mode": "in_place"})).status_code == 200
    r = await release(http)
    assert r.status_code == 400 and r.json()["success"] is False and "held by /pause_generation" in r.json()["message"]
    memory = (await server_info(http))["memory"]
    assert memory["released"] == [] and memory["releasing"] is False and memory["kv_cache_bytes"] > 0
    assert (await http.post("/pause_generation", json={"mode": "abort"})).status_code == 200
    assert (await asyncio.wait_for(running, 60)).json()["meta_info"]["finish_reason"]["type"] == "abort"
    assert (await http.post("/continue_generation", json={})).status_code == 200
    assert len(await asyncio.wait_for(logprobs(http), 60)) == len(PROMPT) - 1  # admission is open again


# ---- 4. the client ------------------------------------------------------------------------------------------------


async def test_the_weight_sync_client_hands_over_releases_and_resumes(own_engine, hf_model):
    url = str(own_engine.base_url).rstrip("/")
    named = modified(hf_model, seed=3)
    p, bad = packed(named), packed(_wrong_shape(named))
    try:
        async with WeightSyncClient([url], backoff_s=0.01) as client:
            req = UpdateWeightsFromTensorRequest(buckets=p.buckets, weight_version="c1")
            assert "version c1" in await client.update_weights_from_tensor(url, req)
            assert "not reloaded" in await client.update_weights_from_tensor(url, req)
            with pytest.raises(WeightSyncError) as err:
                await client.update_weights_from_tensor(
                    url, UpdateWeightsFromTensorRequest(buckets=bad.buckets, weight_version="c2")
                )
            assert "does not match the served" in err.value.reason and err.value.url == url

            assert "kv_cache" in (await client.release_memory(["kv_cache"]))[url]
            assert (await client.server_memory())[url]["released"] == ["kv_cache"]
            assert "admitted" in (await client.resume_memory())[url]
            memory = (await client.server_memory())[url]
            assert memory["released"] == [] and memory["weights_bytes"] > 0
            assert (await client.weight_versions()) == {url: "c1"}
    finally:
        p.close()
        bad.close()


def _client(handler) -> WeightSyncClient:
    return WeightSyncClient(["http://a", "http://b"], backoff_s=0.001, transport=httpx.MockTransport(handler))


async def test_the_client_retries_5xx_and_transport_errors_and_fails_at_once_on_4xx():
    calls: list[str] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.url.host}{request.url.path}")
        if calls.count(f"{request.url.host}{request.url.path}") == 1:
            if request.url.host == "a":
                return httpx.Response(503, json={"error": {"message": "busy"}})
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={"success": True, "message": f"done on {request.url.host}"})

    async with _client(flaky) as client:
        assert await client.release_memory() == {"http://a": "done on a", "http://b": "done on b"}
        assert await client.resume_memory(["weights"]) == {"http://a": "done on a", "http://b": "done on b"}
    assert sorted(calls) == sorted(
        [f"{h}/{p}_memory_occupation" for h in "ab" for p in ("release", "resume") for _ in range(2)]
    )

    calls.clear()

    def refusing(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.host)
        return httpx.Response(400, json={"success": False, "message": "held by /pause_generation"})

    async with _client(refusing) as client:
        with pytest.raises(WeightSyncError) as err:
            await client.release_memory()
        assert err.value.reason == "held by /pause_generation"
        with pytest.raises(WeightSyncError):
            await client.update_weights_from_tensor("http://a", _tiny_request())
    assert sorted(calls) == ["a", "a", "b"]  # each refusal once: a 4xx is never retried


def _tiny_request() -> UpdateWeightsFromTensorRequest:
    return UpdateWeightsFromTensorRequest.model_validate(
        {"buckets": [{"kind": "shm", "name": f"{SHM_PREFIX}x", "nbytes": 0, "tensors": []}], "weight_version": "1"}
    )
