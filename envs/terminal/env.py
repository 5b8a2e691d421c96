"""A terminal episode: a task's workspace in a sandbox, shell and file tools, the task's tests as the verdict.

Everything the agent sends is answered, never raised: a malformed call, an
unknown tool, a bad path or a command that hangs all come back as an error
result the policy reads, and the episode goes on. Exceptions are kept for what
is not the agent's doing (a task whose setup fails, a closed sandbox).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import structlog

import envs.terminal.tools as tools
from envs.base import Action, Observation, ToolCallAction, ToolResult
from envs.sandbox import CommandResult, Sandbox, SandboxPool
from envs.terminal.mounts import mounted
from envs.terminal.task import TerminalTask
from envs.terminal.verifier import Verdict, run_checker

log = structlog.get_logger(__name__)

SETUP_WALL_S = 120.0
ORACLE_WALL_S = 120.0

SYSTEM_PROMPT = """\
You are an agent working in a Linux shell sandbox. Your working directory is /app, which holds the task's files.
There is no network access, so nothing can be downloaded or installed; the usual command-line tools (coreutils, \
grep, sed, awk, find, tar, gzip, git, sqlite3, jq) and python3 with its standard library are available.

You act only by calling tools, and you may make one or more tool calls in each step; you have at most {max_steps} \
steps. Tools:
- bash(command): run a command with bash in /app; you get its exit code, stdout and stderr. Every call starts a \
fresh shell (cd and variables do not carry over) and a command running over {wall_s:g} seconds is stopped.
- write_file(path, content): write a file under /app.
- read_file(path): read a file under /app.
- submit(): say the task is done.

Check your work, then call submit. Your work is checked once you submit or stop calling tools."""


class TaskSetupFailed(RuntimeError):
    """The task's own setup (its environment files or setup.sh) failed: the task is broken, not the agent."""


