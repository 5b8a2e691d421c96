"""An example environment plugin: arithmetic problems solved with a `calculator` tool, answered in `\\boxed{}`.

The whole protocol an environment plugin implements (see docs/environments.md):
- `make_source(context)`, named by the entry point, returns a task source: `tasks()` lists `TaskInfo` rows,
  `make(task_id, sandboxes)` builds one episode's environment (raise `UnknownTask` for an id it does not have);
- the environment: `reset()` -> the opening messages, `tools()` -> OpenAI tool definitions,
  `step(action)` -> an `Observation` (tool results, done), `outcome()` -> the task's verdict, `close()`.
Its own settings come from `[envs.plugins.calc]` (`context.options`): `count` tasks, operands up to `max_operand`.
"""

from __future__ import annotations

import ast
import operator
import random
import re

from envs.base import Action, Observation, TaskInfo, ToolResult, UnknownTask

SYSTEM = (
    "You solve arithmetic problems. Call the `calculator` tool with an expression to compute exactly; "
    "then give the final answer as \\boxed{N}."
)
CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression with + - * // % ** and parentheses; returns the value.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. (12 + 30) * 7"}},
            "required": ["expression"],
        },
    },
}
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_BOXED = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")


def evaluate(expression: str) -> int:
    """Integer arithmetic only, no names or calls (a tool the policy drives must not run arbitrary code)."""

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and (abs(right) > 64 or right < 0):
                raise ValueError("exponents are limited to 0..64")
            return _OPS[type(node.op)](left, right)
        raise ValueError(f"not allowed: {ast.dump(node)[:60]}")

    return ev(ast.parse(expression, mode="eval").body)


def problem(index: int, max_operand: int) -> tuple[str, int]:
    rng = random.Random(f"calc:{index}")
    a, b, c = (rng.randint(2, max_operand) for _ in range(3))
    return f"A crate holds {a} boxes of {b} bolts, plus {c} loose bolts. How many bolts in all?", a * b + c


class CalcEnv:
    setting = "calc"

    def __init__(self, question: str, answer: int):
        self.question, self.answer = question, answer
        self.final: str | None = None

    def reset(self) -> list[dict]:
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": self.question}]

    def tools(self) -> list[dict]:
        return [CALCULATOR]

    def step(self, action: Action) -> Observation:
        if action.parse_error:
            return Observation(user_message=f"Your tool call could not be parsed: {action.parse_error}")
        if not action.tool_calls:  # an answer: the episode is over
            self.final = action.text
            return Observation(done=True, done_reason="answered")
        results = []
        for call in action.tool_calls:
            try:
                if call.name != "calculator":
                    raise ValueError(f"unknown tool {call.name!r}: use calculator")
                content, error = str(evaluate(str(call.arguments.get("expression", "")))), False
            except (ValueError, SyntaxError, ZeroDivisionError, RecursionError) as exc:
                content, error = f"error: {exc}", True
            results.append(ToolResult(call_id=call.id, name=call.name, content=content, error=error))
        return Observation(tool_results=results)

    def outcome(self) -> float:
        found = _BOXED.findall(self.final or "")
        return 1.0 if found and int(found[-1]) == self.answer else 0.0

    def close(self) -> None:
        pass


class CalcTasks:
    setting = "calc"

    def __init__(self, count: int, max_operand: int):
        self.count, self.max_operand = count, max_operand

    def tasks(self) -> list[TaskInfo]:
        return [
            TaskInfo(setting=self.setting, task_id=f"calc/{i}", title=problem(i, self.max_operand)[0][:60])
            for i in range(self.count)
        ]

    def make(self, task_id: str, sandboxes) -> CalcEnv:  # this environment needs no sandbox
        m = re.fullmatch(r"calc/(\d+)", task_id)
        if m is None or int(m[1]) >= self.count:
            raise UnknownTask(task_id)
        return CalcEnv(*problem(int(m[1]), self.max_operand))


def make_source(context) -> CalcTasks:
    """The entry point: `context.options` holds the keys of `[envs.plugins.calc]` beyond the common ones."""
    options = context.options
    return CalcTasks(count=int(options.get("count", 20)), max_operand=int(options.get("max_operand", 99)))
