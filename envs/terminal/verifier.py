"""The checker: a task's pytest tests run in the episode's sandbox once the agent is done.

The tests are mounted read-only at /tests only for this command, so the agent
never sees them; the JUnit XML goes to a host folder bound at /results, which the
agent never had either, so it cannot forge a verdict. Python runs isolated (-I):
the working directory /app is not on sys.path, so a file the agent left there
(a `pytest.py`, a `conftest.py`) cannot take the checker over.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from pydantic import BaseModel

from envs.sandbox import Sandbox
from envs.terminal.mounts import mounted

REPORT_CHARS = 4000


class Verdict(BaseModel):
    passed: int = 0
    total: int = 0
    exit_code: int | None = None
    limit: str | None = None
    """The sandbox limit that stopped the checker (its wall clock: the task's verifier timeout)."""
    valid: bool = False
    """pytest ran the tests to the end (exit 0 or 1) and wrote its report; otherwise the outcome is 0."""
    report: str = ""
    """The tail of pytest's output, for logs and for whoever debugs a task."""

    @property
    def outcome(self) -> float:
        return self.passed / self.total if self.valid and self.total else 0.0


def checker_command(tests: str, results: str) -> str:
    return (
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 /usr/bin/python3 -I -m pytest -q -p no:cacheprovider -rA"
        f" --rootdir={tests} --junitxml={results}/junit.xml {tests}"
    )


def run_checker(box: Sandbox, tests_dir: Path, timeout_s: float) -> Verdict:
    with mounted(box, "/tests", tests_dir) as tests, mounted(box, "/results", writable=True) as results:
        res = box.run(
            checker_command(tests.path, results.path),
            wall_s=timeout_s,
            ro_binds=tests.ro_binds,
            rw_binds=results.rw_binds,
        )
        counts = parse_junit(results.host / "junit.xml")
    report = res.report()[-REPORT_CHARS:]
    if counts is None or res.limit is not None or res.exit_code not in (0, 1):
        # 2: interrupted (a collection error), 3-5: internal error, usage error, nothing collected.
        return Verdict(exit_code=res.exit_code, limit=res.limit, report=report)
    passed, total = counts
    return Verdict(passed=passed, total=total, exit_code=res.exit_code, valid=True, report=report)


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
