"""Hermes (`hermes-agent` from PyPI, unmodified, in a venv of its own: it pins exact versions of openai, pydantic,
fastapi... that differ from ours) against our `/v1/responses`, through the real stack: `hermes -z` runs one task
unattended (one-shot mode bypasses approvals) in a sandbox folder, with our API as a custom provider speaking
`codex_responses` (the config docs/protocol-openai-responses.md shows). A scripted policy calls Hermes'
`write_file` tool, then answers its result. Asserted: hermes exits 0 and prints the answer, the file exists, and the
two turns are one session of ours (from Hermes' `prompt_cache_key`), the first judged, paired with the tool's
result, a sample."""

from __future__ import annotations

import os
import subprocess
import uuid

import httpx
import pytest

from tests.api.conftest import ScriptedStack, create_key
from tests.api.harness_install import docs_block, hermes_bin
from tests.api.test_protocols_e2e import sample_turn_ids, session_turns
from tests.helpers import RunningStack
from tests.scripted_policy import tool_call

pytestmark = pytest.mark.timeout(600)


def script(prompt: str) -> str:
    last = prompt.rsplit("<|im_start|>", 2)[-2]  # the last message before the assistant's header
    if "<tool_response>" in last:
        return "Wrote hermes.txt."
    if "Write hermes.txt" in last:
        return tool_call("write_file", path="hermes.txt", content="hi from hermes")
    return "Nothing to do."


@pytest.fixture(scope="module")
def stack(scripted_stack: ScriptedStack) -> RunningStack:
    hermes_bin()  # installed before its test (about 15 s the first time)
    return scripted_stack.answering(script)


def hermes_config(api: str, key: str) -> str:
    """$HERMES_HOME/config.yaml: the docs' example as written (docs/protocol-openai-responses.md), our address and
    key in it."""
    return docs_block("yaml").replace("http://127.0.0.1:8000", api).replace("ocrl-...", key)


def test_hermes_one_shot_writes_a_file_through_our_responses_api(stack, tmp_path):
    key = create_key(stack, f"hermes-{uuid.uuid4().hex[:6]}")
    home, work = tmp_path / "hermes-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.yaml").write_text(hermes_config(stack.api, key))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HERMES_", "ANTHROPIC_"))}
    env.update(HOME=str(home), HERMES_HOME=str(home))
    out = subprocess.run(
        [str(hermes_bin()), "-z", "Write hermes.txt saying hi from hermes"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "Wrote hermes.txt.", out.stdout + out.stderr
    assert (work / "hermes.txt").read_text() == "hi from hermes"

    sessions = httpx.get(f"{stack.api}/v1/sessions", headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
    ids = [s["session_id"] for s in sessions["data"]]
    assert len(ids) == 1, sessions
    turns = session_turns(stack, key, ids[0], judged=1)
    assert [t["turn_type"] for t in turns] == ["main", "main"] and all(t["status"] == "done" for t in turns)
    assert turns[0]["tool_calls"][0]["name"] == "write_file"
    assert turns[0]["next_state"]["role"] == "tool"
    assert turns[0]["judgement"]["result"]["published"] is True, turns[0]["judgement"]
    assert turns[0]["prompt_tokens"] > 1000 and turns[0]["completion_tokens"] > 0
    assert turns[0]["turn_id"] in sample_turn_ids(stack, want={turns[0]["turn_id"]})
