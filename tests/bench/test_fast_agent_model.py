"""The shipped FAST base agent policy (tests/bench/fast_agent_model.py) is of today's recipe, and loads."""

from __future__ import annotations

import json

from tests.bench import fast_agent_model


def test_the_shipped_fast_model_is_of_todays_recipe_and_loads(tmp_path):
    build = fast_agent_model.BUILD
    assert fast_agent_model.shipped_digest() == build.corpus.digest(build.recipe), (
        f"the FAST recipe changed: rebuild the shipped model, `{fast_agent_model.REBUILD}`"
    )
    target = fast_agent_model.install(tmp_path / "models")
    assert target.name == f"agent-base-fast-{build.corpus.digest(build.recipe)}"  # where `bench agents` looks

    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(target)
    info = json.loads((target / build.corpus.marker).read_text())
    assert sum(p.numel() for p in model.parameters()) == info["parameters"]
    assert AutoTokenizer.from_pretrained(target).apply_chat_template(
        [{"role": "user", "content": "ls"}], tokenize=True, add_generation_prompt=True
    )
