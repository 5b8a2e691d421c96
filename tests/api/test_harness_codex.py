"""The Codex CLI (`@openai/codex` from the npm registry, unmodified) against our `/v1/responses`, through the real
stack: `codex exec` runs one task unattended in a sandbox folder, pointed at our base URL by a model provider in its
config (the config docs/protocol-openai-responses.md shows). A scripted policy answers (the tiny model would write
gibberish): a shell call through Codex's `exec_command` function tool, then, in a second run, a freeform
`apply_patch` custom tool call; Codex runs both and sends their outputs back. Asserted: codex exits 0 with no
protocol error in its event stream, the files it was told to write exist, and its turns are our session's turns
(the session is Codex's thread id, from `prompt_cache_key`), judged, paired with their tool results, with samples."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.api.conftest import ScriptedStack, create_key
from tests.api.harness_install import HARNESSES, codex_bin, docs_block
from tests.api.test_protocols_e2e import sample_turn_ids, session_turns
from tests.helpers import RunningStack
from tests.scripted_policy import tool_call

pytestmark = pytest.mark.timeout(600)

PATCH = "*** Begin Patch\n*** Add File: patched.txt\n+patched by codex\n*** End Patch\n"


LAST_MESSAGES: list[str] = []
"""What the policy was last told on each call: a failed check shows it (e.g. a tool's error output)."""


def script(prompt: str) -> str:
    LAST_MESSAGES.append(prompt.rsplit("<|im_start|>", 2)[-2][-1500:])
    last = prompt.rsplit("<|im_start|>", 2)[-2]  # the last message before the assistant's header
    if "<tool_response>" in last:
        return "Done."
    if "Create hello.txt" in last:
        return tool_call("exec_command", cmd="printf hi > hello.txt")
    if "Add patched.txt" in last:
        return tool_call("apply_patch", input=PATCH)
    return "Nothing to do."


@pytest.fixture(scope="module")
def stack(scripted_stack: ScriptedStack) -> RunningStack:
    return scripted_stack.answering(script)


def codex_config(api: str) -> str:
    """$CODEX_HOME/config.toml: the docs' example as written (docs/protocol-openai-responses.md), our address in it."""
    return docs_block("toml").replace("http://127.0.0.1:8000", api)


def codex_home_root() -> Path:
    for root in (HARNESSES, Path.home() / ".cache" / "openclaw-rl-tests", Path("/var/tmp/openclaw-rl-tests")):
        if not str(root.resolve()).startswith("/tmp/"):
            return root
    raise AssertionError("no folder outside /tmp for CODEX_HOME")


def run_codex(stack: RunningStack, key: str, tmp: Path, task: str, *extra: str) -> tuple[str, list[dict]]:
    """`codex exec` in a fresh sandbox folder; its thread id and its JSONL events. Asserts it exited 0."""
    # Codex links its sandbox helper (codex-linux-sandbox, run under bubblewrap) into $CODEX_HOME, but refuses to
    # under a temporary folder: its home is made outside /tmp (beside the installed CLI unless the checkout itself is
    # under /tmp, as a clone for a trial run may be), and removed after.
    home, work = codex_home_root() / f"codex-home-{uuid.uuid4().hex[:8]}", tmp / "work"
    home.mkdir(parents=True)
    work.mkdir(exist_ok=True)
    (home / "config.toml").write_text(codex_config(stack.api))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env.update(CODEX_HOME=str(home), HOME=str(home), OPENCLAW_RL_API_KEY=key)
    cmd = [str(codex_bin()), "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", *extra, task]
    try:
        out = subprocess.run(
            cmd, cwd=work, env=env, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert out.returncode == 0, out.stdout + out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    kinds = [e["type"] for e in events]
    assert "turn.completed" in kinds and "turn.failed" not in kinds, out.stdout + out.stderr
    errors = [e for e in events if e.get("item", {}).get("type") == "error" or e["type"] == "error"]
    # Codex warns that it has no metadata for a model name it does not know; any other error is ours.
    assert all("metadata" in e["item"]["message"] for e in errors if "item" in e), errors
    assert not [e for e in errors if "item" not in e], errors
    thread = next(e["thread_id"] for e in events if e["type"] == "thread.started")
    return thread, events


def check_tool_loop(stack: RunningStack, key: str, thread: str, tool: str, output: str) -> None:
    """Two main turns: the call, then the answer to its result; the first is paired with the result, judged and
    a sample (token-exact: the prompt and completion token counts behind it)."""
    turns = session_turns(stack, key, thread, judged=1)
    assert [t["turn_type"] for t in turns] == ["main", "main"] and all(t["status"] == "done" for t in turns)
    assert turns[0]["tool_calls"][0]["name"] == tool
    assert turns[0]["next_state"]["role"] == "tool" and output in turns[0]["next_state"]["summary"]
    assert turns[0]["judgement"]["result"]["published"] is True, turns[0]["judgement"]
    assert turns[0]["prompt_tokens"] > 1000 and turns[0]["completion_tokens"] > 0  # Codex's prompt is long
    assert turns[1]["next_state_status"] == "pending"
    assert turns[0]["turn_id"] in sample_turn_ids(stack, want={turns[0]["turn_id"]})


def test_codex_exec_runs_a_shell_call_through_our_responses_api(stack, tmp_path):
    key = create_key(stack, f"codex-{uuid.uuid4().hex[:6]}")
    thread, events = run_codex(stack, key, tmp_path, "Create hello.txt containing hi")
    assert (tmp_path / "work" / "hello.txt").exists(), LAST_MESSAGES
    commands = [e["item"] for e in events if e.get("item", {}).get("type") == "command_execution"]
    assert commands and commands[-1]["exit_code"] == 0
    messages = [e["item"]["text"] for e in events if e.get("item", {}).get("type") == "agent_message"]
    assert messages[-1] == "Done."
    check_tool_loop(stack, key, thread, "exec_command", "")


def test_codex_applies_a_freeform_patch_a_custom_tool_call_round_trips(stack, tmp_path):
    """With a model name Codex knows (`gpt-5.5`), it sends `apply_patch` as a custom (freeform, grammar) tool: our
    answer's `custom_tool_call` is applied and its `custom_tool_call_output` comes back as the tool's result."""
    key = create_key(stack, f"codex-{uuid.uuid4().hex[:6]}")
    thread, events = run_codex(stack, key, tmp_path, "Add patched.txt", "-m", "gpt-5.5")
    assert (tmp_path / "work" / "patched.txt").exists(), LAST_MESSAGES
    assert (tmp_path / "work" / "patched.txt").read_text() == "patched by codex\n"
    check_tool_loop(stack, key, thread, "apply_patch", "")
