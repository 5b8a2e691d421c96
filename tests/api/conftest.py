from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import CLI, REPO, RunningStack, stack_env
from tests.scripted_policy import ScriptedPolicy


def create_key(stack: RunningStack, user: str) -> str:
    out = subprocess.run(
        CLI + ["keys", "create", "--user", user], env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.split()[0]


def chat_stack_env(data_dir: Path, model: Path, **extra: str) -> dict[str, str]:
    env = stack_env(data_dir, model_path=model)
    env.update(
        {
            "OPENCLAW_RL_API__MAX_REQUEST_BYTES": str(256 * 1024),
            "OPENCLAW_RL_SESSION__TURNS_PER_RUN": "5",
            "OPENCLAW_RL_SESSION__DEFAULT_MAX_TOKENS": "24",
            "OPENCLAW_RL_TRAINING__AUTO_START": "false",  # no weight updates behind these tests' backs
            **extra,
        }
    )
    return env


@pytest.fixture(scope="package")
def chat_stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """The whole stack as `openclaw-rl up` runs it, shared by the files that use it: they run on one worker, one
    after another (tests/tiers.py `SHARED_STACKS`), and their tests take users and keys of their own."""
    stack = RunningStack(chat_stack_env(tmp_path_factory.mktemp("chat") / "data", tiny_model)).start()
    yield stack
    stack.stop()


@dataclass
class ScriptedStack:
    """The whole stack in front of a scripted policy server (a GPU LLM's stand-in, SGLang's wire format)."""

    stack: RunningStack
    policy: ScriptedPolicy

    def answering(self, script: Callable[[str], str]) -> RunningStack:
        """The stack, its policy answering with `script` (a file's own: the files sharing it run one at a time)."""
        self.policy.answer = script
        return self.stack


@pytest.fixture(scope="package")
def scripted_stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScriptedStack]:
    """Shared by the protocol and agent-harness files (tests/tiers.py `SHARED_STACKS`): the heuristic judge, no
    training, bodies up to 1 MiB (Codex's first request alone is about 41 kB)."""
    with ScriptedPolicy(tiny_model, lambda prompt: "Nothing to do.") as policy:
        env = stack_env(tmp_path_factory.mktemp("scripted") / "data", model_path=tiny_model)
        env.update(
            OPENCLAW_RL_POLICY__SERVER_URLS=json.dumps([policy.url]),
            OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',
            OPENCLAW_RL_TRAINING__AUTO_START="false",
            OPENCLAW_RL_API__MAX_REQUEST_BYTES=str(1024 * 1024),
        )
        stack = RunningStack(env).start()
        yield ScriptedStack(stack, policy)
        stack.stop()