class TerminalEnv:
    setting = "terminal"

    def __init__(self, task: TerminalTask, sandboxes: SandboxPool, max_steps: int = 10):
        self.task = task
        self.pool = sandboxes
        self.max_steps = task.config.agent.max_steps or max_steps
        self.box: Sandbox | None = None
        self.verdict: Verdict | None = None
        """The checker's result once `outcome()` ran (passed and total or the reward, the checker's output)."""

    # ---- Environment ---------------------------------------------------------------
    def reset(self) -> list[dict[str, Any]]:
        self.close()
        self.verdict = None
        box = self.pool.open(self.task.task_id)
        self.box = box
        try:
            if self.task.environment_dir is not None:
                box.copy_in(self.task.environment_dir, ".")
            if self.task.setup_script is not None:
                res = self._run_script(self.task.setup_script, "/setup", SETUP_WALL_S)
                if res.exit_code != 0:
                    raise TaskSetupFailed(
                        f"task {self.task.task_id}: setup.sh exited {res.exit_code}"
                        f"{f' ({res.limit} limit)' if res.limit else ''}: {res.report()[-2000:]}"
                    )
        except BaseException:
            self.close()
            raise
        system = SYSTEM_PROMPT.format(max_steps=self.max_steps, wall_s=self.pool.limits.wall_s)
        return [{"role": "system", "content": system}, {"role": "user", "content": self.task.instruction}]

    def tools(self) -> list[dict[str, Any]]:
        return tools.definitions(self.pool.limits.wall_s)

    def step(self, action: Action) -> Observation:
        box = self._open_box()
        results: list[ToolResult] = []
        submitted = False
        for call in action.tool_calls:
            if submitted:
                results.append(_error(call, "not run: submit had already ended the episode"))
                continue
            if call.name == "submit":  # takes no arguments; any given are ignored (tools.SubmitArgs)
                submitted = True
                results.append(ToolResult(call_id=call.id, name=call.name, content="submitted"))
                continue
            results.append(self._call(box, call))
        user_message = None
        if action.parse_error:
            user_message = (
                f"Your tool call could not be parsed: {action.parse_error}. Send tool calls as JSON objects with"
                ' "name" and "arguments", e.g. {"name": "bash", "arguments": {"command": "ls -la"}}.'
            )
        if submitted:
            return Observation(tool_results=results, user_message=user_message, done=True, done_reason="submitted")
        if not action.tool_calls and not action.parse_error:
            return Observation(done=True, done_reason="answered")
        return Observation(tool_results=results, user_message=user_message)

    def outcome(self) -> float:
        """The fraction of the task's checker tests that pass, or test.sh's reward (computed once; later calls
        return the same). WorkspaceUnreachable when the sandbox could not reach the workspace to check it."""
        if self.verdict is None:
            box = self._open_box()
            self.verdict = run_checker(box, self.task.tests_dir, self.task.config.verifier.timeout_s, self.task.checker)
            log.info(
                "terminal.verdict",
                task=self.task.task_id,
                checker=self.verdict.checker,
                passed=self.verdict.passed,
                total=self.verdict.total,
                reward=self.verdict.reward,
                exit_code=self.verdict.exit_code,
                limit=self.verdict.limit,
                invalid=self.verdict.reason or None,
            )
        return self.verdict.outcome

    def close(self) -> None:
        if self.box is not None:
            self.box.close()
            self.box = None

    def run_command(self, command: str) -> tuple[int, str]:
        """A client-driven episode's command (envs.base.Shell), in /app with the sandbox's limits."""
        res = self._open_box().run(command)
        return res.exit_code, res.report()

    # ---- oracle ----------------------------------------------------------------------
    def run_oracle(self) -> CommandResult:
        """Run the task's solution/solve.sh in /app (the reference solution: every test should then pass)."""
        if self.task.solution_dir is None:
            raise FileNotFoundError(f"task {self.task.task_id} has no solution/solve.sh")
        self._open_box()
        return self._run_script(self.task.solution_dir / "solve.sh", "/solution", ORACLE_WALL_S)

    # ---- internals ---------------------------------------------------------------------
    def _open_box(self) -> Sandbox:
        if self.box is None:
            raise RuntimeError("the environment is not reset (or is closed)")
        return self.box

    def _run_script(self, script: Path, inside: str, wall_s: float) -> CommandResult:
        """Run a task script (setup, oracle) from a read-only copy of its folder; cwd /app."""
        box = self._open_box()
        with mounted(box, inside, script.parent) as m:
            return box.run(f"bash {shlex.quote(m.path + '/' + script.name)}", wall_s=wall_s, ro_binds=m.ro_binds)

    def _call(self, box: Sandbox, call: ToolCallAction) -> ToolResult:
        try:
            args = tools.parse_args(call.name, call.arguments)
            if isinstance(args, tools.BashArgs):
                res = box.run(args.command)
                body = res.report() or "(no output)"
                return ToolResult(
                    call_id=call.id,
                    name=call.name,
                    content=f"{body}\n[exit code {res.exit_code}]",
                    exit_code=res.exit_code,
                    error=res.limit is not None,
                )
            if isinstance(args, tools.WriteFileArgs):
                rel = shlex.quote(tools.workspace_relative(args.path))
                res = box.run(f'mkdir -p -- "$(dirname -- {rel})" && cat > {rel}', stdin=args.content)
                if res.exit_code != 0:
                    return _error(call, res.report() or f"write failed (exit code {res.exit_code})")
                size = len(args.content.encode())
                return ToolResult(call_id=call.id, name=call.name, content=f"wrote {size} bytes to {args.path}")
            if isinstance(args, tools.ReadFileArgs):
                res = box.run(f"cat -- {shlex.quote(tools.workspace_relative(args.path))}")
                if res.exit_code != 0:
                    return _error(call, res.report() or f"read failed (exit code {res.exit_code})")
                return ToolResult(call_id=call.id, name=call.name, content=res.stdout)
        except ValueError as e:  # bad tool, bad arguments, path outside /app, NUL byte in a command
            return _error(call, str(e))
        except OSError as e:  # a command too long for the kernel to execute
            return _error(call, f"the command could not be started: {e.strerror or e}")
        raise AssertionError(f"no handler for tool {call.name}")  # ARGS and the handlers above disagree


def _error(call: ToolCallAction, message: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=f"error: {message}", error=True)
