"""The product from a bare install, the way deploy/docker/* install it: a clean virtualenv, torch pinned first (the
Makefile's pin), then `pip install <checkout>` with no extras, not editable; everything then runs from outside the
checkout, so only the installed package is importable. The CLI, every image's entry module (and every other product
module, or an error naming the extra it needs), `up` until healthy, a key and one chat turn.

About 3 minutes on 2 shared cores (pip with bytecode about 95 s, the imports 35 s, `up` to healthy 45 s, its stop
15 s); the timings are printed (pytest -s shows them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from stack.running import isolated_env
from tests.deploy.test_declared_dependencies import FIRST_PARTY, PYPROJECT, Declared
from tests.helpers import REPO, RunningStack

TORCH_PIN = re.search(r"pip install -q (torch==\S+)", (REPO / "Makefile").read_text()).group(1)
DOCKERFILES = sorted((REPO / "deploy" / "docker").glob("Dockerfile.*"))
ENTRY_MODULES = {"api": ("api.main", "uvicorn"), "worker": ("workers.main", "workers.pools")}
"""What each image's `openclaw-rl <command>` imports beyond cli.main (cli/main.py: cmd_api, cmd_worker)."""
NOT_SHIPPED = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.pyc", "build", "*.egg-info", ".pytest_cache", "site", ".whl", ".gl"
)
IMPORT_ALL = """
import importlib, json, pkgutil, sys
failed, count = {}, 0
def load(names):
    global count
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed[name] = f"{type(exc).__name__}: {exc}"
        count += 1
entry, roots = sys.argv[1].split(","), sys.argv[2].split(",")
load(entry)  # first, before anything else is imported
every = [m.name for r in roots for m in pkgutil.walk_packages(importlib.import_module(r).__path__, r + ".")]
load(sorted({*roots, *every} - {*entry} - {m for m in every if m.endswith(".__main__")}))
print(json.dumps({"count": count, "failed": failed, "cli": importlib.import_module("cli").__file__}))
"""


@dataclass
class Bare:
    root: Path
    venv: Path
    env: dict[str, str]
    """A child's environment: nothing of the checkout or the dev virtualenv on its paths."""
    seconds: dict[str, float] = field(default_factory=dict)

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def run(self, *argv: str, timeout: float = 300, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            list(argv), cwd=self.root, env=env or self.env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        return done.stdout

    def timed(self, what: str, *argv: str, timeout: float = 300) -> None:
        start = time.monotonic()
        self.run(*argv, timeout=timeout)
        self.seconds[what] = round(time.monotonic() - start, 1)


def _clean(env: dict[str, str], venv: Path) -> dict[str, str]:
    env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Bare:
    root = tmp_path_factory.mktemp("bare")
    venv = root / "venv"
    b = Bare(root, venv, _clean(dict(os.environ), venv))
    start = time.monotonic()
    shutil.copytree(REPO, root / "src", ignore=NOT_SHIPPED)  # pip builds in the source tree: a copy, as COPY . .
    b.seconds["copy"] = round(time.monotonic() - start, 1)
    # No pip inside (ensurepip costs seconds): this interpreter's pip installs into it (`pip --python`).
    b.timed("venv", sys.executable, "-m", "venv", "--without-pip", str(venv))
    # Bytecode compiled, as pip does in the images: without it every service of `up` compiles torch and transformers
    # from source at once, and on 2 loaded cores the trainer worker missed the stack probe's 30 s (CI, 2026-11-27).
    pip = (sys.executable, "-m", "pip", "--python", b.bin("python"), "install", "-q")
    b.timed("torch", *pip, TORCH_PIN)
    b.timed("openclaw-rl", *pip, str(root / "src"))
    print(f"\nbare install (seconds): {b.seconds}")
    return b


def test_the_images_install_the_makefiles_torch_pin_then_the_package():
    for dockerfile in DOCKERFILES:
        text = dockerfile.read_text()
        if "TRAINER_IMAGE=pytorch/" not in text:  # the trainer's image brings its CUDA torch
            # The CPU wheel's index by default (deploy/build-images.sh --offline-base serves the local wheel instead).
            assert "ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu\n" in text, dockerfile
            assert f'pip install --index-url "${{TORCH_INDEX}}" {TORCH_PIN}' in text, dockerfile
        installs = re.findall(r"pip install (\S+)", text)
        assert {i for i in installs if i.startswith((".", "'."))} <= {".", "'.[megatron]'"}, (dockerfile, installs)


def test_the_installed_distribution_requires_what_pyproject_declares(bare: Bare):
    script = "import importlib.metadata as m, json; print(json.dumps(m.requires('openclaw-rl')))"
    requires = json.loads(bare.run(bare.bin("python"), "-c", script))
    base, extras = [], {}
    for line in requires:
        found = re.search(r"""extra\s*==\s*["']([^"']+)""", line)
        (extras.setdefault(found.group(1), []) if found else base).append(line)
    installed = Declared.of({"dependencies": base, "optional-dependencies": extras})
    assert installed == Declared.of(PYPROJECT["project"])


def test_the_cli_and_every_image_entry_module_import_from_the_bare_install(bare: Bare):
    assert "usage: openclaw-rl" in bare.run(bare.bin("openclaw-rl"), "--help", timeout=120)
    entry = {"cli.main"}
    for dockerfile in DOCKERFILES:
        (cmd,) = re.findall(r"^CMD (\[.*\])$", dockerfile.read_text(), re.M)
        argv = json.loads(cmd)
        assert argv[0] == "openclaw-rl" and argv[1] in ENTRY_MODULES, (dockerfile.name, argv)
        entry |= set(ENTRY_MODULES[argv[1]])
    report = json.loads(
        bare.run(bare.bin("python"), "-c", IMPORT_ALL, ",".join(sorted(entry)), ",".join(sorted(FIRST_PARTY)))
    )
    assert report["cli"].startswith(str(bare.venv)), f"cli imported from {report['cli']}, not the install"
    assert report["count"] > 200
    failed = report["failed"]
    assert not {m: failed[m] for m in entry if m in failed}, failed
    unexplained = {m: why for m, why in failed.items() if "pip install 'openclaw-rl[" not in why}
    assert not unexplained, f"product modules that fail in a bare install without naming an extra: {unexplained}"


def test_up_to_healthy_and_a_chat_turn_from_the_bare_install(bare: Bare):
    env = _clean(isolated_env(bare.root / "data"), bare.venv)
    start = time.monotonic()
    stack = RunningStack(env, command=[bare.bin("openclaw-rl")], cwd=bare.root).start(timeout=300)
    try:
        up_s = time.monotonic() - start
        assert httpx.get(f"{stack.api}/readyz", timeout=10).status_code == 200
        key = stack.cli("keys", "create", "--user", "bare").split()[0]
        reply = httpx.post(
            f"{stack.api}/v1/chat/completions",
            json={"model": "policy", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8},
            headers={"Authorization": f"Bearer {key}"},
            timeout=120,
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"]
        print(f"\nbare install: up in {up_s:.1f} s, a chat turn answered")
    finally:
        assert stack.stop() == 0, stack.output()
