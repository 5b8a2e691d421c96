"""An SWE episode: a repository at /app in a sandbox, one shell command per step, hidden tests as the verdict.

The repository's starting state is copied in and committed to a fresh git
repository, so the agent has `git diff` and `git status` against the start
(whatever history a task's own repository has stays outside). Everything the
agent sends is answered, never raised: a reply without exactly one bash block
gets a format error, a command that fails or hangs comes back with its return
code. Exceptions are kept for what is not the agent's doing (a repository that
cannot be checked out, a closed sandbox).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import structlog

from envs.base import Action, Observation
from envs.sandbox import CommandResult, Sandbox, SandboxPool
from envs.swe import protocol
from envs.swe.task import SweInstance, patched_files, snapshot
from envs.swe.verifier import SweVerdict, run_hidden_tests

log = structlog.get_logger(__name__)

SETUP_WALL_S = 300.0
ORACLE_WALL_S = 120.0
# Fixed identity and dates: the base commit's hash is the same in every episode of a task.
GIT_INIT = (
    "export GIT_AUTHOR_DATE='2024-01-01T00:00:00Z' GIT_COMMITTER_DATE='2024-01-01T00:00:00Z'"
    " && git init -q -b main && git config user.name 'SWE agent' && git config user.email agent@sandbox.invalid"
    " && git add -A && git commit -q --no-verify -m base"
)


class TaskSetupFailed(RuntimeError):
    """The task's repository could not be set up: the task is broken, not the agent."""


class SweEnv:
    setting = "swe"

    def __init__(self, instance: SweInstance, sandboxes: SandboxPool, max_steps: int = 20):
        self.instance = instance
        self.pool = sandboxes
        self.max_steps = max_steps
        self.box: Sandbox | None = None
        self.steps = 0
        self.submitted = False
        self.verdict: SweVerdict | None = None
        """The hidden tests' result once `outcome()` ran."""
        self._pristine: dict[str, bytes | None] = {}

    # ---- Environment ---------------------------------------------------------------
    def reset(self) -> list[dict[str, Any]]:
        self.close()
        self.steps, self.submitted, self.verdict = 0, False, None
        box = self.pool.open(self.instance.instance_id.replace("/", "_"))
        self.box = box
        try:
            with tempfile.TemporaryDirectory(prefix="oc-swe-") as tmp:
                repo = Path(tmp)
                snapshot(self.instance, repo)
                self._pristine = {
                    rel: (repo / rel).read_bytes() if (repo / rel).is_file() else None
                    for rel in patched_files(self.instance.test_patch)
                }
                box.copy_in(repo, ".")
            res = box.run(GIT_INIT, wall_s=SETUP_WALL_S)
            if res.exit_code != 0:
                raise TaskSetupFailed(f"{self.instance.instance_id}: git init failed: {res.report()[-2000:]}")
        except BaseException:
            self.close()
            raise
        prompt = protocol.INSTANCE_PROMPT.format(
            problem_statement=self.instance.problem_statement.strip(),
            wall_s=self.pool.limits.wall_s,
            max_steps=self.max_steps,
            submit=protocol.SUBMIT_COMMAND,
        )
        return [{"role": "system", "content": protocol.SYSTEM_PROMPT}, {"role": "user", "content": prompt}]

    def tools(self) -> list[dict[str, Any]]:
        return []  # the protocol is plain text: a bash block in the reply

    def step(self, action: Action) -> Observation:
        box = self._open_box()
        self.steps += 1
        left = self.max_steps - self.steps
        blocks = protocol.commands(action.text)
        if len(blocks) != 1:
            msg = protocol.format_error(len(blocks), len(action.tool_calls), action.parse_error)
            return Observation(user_message=msg)
        try:
            res = box.run(blocks[0])
        except (ValueError, OSError) as e:  # a NUL byte in the command, a command too long to execute
            res = CommandResult(exit_code=126, stdout="", stderr=f"the command could not be started: {e}", duration_s=0)
        if protocol.is_submission(res):
            self.submitted = True
            return Observation(
                user_message=protocol.observation(res.exit_code, protocol.output_of(res)),
                done=True,
                done_reason="submitted",
            )
        return Observation(user_message=protocol.observation(res.exit_code, protocol.output_of(res), left))

    def outcome(self) -> float:
        """+1 if the hidden tests (FAIL_TO_PASS and PASS_TO_PASS) all pass on the working tree, else -1."""
        if self.verdict is None:
            self.verdict = run_hidden_tests(self._open_box(), self.instance, self._pristine)
            log.info(
                "swe.verdict",
                instance_id=self.instance.instance_id,
                resolved=self.verdict.resolved,
                applied=self.verdict.applied,
                failed=self.verdict.failed[:10],
            )
        return self.verdict.outcome

    def run_command(self, command: str) -> tuple[int, str]:
        """A client-driven episode's command (envs.base.Shell): what a bash block of a step would run."""
        res = self._open_box().run(command)
        return res.exit_code, protocol.output_of(res)

    def close(self) -> None:
        if self.box is not None:
            self.box.close()
            self.box = None

    # ---- oracle ----------------------------------------------------------------------
    def run_oracle(self) -> CommandResult:
        """Apply the instance's fix (`patch`) to /app: every hidden test should then pass."""
        return self._open_box().run("git apply --whitespace=nowarn -", stdin=self.instance.patch, wall_s=ORACLE_WALL_S)

    def _open_box(self) -> Sandbox:
        if self.box is None:
            raise RuntimeError("the environment is not reset (or is closed)")
        return self.box
