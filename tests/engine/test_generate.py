"""The embedded engine over real HTTP, checked against a direct forward pass of the same model."""

from __future__ import annotations

import httpx
import pytest
import torch


@pytest.fixture(scope="module")
def hf(tiny_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(tiny_model)


def post(url: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}/generate", json=body, timeout=120)


def direct_logprobs(model, ids: list[int], temperature: float = 1.0) -> torch.Tensor:
    """log p(ids[p] | ids[:p]) for p >= 1, by one plain forward pass."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float() / temperature
    lp = torch.log_softmax(logits, -1)
    return lp[:-1].gather(-1, torch.tensor(ids[1:]).unsqueeze(-1)).squeeze(-1)


def test_generate_single_without_logprobs(engine_url):
    r = post(engine_url, {"text": "Hello there", "sampling_params": {"max_new_tokens": 6, "temperature": 0.7}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["output_ids"]) == 6
    meta = body["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 6}
    assert meta["completion_tokens"] == 6 and meta["prompt_tokens"] == 2
    assert "output_token_logprobs" not in meta
    assert meta["weight_version"] == "0"


def test_generate_with_logprobs_matches_forward_pass(engine_url, hf):
    model, tok = hf
    prompt = tok.encode("The quick brown fox")
    body = post(
        engine_url,
        {"input_ids": prompt, "sampling_params": {"max_new_tokens": 12, "temperature": 0.8}, "return_logprob": True},
    ).json()
    entries = body["meta_info"]["output_token_logprobs"]
    assert [e[1] for e in entries] == body["output_ids"]
    want = direct_logprobs(model, prompt + body["output_ids"], temperature=0.8)[len(prompt) - 1 :]
    got = torch.tensor([e[0] for e in entries])
    assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()


def test_batched_requests_each_keep_their_own_params(engine_url):
    r = post(
        engine_url,
        {
            "text": ["one", "two three", "four five six"],
            "sampling_params": [
                {"max_new_tokens": 2, "temperature": 0},
                {"max_new_tokens": 5},
                {"max_new_tokens": 9, "temperature": 0},
            ],
            "return_logprob": [True, False, True],
        },
    )
    assert r.status_code == 200, r.text
    bodies = r.json()
    assert [len(b["output_ids"]) for b in bodies] == [2, 5, 9]
    assert "output_token_logprobs" in bodies[0]["meta_info"] and "output_token_logprobs" not in bodies[1]["meta_info"]
    # batching must not change a greedy answer: compare with the same prompt alone
    alone = post(
        engine_url, {"text": "four five six", "sampling_params": {"max_new_tokens": 9, "temperature": 0}}
    ).json()
    assert alone["output_ids"] == bodies[2]["output_ids"]


def test_input_logprobs_of_forced_response_equal_forward_pass(engine_url, hf):
    model, tok = hf
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is 2+2?"}], tokenize=False, add_generation_prompt=True
    )
    ids = tok.encode(prompt) + tok.encode("It is 4, of course.<|im_end|>")
    start = len(tok.encode(prompt))
    r = post(
        engine_url,
        {
            "input_ids": ids,
            "sampling_params": {"max_new_tokens": 0},
            "return_logprob": True,
            "logprob_start_len": start,
        },
    )
    meta = r.json()["meta_info"]
    assert r.json()["output_ids"] == [] and meta["finish_reason"] == {"type": "length", "length": 0}
    entries = meta["input_token_logprobs"]
    assert [e[1] for e in entries] == ids[start:]
    want = direct_logprobs(model, ids)[start - 1 :]
    assert torch.allclose(torch.tensor([e[0] for e in entries]), want, atol=1e-4)
    # from position 0 the first token has no log-prob, as in SGLang
    first = post(
        engine_url,
        {
            "input_ids": ids[:5],
            "sampling_params": {"max_new_tokens": 0},
            "return_logprob": True,
            "logprob_start_len": 0,
        },
    ).json()
    assert first["meta_info"]["input_token_logprobs"][0][0] is None


def test_top_logprobs(engine_url):
    body = post(
        engine_url,
        {
            "text": "a b",
            "sampling_params": {"max_new_tokens": 3, "temperature": 0},
            "return_logprob": True,
            "top_logprobs_num": 4,
        },
    ).json()
    tops = body["meta_info"]["output_top_logprobs"]
    assert len(tops) == 3 and all(len(t) == 4 for t in tops)
    # greedy: the chosen token is the most likely one
    assert [t[0][1] for t in tops] == body["output_ids"]


def test_return_text_in_logprobs_names_each_token(engine_url, hf):
    _, tok = hf
    body = post(
        engine_url,
        {
            "text": "a b",
            "sampling_params": {"max_new_tokens": 3},
            "return_logprob": True,
            "return_text_in_logprobs": True,
            "logprob_start_len": 0,
        },
    ).json()
    entries = body["meta_info"]["output_token_logprobs"]
    assert [e[2] for e in entries] == [tok.decode([t]) for t in body["output_ids"]]
    assert [e[2] for e in body["meta_info"]["input_token_logprobs"]] == ["a", " b"]


def test_stop_string_trims_text_and_reports_match(engine_url):
    free = post(engine_url, {"text": "count", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}).json()
    text = free["text"]
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    assert stop.strip(), f"need a visible stop string in {text!r}"
    cut = post(
        engine_url, {"text": "count", "sampling_params": {"max_new_tokens": 8, "temperature": 0, "stop": [stop]}}
    ).json()
    assert cut["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert cut["text"] == text[: text.find(stop)]
    kept = post(
        engine_url,
        {
            "text": "count",
            "sampling_params": {"max_new_tokens": 8, "temperature": 0, "stop": stop, "no_stop_trim": True},
        },
    ).json()
    assert kept["text"] == text[: text.find(stop) + len(stop)]


def test_stop_token_ids_end_generation(engine_url):
    free = post(engine_url, {"text": "count", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}).json()
    third = free["output_ids"][2]
    first_hit = free["output_ids"].index(third)
    r = post(
        engine_url,
        {"text": "count", "sampling_params": {"max_new_tokens": 8, "temperature": 0, "stop_token_ids": [third]}},
    ).json()
    assert r["output_ids"] == free["output_ids"][: first_hit + 1]
    assert r["meta_info"]["finish_reason"] == {"type": "stop", "matched": third}


def test_streaming_ends_with_the_full_answer(engine_url):
    snapshots = []
    with httpx.stream(
        "POST",
        f"{engine_url}/generate",
        json={"text": "stream me", "stream": True, "sampling_params": {"max_new_tokens": 6, "temperature": 0}},
        timeout=60,
    ) as r:
        assert r.status_code == 200
        lines = [line[5:].strip() for line in r.iter_lines() if line.startswith("data:")]
    assert lines[-1] == "[DONE]"
    import json

    snapshots = [json.loads(x) for x in lines[:-1]]
    assert len(snapshots) >= 2
    assert [len(s["output_ids"]) for s in snapshots] == sorted(len(s["output_ids"]) for s in snapshots)
    whole = post(engine_url, {"text": "stream me", "sampling_params": {"max_new_tokens": 6, "temperature": 0}}).json()
    assert snapshots[-1]["output_ids"] == whole["output_ids"] and snapshots[-1]["text"] == whole["text"]
    assert snapshots[-1]["meta_info"]["finish_reason"]["type"] == "length"


@pytest.mark.parametrize(
    "body, reason",
    [
        ({"sampling_params": {"max_new_tokens": 4}}, "exactly one of `text` or `input_ids`"),
        ({"text": "hi", "sampling_params": {"max_new_tokens": -1}}, "max_new_tokens"),
        ({"input_ids": "abc"}, "input_ids"),
        ({"text": "hi", "sampling_params": {"temperature": "hot"}}, "temperature"),
        ({"text": "hi", "sampling_params": {"nucleus": 0.3}}, "nucleus"),
        ({"input_ids": [1, 999999999]}, "outside the vocabulary"),
        ({"input_ids": []}, "empty"),
        ({"text": ["a", "b"], "sampling_params": [{"max_new_tokens": 1}]}, "entries for 2 prompts"),
    ],
)
def test_bad_generate_requests_get_400_with_reason(engine_url, body, reason):
    r = post(engine_url, body)
    assert r.status_code == 400, r.text
    assert reason in r.json()["error"]["message"]


def test_malformed_json_gets_400(engine_url):
    r = httpx.post(f"{engine_url}/generate", content=b"{not json", timeout=10)
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]


def test_missing_checkpoint_update_is_refused_and_serving_continues(engine_url):
    r = httpx.post(f"{engine_url}/update_weights_from_disk", json={"model_path": "/no/such/checkpoint"}, timeout=30)
    assert r.status_code == 400
    assert r.json()["success"] is False and "/no/such/checkpoint" in r.json()["message"]
    assert post(engine_url, {"text": "still here", "sampling_params": {"max_new_tokens": 1}}).status_code == 200


def test_info_routes(engine_url, tiny_model):
    info = httpx.get(f"{engine_url}/get_model_info").json()
    assert info["model_path"] == str(tiny_model) and info["is_generation"] is True and info["weight_version"] == "0"
    assert httpx.get(f"{engine_url}/health_generate", timeout=60).status_code == 200
    assert httpx.post(f"{engine_url}/flush_cache").status_code == 200
    assert httpx.get(f"{engine_url}/get_weight_version").json() == {"weight_version": "0"}
