"""Environment plugins (envs.plugins): found by entry point or named in the settings, loaded like a built-in
setting, and a broken one named in a clear error while the other settings keep working.

The example package (examples/calc-env) is installed with pip as a user would; the end-to-end run of its episodes
through the stack is in test_episodes_e2e.py."""

from __future__ import annotations

import importlib
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from activities.held_trainer import stream_settings
from envs.base import Action, ToolCallAction, UnknownTask
from envs.plugins import PluginError
from envs.registry import available, setting_config, task_source
from openclaw_rl.settings import Settings
from tests.helpers import REPO


@pytest.fixture(scope="module")
def installed_calc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [str(REPO / ".venv" / "bin" / "pip"), "install", "-q", "--no-deps", "--no-build-isolation"]
        + ["--target", str(target), str(REPO / "examples" / "calc-env")],
        check=True,
        capture_output=True,
        timeout=180,
    )
    return target


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write a module `name` with `body` on sys.path: a plugin the settings name by `name:attribute`."""

    def write(name: str, body: str) -> None:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
        monkeypatch.delitem(sys.modules, name, raising=False)  # a module of that name written by an earlier case
        importlib.invalidate_caches()

    monkeypatch.syspath_prepend(str(tmp_path))
    return write


def settings_with(**plugins: dict) -> Settings:
    return Settings(envs={"plugins": plugins})


def test_an_installed_entry_point_is_a_setting_with_its_own_options(installed_calc, monkeypatch):
    monkeypatch.syspath_prepend(str(installed_calc))
    importlib.invalidate_caches()
    settings = settings_with(calc={"max_steps": 3, "count": 4, "max_operand": 9})
    assert available(settings)[:4] == ["terminal", "toolcall", "swe", "gui"] and "calc" in available(settings)
    source = task_source("calc", settings)
    assert [t.task_id for t in source.tasks()] == ["calc/0", "calc/1", "calc/2", "calc/3"]
    assert setting_config(settings, "calc").max_steps == 3
    env = source.make("calc/2", sandboxes=None)
    question = env.reset()[-1]["content"]
    a, b, c = (int(x) for x in __import__("re").findall(r"\d+", question))
    assert max(a, b, c) <= 9  # max_operand reached the factory
    call = ToolCallAction(id="c0", name="calculator", arguments={"expression": f"{a} * {b} + {c}"})
    obs = env.step(Action(tool_calls=[call]))
    assert obs.tool_results[0].content == str(a * b + c) and not obs.done
    assert env.step(Action(text=f"\\boxed{{{a * b + c}}}")).done and env.outcome() == 1.0
    with pytest.raises(UnknownTask):
        source.make("calc/99", sandboxes=None)


def test_a_setting_nobody_declared_is_unknown():
    settings = Settings()
    assert "nosuchenv" not in available(settings)
    with pytest.raises(LookupError, match="unknown agent setting 'nosuchenv': one of terminal, toolcall, swe, gui"):
        setting_config(settings, "nosuchenv")


def test_a_factory_named_in_the_settings_overrides_and_gets_the_context(plugin_module):
    plugin_module(
        "myenv_plugin",
        """
        from envs.base import TaskInfo
        class Source:
            setting = "whatever"
            def __init__(self, ctx): self.ctx = ctx
            def tasks(self): return [{"setting": "other", "task_id": f"t{i}"} for i in range(self.ctx.options["n"])]
            def make(self, task_id, sandboxes): raise KeyError(task_id)
        def make(ctx): return Source(ctx)
        """,
    )
    settings = settings_with(mine={"factory": "myenv_plugin:make", "n": 2, "max_steps": 7})
    source = task_source("mine", settings)
    assert source.inner.ctx.max_steps == 7 and source.inner.ctx.name == "mine"
    # the rows are the plugin's setting's, whatever it wrote; its own "no such task" is the pool's UnknownTask
    assert [(t.setting, t.task_id) for t in source.tasks()] == [("mine", "t0"), ("mine", "t1")]
    with pytest.raises(UnknownTask):
        source.make("t9", None)


@pytest.mark.parametrize(
    ("body", "factory", "why"),
    [
        ("", "missing_module_xyz:make", "cannot import missing_module_xyz"),
        ("raise RuntimeError('boom at import')", "{m}:make", "cannot import .*boom at import"),
        ("def make(ctx): raise ValueError('no config')", "{m}:make", "factory .* raised ValueError: no config"),
        ("def make(ctx): return 42", "{m}:make", "not a TaskSource"),
        ("make = 3", "{m}:make", "not callable"),
        ("", "{m}:nothing", "has no nothing"),
        ("", "not a target", "not module:attribute"),
    ],
)
def test_a_plugin_that_cannot_load_is_named_and_the_others_keep_working(plugin_module, body, factory, why):
    plugin_module("broken_plugin", body)
    settings = settings_with(broken={"factory": factory.format(m="broken_plugin")})
    with pytest.raises(PluginError, match=f"environment plugin 'broken' .*{why}"):
        task_source("broken", settings)
    assert task_source("toolcall", settings).tasks()  # a built-in setting is untouched


def test_an_environment_that_breaks_the_protocol_is_named(plugin_module):
    plugin_module(
        "sloppy_plugin",
        """
        class Env:
            def reset(self): return "hello"
            def tools(self): return []
            def step(self, action): return {"tool_results": "nope"}
            def outcome(self): return float("nan")
            def close(self): pass
        class Half:
            def reset(self): return []
        class Source:
            def tasks(self): return [{"task_id": 3}]
            def make(self, task_id, sandboxes): return Half() if task_id == "half" else Env()
        def make(ctx): return Source()
        """,
    )
    source = task_source("sloppy", settings_with(sloppy={"factory": "sloppy_plugin:make"}))
    with pytest.raises(PluginError, match="tasks\\(\\) did not return TaskInfo rows"):
        source.tasks()
    with pytest.raises(PluginError, match="without tools\\(\\), step\\(\\), outcome\\(\\), close\\(\\)"):
        source.make("half", None)
    env = source.make("t", None)
    with pytest.raises(PluginError, match="reset\\(\\) must return OpenAI messages"):
        env.reset()
    with pytest.raises(PluginError, match="step\\(\\) did not return an Observation"):
        env.step(Action(text="x"))
    with pytest.raises(PluginError, match="outcome\\(\\) returned nan"):
        env.outcome()


def test_plugin_setting_names_are_checked():
    with pytest.raises(ValidationError, match="built-in setting"):
        settings_with(terminal={"factory": "x:y"})
    with pytest.raises(ValidationError, match="lowercase letters"):
        settings_with(**{"My-Env": {"factory": "x:y"}})


def test_a_plugin_stream_trains_with_the_general_agent_kl_unless_set():
    settings = Settings(training={"source_weights": {"personal": 1.0, "calc": 1.0}})
    assert math.isclose(stream_settings(settings, "calc").kl_coef, 0.01)
    assert stream_settings(settings, "personal").kl_coef is None  # training.kl_coef, as before
    tuned = Settings(training={"streams": {"calc": {"kl_coef": 0.0, "advantage_scale": 2.0}}})
    assert stream_settings(tuned, "calc").kl_coef == 0.0 and stream_settings(tuned, "calc").advantage_scale == 2.0
