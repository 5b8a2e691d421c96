"""A ReTool-style math episode: a question, a sandboxed `python` tool, and a `\\boxed{}` answer checked exactly.

Every agent mistake is answered, never raised: a malformed call, an unknown tool,
missing code, refused code, a crash or a hang come back as an error result the
policy reads, and the episode goes on. The first step without tool calls is the
final answer. The sandbox is opened on the first `python` call, so an episode
that never calls the tool (or a worker that only lists tasks) needs none; a
`python` call without a sandbox pool is a worker misconfiguration and raises.
"""

from __future__ import annotations

from typing import Any

from envs.base import Action, Observation, ToolCallAction, ToolResult
from envs.sandbox import Sandbox, SandboxPool, SandboxUnavailable
from envs.toolcall import python_tool
from envs.toolcall.math_answer import is_correct
from envs.toolcall.math_tasks import MathProblem
from envs.toolcall.text import clip_middle

OUTPUT_CHARS = 4000
"""What the agent reads back of one call's output (head and tail): enough for any answer, short for the context."""

SYSTEM_PROMPT = """\
You are solving a math problem. You may call the `python` tool to run Python 3 code (standard library only: \
{modules}); it returns what the code prints, so print every value you need. Each call is a fresh interpreter and \
stops after {wall_s:g} seconds. You have at most {max_steps} steps.

When you are done, reply without a tool call and give the final answer in \\boxed{{}}, e.g. \\boxed{{42}} or \
\\boxed{{3/7}}. Only the last \\boxed{{}} of that reply counts."""


class MathEnv:
    setting = "toolcall"

    def __init__(
        self,
        problem: MathProblem,
        sandboxes: SandboxPool | None,
        *,
        max_steps: int = 16,
        tool_bonus: float = 0.0,
        python_wall_s: float = 10.0,
    ):
        """`tool_bonus`: the outcome of an episode that did not end with the right answer but ran the tool.

        The reference (verl's ReTool recipe) scores +1/-1 and lifts a wrong answer by 0.05 per tool turn, capped
        at -0.6, to encourage tool use early in training. Outcomes here are 1/0, so the equivalent is a flat
        bonus for having run at least one `python` call: 0.1 is the value that matches the reference's intent
        (a small nudge, far below a right answer). It defaults to 0.0 so outcomes stay exactly 1/0 unless a
        configuration asks for the shaping.
        """
        if not 0.0 <= tool_bonus < 1.0:
            raise ValueError(
                f"tool_bonus must be in [0, 1): a wrong answer cannot score like a right one ({tool_bonus})"
            )
        self.problem = problem
        self.pool = sandboxes
        self.max_steps = max_steps
        self.tool_bonus = tool_bonus
        self.python_wall_s = python_wall_s
        self.box: Sandbox | None = None
        self.final_answer: str | None = None
        """The text of the step that ended the episode (None until the agent answers)."""
        self.python_runs = 0
        """`python` calls that ran in the sandbox (refused ones are not counted)."""

    # ---- Environment ---------------------------------------------------------------
    def reset(self) -> list[dict[str, Any]]:
        self.close()
        self.final_answer, self.python_runs = None, 0
        system = SYSTEM_PROMPT.format(
            modules=", ".join(sorted(python_tool.ALLOWED_MODULES)), wall_s=self.python_wall_s, max_steps=self.max_steps
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": self.problem.question}]

    def tools(self) -> list[dict[str, Any]]:
        return [python_tool.DEFINITION]

    def step(self, action: Action) -> Observation:
        if self.final_answer is not None:
            raise RuntimeError("the episode is over: the agent has answered")
        if not action.tool_calls and not action.parse_error:
            self.final_answer = action.text
            return Observation(done=True, done_reason="answered")
        results = [self._call(call) for call in action.tool_calls]
        user_message = None
        if action.parse_error:
            user_message = (
                f"Your tool call could not be parsed: {action.parse_error}. Call the tool as a JSON object, e.g."
                ' {"name": "python", "arguments": {"code": "print(2**10)"}}, or reply without a tool call to answer.'
            )
        return Observation(tool_results=results, user_message=user_message)

    def outcome(self) -> float:
        """1.0 when the final answer's last `\\boxed{}` equals the truth; else `tool_bonus` if python ran, else 0.0."""
        if self.final_answer is not None and is_correct(self.final_answer, self.problem.answer):
            return 1.0
        return self.tool_bonus if self.python_runs > 0 else 0.0

    def close(self) -> None:
        if self.box is not None:
            self.box.close()
            self.box = None

    # ---- internals ---------------------------------------------------------------------
    def _call(self, call: ToolCallAction) -> ToolResult:
        if call.name != "python":
            return _error(call, f"unknown tool {call.name!r}; the only tool is python(code)")
        extra = sorted(set(call.arguments) - {"code"})
        code = call.arguments.get("code")
        if not isinstance(code, str) or extra:
            problem = f"unexpected arguments {', '.join(extra)}" if extra else "`code` must be a string"
            return _error(call, f"bad arguments for python: {problem}; call python with {{'code': '<program>'}}")
        why = python_tool.refusal(code)
        if why:
            return _error(call, why)
        res = python_tool.run(self._sandbox(), code, self.python_runs, self.python_wall_s)
        self.python_runs += 1
        body = (
            clip_middle(res.report(), OUTPUT_CHARS)
            or "(no output: the code printed nothing; print the values you need)"
        )
        return ToolResult(
            call_id=call.id, name=call.name, content=body, exit_code=res.exit_code, error=res.exit_code != 0
        )

    def _sandbox(self) -> Sandbox:
        if self.box is None:
            if self.pool is None:
                raise SandboxUnavailable("this math environment has no sandbox pool, so python calls cannot run")
            self.box = self.pool.open(self.problem.task_id)
        return self.box


def _error(call: ToolCallAction, message: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=f"error: {message}", error=True)
