"""The base policy's builder: the same files from the same recipe, a checkpoint the engine and trainer load."""

from __future__ import annotations

import hashlib
import json

import pytest

from bench.personalization import basemodel
from policy_client.chat import ChatRenderer

pytestmark = pytest.mark.timeout(300)


def _digest(folder) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.name != basemodel.MARKER  # it records the build time
    }


def test_corpus_is_reproducible_and_follows_instructions():
    assert basemodel.example(5, 1) == basemodel.example(5, 1)
    assert basemodel.example(5, 1) != basemodel.example(5, 2)
    chats = [basemodel.example(i, 0) for i in range(300)]
    assert all(c[-1]["role"] == "assistant" and c[-2]["role"] == "user" for c in chats)
    assert any(len(c) > 2 for c in chats) and any("[user's hint / instruction]" in c[-2]["content"] for c in chats)


def test_builder_is_deterministic_and_the_engine_serves_its_model(tmp_path):
    a = basemodel.ensure_base_model(tmp_path / "a", basemodel.QUICK)
    b = basemodel.ensure_base_model(tmp_path / "b", basemodel.QUICK)
    assert _digest(a) == _digest(b)
    info = json.loads((a / basemodel.MARKER).read_text())
    assert info["digest"] == basemodel.CORPUS.digest(basemodel.QUICK) and info["parameters"] > 0
    # cached: a second call does not rebuild
    mtime = (a / "model.safetensors").stat().st_mtime_ns
    assert basemodel.ensure_base_model(tmp_path / "a", basemodel.QUICK) == a
    assert (a / "model.safetensors").stat().st_mtime_ns == mtime

    from engine.model_runner import load_model
    from trainers.trainer_state import TOKENIZER_FILES

    lm = load_model(a, device="cpu")
    renderer = ChatRenderer(a)
    ids = renderer.render([{"role": "user", "content": "Help me solve this: 2 + 3?"}])
    text = renderer.decode(ids, skip_special_tokens=False)
    assert text.startswith("<|im_start|>user\n") and text.endswith("<|im_start|>assistant\n")
    im_end = renderer.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in lm.eos_ids and lm.vocab_size == basemodel.QUICK.vocab
    assert {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"} <= set(TOKENIZER_FILES)
    assert all((a / f).is_file() for f in ("config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"))
