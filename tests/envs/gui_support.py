"""What the GUI tests share: whether a browser can run here (installing Debian's when it can), and oracle play."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess

from envs.base import Action, ToolCallAction
from envs.gui import oracle
from envs.gui.browser import BrowserMissing, find_binaries

PACKAGES = ["chromium", "chromium-driver"]


@functools.cache
def gui_problem() -> str | None:
    """Why the GUI tests cannot run, or None. A missing browser is installed as the Makefile's system-deps would."""
    if importlib.util.find_spec("miniwob") is None:
        return "the miniwob package is not installed (it is a main dependency: pip install -e .)"
    try:
        find_binaries()
        return None
    except BrowserMissing:
        pass
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]
        if subprocess.run(install, env=env, capture_output=True, timeout=900).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
            subprocess.run(install, env=env, capture_output=True, timeout=900)
    try:
        find_binaries()
        return None
    except BrowserMissing as exc:
        return f"{exc}; installing them failed or needs root"


def calls_action(calls: list[tuple[str, dict]], prefix: str = "c") -> Action:
    return Action(tool_calls=[ToolCallAction(id=f"{prefix}{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)])


def play(env, wrong: bool = False, max_steps: int = 4) -> tuple[float, list]:
    """Run an oracle (or its wrong twin) through `env` from reset; the outcome and the observations."""
    opening = env.reset()[1]["content"]
    utterance, text = opening.split("\n\n", 1)
    observations = []
    for step in range(max_steps):
        calls = oracle.next_calls(env.task.name, utterance, oracle.latest_listing(text), wrong)
        obs = env.step(calls_action(calls, f"s{step}c"))
        observations.append(obs)
        text = obs.text()
        if obs.done:
            break
    return env.outcome(), observations
