"""The checker: a task's tests run in the episode's sandbox once the agent is done.

Two conventions. pytest (Terminal-Bench's): the tests/test_*.py files, outcome
= the fraction of test cases that pass, read from a JUnit report. test.sh
(Harbor's): `bash /tests/test.sh`, which writes its reward, 0..1, to
/logs/verifier/reward.txt (or {"reward": x} to reward.json).

The tests are mounted read-only at /tests only for this command, so the agent
never sees them; the JUnit XML and the reward file go to a fresh host folder
bound writable (at /results, /logs/verifier) for this command only, which the
agent never had, so it cannot forge a verdict: what it writes to those paths
during the episode lives in that command's own tmpfs and dies with it. Python
runs isolated (-I): the working directory /app is not on sys.path, so a file
the agent left there (a `pytest.py`, a `conftest.py`) cannot take the checker over.

A checker that leaves nothing to read is an invalid verdict (outcome 0, the
reason in the report), unless the sandbox's uid could not reach the workspace
at all: that is the machine's misconfiguration, raised as WorkspaceUnreachable.
"""

from __future__ import annotations

import json
import math
import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from envs.sandbox import CommandResult, Sandbox, WorkspaceUnreachable
from envs.terminal.mounts import mounted

REPORT_CHARS = 4000
REWARD_DIR = "/logs/verifier"
"""Where Harbor's test.sh writes its reward."""
REWARD_FILES = ("reward.txt", "reward.json")
"""Read in this order, as Harbor's reward parser does: reward.txt wins when both are there."""
REWARD_BYTES = 64 * 1024

Checker = Literal["pytest", "test.sh"]


class Verdict(BaseModel):
    checker: Checker = "pytest"
    passed: int = 0
    total: int = 0
    """pytest: the test cases passed, of all."""
    reward: float | None = None
    """test.sh: the reward its reward file gave, 0..1."""
    exit_code: int | None = None
    limit: str | None = None
    """The sandbox limit that stopped the checker (its wall clock: the task's verifier timeout)."""
    valid: bool = False
    """The checker ran to the end and left a readable result (a JUnit report, a reward in 0..1); else outcome 0."""
    reason: str = ""
    """Why the verdict is invalid; empty when it is valid."""
    report: str = ""
    """The tail of the checker's output (and the reason, when invalid), for logs and whoever debugs a task."""

    @property
    def outcome(self) -> float:
        if not self.valid:
            return 0.0
        if self.reward is not None:
            return self.reward
        return self.passed / self.total if self.total else 0.0


def checker_command(tests: str, results: str) -> str:
    return (
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 /usr/bin/python3 -I -m pytest -q -p no:cacheprovider -rA"
        f" --rootdir={tests} --junitxml={results}/junit.xml {tests}"
    )


def run_checker(box: Sandbox, tests_dir: Path, timeout_s: float, checker: Checker = "pytest") -> Verdict:
    """The verdict on the workspace of `box`; WorkspaceUnreachable when the sandbox could not reach it at all."""
    run = run_test_script if checker == "test.sh" else run_pytest
    verdict = run(box, tests_dir, timeout_s)
    if not verdict.valid and (why := box.unreachable()):
        raise WorkspaceUnreachable(why)
    return verdict


def run_pytest(box: Sandbox, tests_dir: Path, timeout_s: float) -> Verdict:
    with mounted(box, "/tests", tests_dir) as tests, mounted(box, "/results", writable=True) as results:
        res = box.run(
            checker_command(tests.path, results.path),
            wall_s=timeout_s,
            ro_binds=tests.ro_binds,
            rw_binds=results.rw_binds,
        )
        counts = parse_junit(results.host / "junit.xml")
    if res.limit is not None:
        return _invalid("pytest", res, f"pytest was stopped by the {res.limit.replace('_', ' ')} limit")
    if res.exit_code not in (0, 1):
        # 2: interrupted (a collection error), 3-5: internal error, usage error, nothing collected.
        return _invalid("pytest", res, f"pytest exited {res.exit_code}")
    if counts is None:
        return _invalid("pytest", res, "pytest wrote no readable JUnit report")
    passed, total = counts
    return Verdict(passed=passed, total=total, exit_code=res.exit_code, valid=True, report=_tail(res))


