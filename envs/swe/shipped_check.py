"""`python -m envs.swe.shipped_check`: every shipped SWE task, both ways, through the sandbox episodes use.

For each task: the unpatched repository must fail its FAIL_TO_PASS tests and pass its PASS_TO_PASS ones (outcome
-1), and the oracle patch must resolve it (+1), checked by the real verifier in the real sandbox. A full check passes
once and is recorded in `envs/swe/tasks/checked.json` with the digest of what it depends on: the task files, the
code that runs them (envs/swe's modules, the sandbox, the JUnit reader) and the sandbox's Python and pytest. While
that digest holds, the test suite checks a fixed sample (the tasks and the code are the same bytes as when all
passed); any change to them makes the suite check every task again until a full run records the new digest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from envs.sandbox import SandboxLimits, SandboxPool
from envs.swe.source import BUILTIN_DIR
from envs.swe.task import SweInstance

RECORD = BUILTIN_DIR / "checked.json"
ENVS = Path(__file__).resolve().parents[1]
CODE = [ENVS / "swe", ENVS / "sandbox.py", ENVS / "terminal" / "verifier.py"]
SANDBOX_PYTHON = "/usr/bin/python3"
WALL_S = 10.0


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p != RECORD)


def digest() -> str:
    """What a check of the shipped tasks depends on: their files, the code that runs them, the sandbox's Python."""
    h = hashlib.sha256()
    code = [p for root in CODE for p in _files(root) if p.suffix == ".py" and BUILTIN_DIR not in p.parents]
    for path in [*_files(BUILTIN_DIR), *code]:  # the tasks' repositories hold .py files of their own: counted once
        h.update(str(path.relative_to(ENVS)).encode() + b"\0")
        h.update(path.read_bytes().replace(b"\r\n", b"\n") + b"\0")
    try:
        versions = subprocess.run(
            [SANDBOX_PYTHON, "-c", "import sys, pytest; print(sys.version, pytest.__version__)"],
            capture_output=True, text=True, timeout=60,
        ).stdout  # fmt: skip
    except OSError:
        versions = "no sandbox python"
    h.update(versions.encode())
    return h.hexdigest()[:16]


def recorded() -> dict:
    try:
        return json.loads(RECORD.read_text())
    except (OSError, ValueError):
        return {}


def check(inst: SweInstance, sandboxes: SandboxPool) -> str | None:
    """None when the unpatched repository fails the task as stated and the oracle resolves it; else what went wrong."""
    from envs.swe import SweEnv

    env, task_id = SweEnv(inst, sandboxes), inst.instance_id
    try:
        env.reset()
        if env.outcome() != -1.0:
            return f"{task_id}: the unpatched repository resolves the task"
        failed = set(env.verdict.failed)
        if not set(inst.FAIL_TO_PASS) <= failed or failed & set(inst.PASS_TO_PASS):
            return f"{task_id}: unpatched, failed {sorted(failed)}"
        env.verdict = None  # the oracle on the same tree: the verifier puts the test files back first
        applied = env.run_oracle()
        if applied.exit_code != 0:
            return f"{task_id}: the oracle patch does not apply: {applied.report()}"
        if env.outcome() != 1.0:
            return f"{task_id}: the oracle does not resolve it: {env.verdict.failed} {env.verdict.report[-800:]}"
    finally:
        env.close()
    return None


def check_all(instances: list[SweInstance], sandboxes: SandboxPool, workers: int = 4) -> list[str]:
    """Both checks of each task, in parallel threads (the sandbox commands are separate processes)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return [p for p in pool.map(lambda i: check(i, sandboxes), instances) if p]


def sample(instances: list[SweInstance], every: int = 12) -> list[SweInstance]:
    """A fixed spread of the tasks: each handwritten repository's, and every `every`-th generated one (by id)."""
    ordered = sorted(instances, key=lambda i: i.instance_id)
    generated = [i for i in ordered if i.instance_id.startswith("humaneval__")]
    return [i for i in ordered if not i.instance_id.startswith("humaneval__")] + generated[::every]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m envs.swe.shipped_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args(argv)
    from envs.swe import SweTasks

    instances = SweTasks().instances()
    root = Path(tempfile.mkdtemp(prefix="oc-swe-check-", dir="/tmp"))  # /tmp: sandbox uids can traverse it
    started = time.monotonic()
    try:
        problems = check_all(instances, SandboxPool(root, SandboxLimits(wall_s=WALL_S, memory_mb=1024)), args.workers)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    took = time.monotonic() - started
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} of {len(instances)} tasks failed their check; nothing recorded")
        return 1
    RECORD.write_text(json.dumps({"digest": digest(), "tasks": len(instances)}, indent=1) + "\n")
    print(f"{len(instances)} tasks, unpatched and oracle each, passed in {took:.0f} s: recorded in {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
