"""Many LoRA adapters served on one base model (issue 31): adapters written by peft, loaded with SGLang's
/load_lora_adapter, named per prompt by /generate's lora_path, decoded together in one batch.

Each adapter's answers are checked against its merged model (peft merge_and_unload) decoded alone in-process; the
HTTP tests run a real engine process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest
import torch

from engine.decode import DecodeBatch
from engine.lora_adapters import KERNELS, AdapterError, LoraRegistry, read_adapter
from engine.prefix_cache import PrefixCache
from engine.weights import LoadedModel, load_model
from engine.work import WorkItem, WorkResult
from openclaw_rl.checkpoints import write_version_info
from policy_client.wire import SamplingParams
from tests.conftest import start_engine
from trainers.lora import ALL_PROJECTIONS

PROMPT = list(range(2000, 2000 + 41))  # 2 whole prefix-cache blocks and some
OTHER = list(range(3000, 3000 + 13))
NEW = 6
TOL = 2e-4


def write_adapter(tiny_model: Path, out: Path, seed: int, rank: int = 4) -> Path:
    """A peft adapter on the tiny model with random non-zero B (at `out`), and its merged model (at out-merged)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    peft_model = get_peft_model(
        model,
        LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=list(ALL_PROJECTIONS), task_type="CAUSAL_LM"),
    )
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3)
    peft_model.save_pretrained(out, safe_serialization=True)
    merged = out.with_name(out.name + "-merged")
    peft_model.merge_and_unload().save_pretrained(merged, safe_serialization=True)
    for f in tiny_model.iterdir():
        if f.is_file() and not (merged / f.name).exists():
            shutil.copy(f, merged / f.name)
    return out


@pytest.fixture(scope="module")
def adapters(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("engine-lora")  # the engine's data dir: an allowed weight root
    out = {name: write_adapter(tiny_model, root / "adapters" / name, seed) for name, seed in (("a1", 1), ("a2", 2))}
    out["a3"] = write_adapter(tiny_model, root / "adapters" / "a3", 3, rank=8)
    write_version_info(out["a1"], {"weight_version": "v7"})
    return out


@pytest.fixture(scope="module")
def base(tiny_model: Path) -> LoadedModel:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield load_model(tiny_model, "cpu", "float32", weight_version="0")
    torch.set_num_threads(threads)


def params(n: int = NEW) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, temperature=0.0, ignore_eos=True)


def run(lm: LoadedModel, items: list[WorkItem], **kw) -> list[WorkResult]:
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), **kw)
    done = batch.add(items)
    while len(batch):
        done += batch.step()
    by = {id(it): r for it, r in done}
    return [by[id(it)] for it in items]


def lps(entries: list) -> list[float]:
    return [e[0] for e in entries if e[0] is not None]


@pytest.fixture(scope="module")
def solo(adapters: dict[str, Path], base: LoadedModel) -> dict:
    """Per adapter (None: the base) and prompt: the merged model's answer decoded alone."""
    out = {}
    for name in (None, "a1", "a2", "a3"):
        lm = base if name is None else load_model(Path(f"{adapters[name]}-merged"), "cpu", "float32", "m")
        for key, prompt in (("p", PROMPT), ("o", OTHER)):
            (r,) = run(lm, [WorkItem(list(prompt), params(), return_logprob=True, logprob_start_len=0)])
            out[name, key] = r
    return out


def same(got_ids: list[int], got_lps: list[float], want: WorkResult) -> None:
    assert got_ids == want.output_ids
    assert got_lps == pytest.approx(lps(want.output_token_logprobs), abs=TOL)


# ---- in-process ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", KERNELS)
def test_adapters_and_base_in_one_batch_each_equal_their_merged_model(adapters, base, solo, kernel):
    reg = LoraRegistry(4)
    for i, name in enumerate(("a1", "a2", "a3")):
        reg.add(read_adapter(adapters[name], name, i + 1, base.model))
    names = ["a1", "a2", None, "a3", "a1", None]
    prompts = [PROMPT, PROMPT, PROMPT, OTHER, OTHER, OTHER]
    held = reg.acquire(names)
    items = [
        WorkItem(list(p), params(), return_logprob=True, logprob_start_len=0, lora=a) for p, a in zip(prompts, held)
    ]
    results = run(base, items, lora_kernel=kernel)
    for name, prompt, r in zip(names, prompts, results):
        want = solo[name, "p" if prompt is PROMPT else "o"]
        same(r.output_ids, lps(r.output_token_logprobs), want)
        assert lps(r.input_token_logprobs) == pytest.approx(lps(want.input_token_logprobs), abs=TOL)
        assert r.to_wire()["meta_info"].get("lora_path") == name
    assert results[0].lora_version == "v7" and results[1].lora_version is None
    assert solo["a1", "p"].output_ids != solo[None, "p"].output_ids  # the adapters do change the answers
    reg.release(held)


