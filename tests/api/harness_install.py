"""The harnesses as users install them, for tests/api/test_harness_*.py: the Codex CLI from the npm registry and
Hermes from PyPI, pinned, each into a folder of `.harnesses/` (git-ignored; `make harnesses` fills it, `make install`
runs it). A test installs what is missing there itself, so a fresh checkout needs only npm and Python's venv."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

CODEX_VERSION = "0.171.0"
HERMES_VERSION = "0.19.0"
HARNESSES = Path(os.environ.get("OPENCLAW_RL_HARNESSES", REPO / ".harnesses"))


def docs_block(lang: str) -> str:
    """The ```lang block of docs/protocol-openai-responses.md: the harness configs the tests run as written."""
    page = (REPO / "docs" / "protocol-openai-responses.md").read_text()
    return re.search(rf"```{lang}\n(.*?)```", page, re.DOTALL).group(1)


def codex_bin() -> Path:
    """`codex` from `npm install @openai/codex@CODEX_VERSION`, installed once."""
    folder = HARNESSES / f"codex-{CODEX_VERSION}"
    binary = folder / "node_modules" / ".bin" / "codex"
    if not binary.exists():
        npm = shutil.which("npm")
        assert npm, "npm is needed to install the Codex CLI (make system-deps installs nodejs and npm)"
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), f"@openai/codex@{CODEX_VERSION}"],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return binary


def hermes_bin() -> Path:
    """`hermes` from `pip install hermes-agent==HERMES_VERSION` in a venv of its own: it pins exact versions of
    openai, pydantic, fastapi, httpx... that differ from this project's, so it cannot share our venv."""
    folder = HARNESSES / f"hermes-{HERMES_VERSION}"
    binary = folder / "bin" / "hermes"
    if not binary.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True, timeout=300)
        subprocess.run(
            [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", f"hermes-agent=={HERMES_VERSION}"],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return binary
