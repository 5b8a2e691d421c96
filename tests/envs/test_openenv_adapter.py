"""OpenEnv environments as an episode setting (envs.openenv_adapter), in-process and over OpenEnv's own server.

The environment is written against OpenEnv's public API (openenv-core: `Environment`, `Action`, `Observation`),
loaded by the env pool's plugin loader as a user's settings would name it, and driven through the protocol every
setting speaks (reset, tools, step, outcome, close).
"""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

from envs.base import Action, ToolCallAction, UnknownTask
from envs.registry import task_source
from openclaw_rl.settings import Settings
from tests.helpers import free_port

ECHO = textwrap.dedent(
    '''
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State


    class EchoAction(Action):
        message: str


    class EchoObservation(Observation):
        echoed: str = ""


    class EchoEnv(Environment):
        """Say the secret word: reward 1 per step that says it, done after two steps."""

        SUPPORTS_CONCURRENT_SESSIONS = True

        def reset(self, seed=None, episode_id=None, **kw):
            self._state = State(episode_id=episode_id, step_count=0)
            return EchoObservation(echoed=f"say 'hello' (seed {seed})")

        def step(self, action, timeout_s=None, **kw):
            self._state.step_count += 1
            return EchoObservation(
                echoed=action.message, reward=float(action.message == "hello"), done=self._state.step_count >= 2
            )

        @property
        def state(self):
            return self._state
    '''
)


@pytest.fixture(scope="module")
def echo_module(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("openenv")
    (root / "echo_env_mod.py").write_text(ECHO)
    sys.path.insert(0, str(root))
    yield "echo_env_mod"
    sys.path.remove(str(root))


def settings_with(tmp_path: Path, **plugin: object) -> Settings:
    return Settings(data_dir=tmp_path, envs={"plugins": {"echo": {"factory": "envs.openenv_adapter:source", **plugin}}})


def call(name: str, **arguments: object) -> Action:
    return Action(text="", tool_calls=[ToolCallAction(id="c1", name=name, arguments=arguments)])


def play(source) -> tuple[list[str], float]:
    assert [t.task_id for t in source.tasks()] == ["seed/0", "seed/1", "seed/2"]
    with pytest.raises(UnknownTask):
        source.make("seed/9", None)
    env = source.make("seed/1", None)
    opening = env.reset()
    assert "seed 1" in opening[-1]["content"]
    params = env.tools()[0]["function"]["parameters"]
    assert params["properties"]["message"]["type"] == "string" and "metadata" not in params["properties"]
    seen = []
    bad = env.step(call("step", message=7))  # the environment's schema refuses it: an error result, no crash
    assert bad.tool_results[0].error and not bad.done
    first = env.step(call("step", message="hello"))
    seen.append(first.tool_results[0].content)
    assert not first.done and "reward" not in first.tool_results[0].content
    last = env.step(call("step", message="bye"))
    seen.append(last.tool_results[0].content)
    assert last.done
    out = env.outcome()
    env.close()
    return seen, out


def test_an_in_process_openenv_environment_is_a_setting(echo_module, tmp_path):
    s = settings_with(tmp_path, env=f"{echo_module}:EchoEnv", action=f"{echo_module}:EchoAction", seeds=3)
    seen, outcome = play(task_source("echo", s))
    assert '"echoed": "hello"' in seen[0] and outcome == 1.0  # rewards summed: 1 + 0


def test_an_openenv_server_is_a_setting_through_its_websocket_session(echo_module, tmp_path):
    import uvicorn
    from openenv.core.env_server.http_server import create_app

    mod = __import__(echo_module)
    app = create_app(mod.EchoEnv, mod.EchoAction, mod.EchoObservation, env_name="echo", max_concurrent_envs=4)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.1)
        s = settings_with(tmp_path, url=f"http://127.0.0.1:{port}", seeds=3, outcome="last")
        seen, outcome = play(task_source("echo", s))
        assert '"echoed": "hello"' in seen[0] and outcome == 0.0  # the last reward
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_misconfigured_openenv_setting_is_a_plugin_error_naming_it(tmp_path):
    from envs.plugins import PluginError

    with pytest.raises(PluginError, match="echo"):
        task_source("echo", settings_with(tmp_path, env="nosuch_module:Env", action="nosuch_module:A"))
    with pytest.raises(PluginError, match="either `env`"):
        task_source("echo", settings_with(tmp_path))


def test_the_documented_settings_run_as_written(echo_module, tmp_path):
    """docs/environments.md's OpenEnv example, with its module names pointed at this test's environment."""
    import re
    import tomllib

    from tests.helpers import REPO

    doc = (REPO / "docs" / "environments.md").read_text().split("## OpenEnv environments", 1)[1]
    block = re.search(r"```toml\n(.*?)```", doc, re.DOTALL).group(1)
    plugin = tomllib.loads(block.replace("my_envs.echo", echo_module))["envs"]["plugins"]["echo"]
    assert plugin.pop("factory") == "envs.openenv_adapter:source"
    plugin["seeds"] = 3  # the tasks `play` expects
    seen, outcome = play(task_source("echo", settings_with(tmp_path, **plugin)))
    assert '"echoed": "hello"' in seen[0] and outcome == 1.0