def test_prefix_cache_keeps_adapters_apart(adapters, base, solo):
    reg = LoraRegistry(4)
    for i, name in enumerate(("a1", "a2")):
        reg.add(read_adapter(adapters[name], name, i + 1, base.model))
    cache = PrefixCache(64 * 1024 * 1024)
    a1, a2 = reg.acquire(["a1", "a2"])
    got = {}
    for key, adapter in (("a1", a1), ("a2", a2), ("a1 again", a1), ("base", None)):
        (r,) = run(base, [WorkItem(list(PROMPT), params(), return_logprob=True, lora=adapter)], prefix_cache=cache)
        got[key] = r
    assert got["a1"].cached_tokens == 0 and got["a2"].cached_tokens == 0 and got["base"].cached_tokens == 0
    assert got["a1 again"].cached_tokens > 0  # the same adapter does reuse its own KV
    for key, name in (("a1", "a1"), ("a2", "a2"), ("a1 again", "a1"), ("base", None)):
        same(got[key].output_ids, lps(got[key].output_token_logprobs), solo[name, "p"])


def test_chunked_prefill_of_adapter_rows(adapters, base, solo):
    reg = LoraRegistry(2)
    reg.add(read_adapter(adapters["a1"], "a1", 1, base.model))
    reg.add(read_adapter(adapters["a2"], "a2", 2, base.model))
    a1, a2 = reg.acquire(["a1", "a2"])
    items = [WorkItem(list(PROMPT), params(), return_logprob=True, logprob_start_len=0, lora=a) for a in (a1, a2)]
    items.append(WorkItem(list(OTHER), params(), return_logprob=True, lora=a2))  # short: prefilled at once
    results = run(base, items, chunk_tokens=16, prefix_cache=PrefixCache(64 * 1024 * 1024))
    for r, key in zip(results, [("a1", "p"), ("a2", "p"), ("a2", "o")]):
        same(r.output_ids, lps(r.output_token_logprobs), solo[key])
    assert lps(results[0].input_token_logprobs) == pytest.approx(lps(solo["a1", "p"].input_token_logprobs), abs=TOL)


def test_unloading_and_loading_while_rows_decode_does_not_disturb_them(adapters, base, solo):
    reg = LoraRegistry(1)
    reg.add(read_adapter(adapters["a1"], "a1", 1, base.model))
    (a1,) = reg.acquire(["a1"])
    batch = DecodeBatch(base, torch.Generator().manual_seed(0))
    item = WorkItem(list(PROMPT), params(), return_logprob=True, lora=a1)
    done = batch.add([item])
    done += batch.step()
    assert reg.remove("a1")  # unloaded mid-answer, another loaded in its place
    reg.add(read_adapter(adapters["a2"], "a2", 2, base.model))
    while len(batch):
        done += batch.step()
    ((_, r),) = done
    same(r.output_ids, lps(r.output_token_logprobs), solo["a1", "p"])
    reg.release([a1])


def test_registry_evicts_the_least_recently_used_idle_adapter(adapters, base):
    reg = LoraRegistry(2)
    reg.add(read_adapter(adapters["a1"], "a1", 1, base.model))
    reg.add(read_adapter(adapters["a2"], "a2", 2, base.model))
    (held,) = reg.acquire(["a1"])  # a1 in use, and the most recent
    assert reg.add(read_adapter(adapters["a3"], "a3", 3, base.model)) == ["a2"]
    (held3,) = reg.acquire(["a3"])
    with pytest.raises(AdapterError, match="over capacity"):
        reg.add(read_adapter(adapters["a2"], "a2", 4, base.model))
    reg.release([held, held3])
    assert reg.add(read_adapter(adapters["a2"], "a2", 5, base.model)) == ["a1"]
    with pytest.raises(AdapterError, match="'a1' is not loaded"):
        reg.acquire(["a1"])


