"""The SWE verdict: the hidden tests applied to the agent's working tree, then FAIL_TO_PASS and PASS_TO_PASS run.

As SWE-bench's harness does, the files the test patch touches are first put
back as they were at the start (the agent may have edited or deleted them), so
the patch applies and the tests are the task's own. The patch goes in through
stdin and the JUnit report to a folder bound only for this command: neither is
ever visible to the agent. The tests run the way a project runs its own, with
`python3 -m pytest` from the repository root (so its modules import); the
verdict is +1 only if every listed test ran and passed.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from pydantic import BaseModel

from envs.sandbox import Sandbox, WorkspaceUnreachable
from envs.swe.task import SweInstance, junit_key
from envs.terminal.mounts import mounted
from envs.terminal.verifier import junit_cases

VERIFY_WALL_S = 300.0
REPORT_CHARS = 4000
RESOLVED, UNRESOLVED = 1.0, -1.0
NOT_APPLIED = 97
"""The verifier command's exit code when the test patch does not apply (pytest's own codes are 0-5)."""


class SweVerdict(BaseModel):
    applied: bool = False
    """The test patch applied."""
    failed: list[str] = []
    """Listed tests that failed, errored, were skipped or never ran."""
    exit_code: int | None = None
    limit: str | None = None
    report: str = ""
    """The tail of git apply's and pytest's output, for logs and for whoever debugs a task."""

    @property
    def resolved(self) -> bool:
        return self.applied and not self.failed

    @property
    def outcome(self) -> float:
        return RESOLVED if self.resolved else UNRESOLVED


def test_command(tests: list[str], results: str) -> str:
    ids = " ".join(shlex.quote(t) for t in tests)
    return (
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 /usr/bin/python3 -m pytest -q -p no:cacheprovider -rA"
        f" --rootdir=. --junitxml={results}/junit.xml -- {ids}"
    )


def restore(box: Sandbox, pristine: dict[str, bytes | None]) -> None:
    """Put the test patch's files back as they were at reset (a file that did not exist is removed)."""
    # Folders the agent removed come back as the sandbox's user, so git apply can write in them.
    parents = sorted(d for d in {str(Path(rel).parent) for rel in pristine} - {"."} if not box.path(d).is_dir())
    if parents:
        box.run("mkdir -p -- " + " ".join(shlex.quote(d) for d in parents))
    for rel, content in pristine.items():
        target = box.path(rel)
        if target.is_dir() and not target.is_symlink():
            continue  # the agent made a folder of it: git apply reports the clash
        if content is None:
            target.unlink(missing_ok=True)
        else:
            if target.is_symlink():
                target.unlink()
            box.write_file(rel, content)


def run_hidden_tests(box: Sandbox, inst: SweInstance, pristine: dict[str, bytes | None]) -> SweVerdict:
    try:
        restore(box, pristine)
    except (ValueError, OSError) as e:  # the agent made a test file a link out of /app, or something as odd
        return SweVerdict(report=f"the test files could not be restored: {e}")
    with mounted(box, "/results", writable=True) as results:
        # One sandbox command for both: the patch from stdin, then the tests (a distinct exit code if it fails).
        command = f"git apply --whitespace=nowarn - || exit {NOT_APPLIED}\n{test_command(inst.tests, results.path)}"
        res = box.run(command, stdin=inst.test_patch, wall_s=VERIFY_WALL_S, rw_binds=results.rw_binds)
        cases = junit_cases(results.host / "junit.xml")
    if cases is None and (why := box.unreachable()):  # bwrap never started: not the agent's -1
        raise WorkspaceUnreachable(why)
    report = res.report()[-REPORT_CHARS:]
    if res.exit_code == NOT_APPLIED and cases is None:
        return SweVerdict(exit_code=res.exit_code, report=f"the test patch does not apply: {report}")
    failed = [t for t in inst.tests if not (cases or {}).get(junit_key(t), False)]
    return SweVerdict(applied=True, failed=failed, exit_code=res.exit_code, limit=res.limit, report=report)
