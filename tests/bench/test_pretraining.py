"""The base policies' builder: one row per episode learns exactly what per-step rows would, and a shared prompt
run once gives the loss and gradients of running it in every row."""

from __future__ import annotations

import json

import pytest
import torch

from bench import pretraining
from bench.agents import basemodel

RECIPE = pretraining.Recipe(seed=3, tokenizer_examples=60, hidden=32, layers=2, heads=2, kv_heads=1, intermediate=64)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("tok")
    template = pretraining.TEMPLATE.read_text()
    tok_json = pretraining.build_tokenizer(RECIPE, basemodel.CORPUS.tokenizer_texts(RECIPE), template)
    (folder / "tokenizer.json").write_text(tok_json)
    config = pretraining.tokenizer_config(tok_json, template, RECIPE.max_positions)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return AutoTokenizer.from_pretrained(folder)


def _episode_rows(tokenizer, n: int) -> list[pretraining.Encoded]:
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    first = pretraining.FIRST_INDEX + basemodel.MIX.copy_phase  # past the copy drills: episodes and chats
    rows = []
    for i in range(first, first + n):
        rows += [pretraining.encode(tokenizer, row, eos) for row in basemodel.CORPUS.rows(i, RECIPE.seed)]
    return rows


def test_a_whole_episode_row_learns_each_step_after_its_own_prompt(tokenizer):
    """Every learned span is what the policy wrote at that step, after the prompt the episode rendered for it."""
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    for index in range(30):
        steps, tools, _ = basemodel.SETTINGS["terminal" if index % 2 else "toolcall"].trajectory(index, 1)
        messages, text = steps[-1]
        ids, spans = pretraining.encode(tokenizer, pretraining.Row(messages, text, tools, learn_history=True), eos)
        assert len(spans) == len(steps)
        for (start, end), (before, step_text) in zip(spans, steps):
            prompt = pretraining.encode(tokenizer, pretraining.Row(before, step_text, tools), eos)[0]
            assert ids[:start] == prompt[:start] and ids[start:end] == prompt[start:], index


def test_the_shared_prefix_loss_and_gradients_equal_running_every_row_whole(tokenizer):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    eos, pad = (tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>"))
    rows = _episode_rows(tokenizer, 12)
    prefixes = basemodel.CORPUS.shared_prefixes(tokenizer)
    assert sum(any(ids[: len(p)] == p for p in prefixes) for ids, _ in rows) >= 6  # most rows share a prompt
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**pretraining.model_config(RECIPE, eos, pad)))
    grads = []
    for loss_fn in (lambda: pretraining._padded_loss(model, rows, pad),
                    lambda: pretraining.batch_loss(model, rows, pad, prefixes)):  # fmt: skip
        model.zero_grad()
        loss = loss_fn()
        loss.backward()
        grads.append((float(loss.detach()), torch.cat([p.grad.flatten() for p in model.parameters()])))
    (plain, g1), (shared, g2) = grads
    assert shared == pytest.approx(plain, rel=1e-5)
    assert float((g1 - g2).norm() / g1.norm()) < 1e-4


def test_number_weight_makes_digits_count_more_in_a_mean_that_stays_a_mean(tokenizer):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    eos, pad = (tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>"))
    rows = _episode_rows(tokenizer, 6)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**pretraining.model_config(RECIPE, eos, pad)))
    ones = pretraining.token_weights(tokenizer, 1.0, RECIPE.vocab)
    assert ones is None
    weights = pretraining.token_weights(tokenizer, 5.0, RECIPE.vocab)
    digit = tokenizer.convert_tokens_to_ids("7")
    assert weights[digit] == 5.0 and weights[eos] == 1.0
    with torch.no_grad():
        plain = float(pretraining.batch_loss(model, rows, pad, []))
        weighted = float(pretraining.batch_loss(model, rows, pad, [], weights))
        flat = pretraining.batch_loss(model, rows, pad, [], torch.full((RECIPE.vocab,), 5.0))
    assert weighted != pytest.approx(plain) and float(flat) == pytest.approx(plain, rel=1e-5)