def test_bad_adapters_are_refused(adapters, base, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(adapters["a1"], bad)
    cfg = json.loads((bad / "adapter_config.json").read_text())
    (bad / "adapter_config.json").write_text(json.dumps({**cfg, "r": 8}))
    with pytest.raises(AdapterError, match="do not fit rank 8"):
        read_adapter(bad, "bad", 1, base.model)
    with pytest.raises(AdapterError, match="not a PEFT adapter folder"):
        read_adapter(tmp_path, "empty", 2, base.model)


# ---- through the engine's HTTP server -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def engine(tiny_model: Path, adapters: dict[str, Path]):
    data_dir = adapters["a1"].parent.parent
    proc, url = start_engine(tiny_model, data_dir, OPENCLAW_RL_ENGINE__MAX_LORAS="2")
    with httpx.Client(base_url=url, timeout=120) as client:
        yield client
    proc.terminate()
    proc.wait(timeout=30)


def generate(client: httpx.Client, prompts: list[list[int]], lora: list | str | None) -> httpx.Response:
    body = {
        "input_ids": prompts,
        "sampling_params": {"max_new_tokens": NEW, "temperature": 0.0, "ignore_eos": True},
        "return_logprob": True,
        "lora_path": lora,
    }
    return client.post("/generate", json=body)


def test_http_load_generate_batch_unload_evict(engine, adapters, solo, tmp_path):
    for name in ("a1", "a2"):
        r = engine.post("/load_lora_adapter", json={"lora_name": name, "lora_path": str(adapters[name])})
        assert r.status_code == 200, r.text
        assert r.json()["success"] is True
    assert set(r.json()["loaded_adapters"]) == {"a1", "a2"}
    r = engine.post("/load_lora_adapter", json={"lora_name": "a1", "lora_path": str(adapters["a1"])})
    assert r.status_code == 400 and "loaded already" in r.json()["error_message"]

    # two adapters and the base in one batched request: one batch, each equal to its own model alone
    r = generate(engine, [PROMPT, PROMPT, PROMPT, OTHER], ["a1", "a2", None, "a2"])
    assert r.status_code == 200, r.text
    for out, (name, key) in zip(r.json(), [("a1", "p"), ("a2", "p"), (None, "p"), ("a2", "o")]):
        same(out["output_ids"], lps(out["meta_info"]["output_token_logprobs"]), solo[name, key])
        assert out["meta_info"].get("lora_path") == name
    assert r.json()[0]["meta_info"]["lora_version"] == "v7"

    # the prefix cache: PROMPT's KV under a1 is cached now; a2 and a1 again must each equal their own answer
    for name in ("a2", "a1"):
        r = generate(engine, [PROMPT], name)
        (out,) = r.json()
        same(out["output_ids"], lps(out["meta_info"]["output_token_logprobs"]), solo[name, "p"])
        assert out["meta_info"]["cached_tokens"] > 0  # its own KV from the batched request above

    # unknown adapter -> 400 naming it
    r = generate(engine, [OTHER], "nobody")
    assert r.status_code == 400 and "nobody" in r.text

    # unload, then generate with it -> 400
    r = engine.post("/unload_lora_adapter", json={"lora_name": "a2"})
    assert r.status_code == 200 and set(r.json()["loaded_adapters"]) == {"a1"}
    assert generate(engine, [OTHER], "a2").status_code == 400
    assert engine.post("/unload_lora_adapter", json={"lora_name": "a2"}).status_code == 400

    # engine.max_loras is 2: a third evicts the least recently used (a1 after a3 and a2 load)
    for name in ("a3", "a2"):
        r = engine.post("/load_lora_adapter", json={"lora_name": name, "lora_path": str(adapters[name])})
        assert r.status_code == 200, r.text
    assert set(r.json()["loaded_adapters"]) == {"a2", "a3"}
    r = generate(engine, [OTHER], "a1")
    assert r.status_code == 400 and "'a1' is not loaded" in r.text
    (out,) = generate(engine, [OTHER], "a3").json()  # rank 8 beside rank 4
    same(out["output_ids"], lps(out["meta_info"]["output_token_logprobs"]), solo["a3", "o"])


def test_http_refuses_disallowed_and_broken_adapters(engine, adapters, tmp_path):
    outside = tmp_path / "outside"  # not under the engine's weight roots
    shutil.copytree(adapters["a1"], outside)
    r = engine.post("/load_lora_adapter", json={"lora_name": "x", "lora_path": str(outside)})
    assert r.status_code == 400 and "outside the folders" in r.json()["error_message"]
    empty = adapters["a1"].parent / "empty"
    empty.mkdir()
    r = engine.post("/load_lora_adapter", json={"lora_name": "x", "lora_path": str(empty)})
    assert r.status_code == 400 and "not a PEFT adapter folder" in r.json()["error_message"]
    assert engine.post("/load_lora_adapter", json={"lora_name": "x"}).status_code in (400, 422)
    r = generate(engine, [OTHER, OTHER], ["a1"])
    assert r.status_code == 400  # one lora_path per prompt


def test_http_stream_reports_the_adapter(engine, adapters, solo):
    r = engine.post("/load_lora_adapter", json={"lora_name": "s1", "lora_path": str(adapters["a1"])})
    assert r.status_code == 200, r.text
    body = {
        "input_ids": OTHER,
        "sampling_params": {"max_new_tokens": NEW, "temperature": 0.0, "ignore_eos": True},
        "stream": True,
        "lora_path": "s1",
    }
    events = [
        json.loads(line[6:])
        for line in engine.post("/generate", json=body).text.splitlines()
        if line.startswith("data: {")
    ]
    assert events[-1]["output_ids"] == solo["a1", "o"].output_ids
    assert events[-1]["meta_info"]["lora_path"] == "s1" and events[-1]["meta_info"]["lora_version"] == "v7"
    # unloaded once its stream is over
    assert engine.post("/unload_lora_adapter", json={"lora_name": "s1"}).status_code == 200
