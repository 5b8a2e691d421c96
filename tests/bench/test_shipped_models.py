"""The shipped FAST base policies (tests/bench/shipped_models.py) are of today's recipes, and load."""

from __future__ import annotations

import json

import pytest

from tests.bench.shipped_models import REBUILD, SHIPPED, Shipped


@pytest.mark.parametrize("model", SHIPPED, ids=lambda m: m.folder)
def test_the_shipped_model_is_of_todays_recipe_and_loads(model: Shipped, tmp_path):
    assert model.shipped_digest() == model.digest(), f"{model.folder}'s recipe changed: rebuild it, `{REBUILD}`"
    target = model.install(tmp_path / "models")
    assert target == model.corpus.folder(tmp_path / "models", model.recipe)  # where its benchmark looks

    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(target)
    info = json.loads((target / model.corpus.marker).read_text())
    assert sum(p.numel() for p in loaded.parameters()) == info["parameters"]
    assert AutoTokenizer.from_pretrained(target).apply_chat_template(
        [{"role": "user", "content": "hello"}], tokenize=True, add_generation_prompt=True
    )
