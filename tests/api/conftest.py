from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers import CLI, REPO, RunningStack, stack_env


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
    after another (tests/tiers.py `SHARED_STACK_FILES`), and their tests take users and keys of their own."""
    stack = RunningStack(chat_stack_env(tmp_path_factory.mktemp("chat") / "data", tiny_model)).start()
    yield stack
    stack.stop()