def run_test_script(box: Sandbox, tests_dir: Path, timeout_s: float) -> Verdict:
    """Harbor's convention: `bash /tests/test.sh` in /app; its exit code is not the verdict, its reward file is."""
    with mounted(box, "/tests", tests_dir) as tests, mounted(box, REWARD_DIR, writable=True) as logs:
        res = box.run(f"bash {tests.path}/test.sh", wall_s=timeout_s, ro_binds=tests.ro_binds, rw_binds=logs.rw_binds)
        reward, why = read_reward(logs.host)
    if res.limit == "wall_clock":  # whatever it wrote before is a partial result (Harbor: VerifierTimeoutError)
        return _invalid("test.sh", res, f"test.sh ran past the verifier's {timeout_s:g} s time limit")
    if reward is None:
        return _invalid("test.sh", res, why)
    return Verdict(
        checker="test.sh", reward=reward, exit_code=res.exit_code, limit=res.limit, valid=True, report=_tail(res)
    )


def read_reward(folder: Path) -> tuple[float | None, str]:
    """(reward, "") from the reward file test.sh left in `folder`, or (None, why there is none)."""
    for name in REWARD_FILES:
        try:
            text = _read_regular(folder / name)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as e:
            return None, f"{REWARD_DIR}/{name} cannot be read: {e}"
        try:
            value = _reward_from_text(text) if name == "reward.txt" else _reward_from_json(text)
        except ValueError as e:
            return None, f"{REWARD_DIR}/{name}: {e}"
        if not 0.0 <= value <= 1.0:
            return None, f"{REWARD_DIR}/{name}: the reward {value!r} is outside [0, 1]"
        return value, ""
    return None, f"test.sh wrote no reward file ({REWARD_DIR}/reward.txt or reward.json)"


def _reward_from_text(text: str) -> float:
    if not text.strip():
        raise ValueError("the file is empty")
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError(f"not a number: {text.strip()[:80]!r}") from None


def _reward_from_json(text: str) -> float:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(data, dict) or "reward" not in data:
        raise ValueError('not an object with a "reward" key')
    value = data["reward"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f'"reward" is not a number: {value!r}')
    return float(value)


def _read_regular(path: Path) -> str:
    """A small regular file's text. Never a link (the checker's uid made the file: it must not make the host read
    elsewhere) nor a fifo (it would block the worker)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = os.read(fd, REWARD_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > REWARD_BYTES:
        raise ValueError(f"over {REWARD_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None


def _invalid(checker: Checker, res: CommandResult, reason: str) -> Verdict:
    note = f"[checker: {reason}]"
    report = f"{res.report()}\n{note}" if res.report() else note
    return Verdict(
        checker=checker, exit_code=res.exit_code, limit=res.limit, reason=reason, report=report[-REPORT_CHARS:]
    )


def _tail(res: CommandResult) -> str:
    return res.report()[-REPORT_CHARS:]


def parse_junit(path: Path) -> tuple[int, int] | None:
    """(passed, total) test cases of a pytest JUnit report; a failure, error or skip counts as not passed."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    cases = list(root.iter("testcase"))
    passed = sum(1 for c in cases if _passed(c))
    return passed, len(cases)


def junit_cases(path: Path) -> dict[tuple[str, str], bool] | None:
    """Each test case of a pytest JUnit report, (classname, name) -> passed; None when there is no readable report.

    A failure, error or skip counts as not passed; a case reported twice (an error in teardown) passes only if
    every report of it does.
    """
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    cases: dict[tuple[str, str], bool] = {}
    for c in root.iter("testcase"):
        key = (c.get("classname", ""), c.get("name", ""))
        cases[key] = cases.get(key, True) and _passed(c)
    return cases


def _passed(case: ET.Element) -> bool:
    return not any(ch.tag in ("failure", "error", "skipped") for ch in case)
