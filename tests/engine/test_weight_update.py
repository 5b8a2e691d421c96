"""Weight updates from disk while requests are in flight: none fails, none mixes versions."""

from __future__ import annotations

import asyncio
import shutil

import httpx
import pytest
import torch

from tests.conftest import start_engine

FIXED = {
    "text": "a fixed prompt for comparing weights",
    "sampling_params": {"max_new_tokens": 0},
    "return_logprob": True,
    "logprob_start_len": 1,
}


@pytest.fixture()
def updatable_engine(tiny_model, tmp_path):
    proc, url = start_engine(tiny_model, tmp_path)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture()
def perturbed_checkpoint(tiny_model, tmp_path):
    """The tiny model with every weight nudged: same architecture, different log-probs."""
    from transformers import AutoModelForCausalLM

    out = tmp_path / "perturbed"
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    model.save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_model / name, out / name)
    return out


async def test_update_changes_logprobs_while_concurrent_requests_succeed(updatable_engine, perturbed_checkpoint):
    url = updatable_engine
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        before = (await http.post("/generate", json=FIXED)).json()["meta_info"]["input_token_logprobs"]

        async def chat(i: int) -> httpx.Response:
            await asyncio.sleep(0.02 * i)  # spread arrivals across the update
            return await http.post(
                "/generate",
                json={"text": f"request {i}", "sampling_params": {"max_new_tokens": 24}, "return_logprob": True},
            )

        requests = [asyncio.create_task(chat(i)) for i in range(20)]
        await asyncio.sleep(0.1)
        update = await http.post(
            "/update_weights_from_disk", json={"model_path": str(perturbed_checkpoint), "weight_version": "1"}
        )
        responses = await asyncio.gather(*requests)

        assert update.status_code == 200 and update.json()["success"] is True, update.text
        assert [r.status_code for r in responses] == [200] * 20
        versions = {r.json()["meta_info"]["weight_version"] for r in responses}
        assert versions <= {"0", "1"}
        for r in responses:
            assert len(r.json()["output_ids"]) == 24 == len(r.json()["meta_info"]["output_token_logprobs"])

        after = (await http.post("/generate", json=FIXED)).json()
        assert after["meta_info"]["weight_version"] == "1"
        assert (await http.get("/get_model_info")).json()["weight_version"] == "1"
        delta = max(abs(a[0] - b[0]) for a, b in zip(before, after["meta_info"]["input_token_logprobs"]))
        assert delta > 1e-3


async def test_incompatible_checkpoint_keeps_old_weights(updatable_engine, tmp_path, tiny_model):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    other = tmp_path / "other-arch"
    cfg = Qwen3Config.from_pretrained(tiny_model, num_hidden_layers=1, layer_types=["full_attention"])
    Qwen3ForCausalLM(cfg).save_pretrained(other)
    async with httpx.AsyncClient(base_url=updatable_engine, timeout=120) as http:
        r = await http.post("/update_weights_from_disk", json={"model_path": str(other), "weight_version": "9"})
        assert r.status_code == 400 and "does not match" in r.json()["message"]
        assert (await http.get("/get_weight_version")).json() == {"weight_version": "0"}
