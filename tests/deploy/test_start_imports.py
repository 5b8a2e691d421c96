"""What each process `up` starts imports before it serves: only the trainer and the judge (advantages) may load torch.

Every stack start launches the API, six workers and the engine at once; a process that loads torch and transformers
for nothing costs seconds of a core each (the API did, through the forget path, 7 s of its start) and a bigger image.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO

HEAVY = ("torch", "transformers")
PROBE = """
import importlib, json, sys
for name in sys.argv[1].split(","):
    importlib.import_module(name)
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
""".format(heavy=repr(set(HEAVY)))

LIGHT = {
    "api": ["api.main", "api.app"],
    "cli": ["cli.main"],
    "launcher": ["stack.launcher"],
    "worker-workflow": ["workers.main", "workers.pools", "activities.turn_log", "workflows.training"],
    "worker-policy": ["activities.agent_step", "activities.evaluation", "activities.generate", "activities.learning"],
    "worker-env": ["activities.env_step", "workers.env_capacity"],
    "engine (before its model)": ["engine.main"],
}


@pytest.mark.parametrize("process", sorted(LIGHT))
def test_a_process_that_never_trains_starts_without_torch(process: str):
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(LIGHT[process])], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [], f"{process} imports {done.stdout.strip()} at start"


RENDER = """
import json, sys
from policy_client.chat import renderer_for
r = renderer_for(sys.argv[1])
tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi 🙂"},
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
        {"role": "tool", "content": "ok"}]
ids = r.render(msgs, tools)
assert r.encode(r.render_text(msgs, tools)) == ids and r.decode(ids, skip_special_tokens=False).endswith("assistant\\n")
assert r.decode(ids) and r.tokenizer.convert_tokens_to_ids("<|im_end|>") is not None
print(json.dumps(sorted(m for m in sys.argv[2].split(",") if m in sys.modules)))
"""


def test_rendering_a_chat_loads_neither_torch_nor_transformers(tmp_path):
    """Every policy, judge and env worker renders chats (policy_client.chat): its first turn must not pay for them."""
    from bench import pretraining
    from bench.personalization import basemodel

    recipe, template = basemodel.QUICK, pretraining.TEMPLATE.read_text()
    tok_json = pretraining.build_tokenizer(recipe, basemodel.CORPUS.tokenizer_texts(recipe), template)
    (tmp_path / "tokenizer.json").write_text(tok_json)
    config = pretraining.tokenizer_config(tok_json, template, recipe.max_positions)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    (tmp_path / "chat_template.jinja").write_text(template)
    done = subprocess.run(
        [sys.executable, "-c", RENDER, str(tmp_path), ",".join(HEAVY)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [], f"rendering a chat imports {done.stdout.strip()}"
