"""The math agent's `python` tool: a static check of the code, then `python3 -I` in the episode's sandbox.

The check follows the reference (ReTool's sandbox: a module allowlist and a regex
blocklist). It is not the security boundary — bubblewrap is: no network, a
read-only system, rlimits, a wall clock. It keeps the tool what the task means it
to be, a calculator: code that imports `os` or opens files is refused with a
message naming what is not allowed, so the policy learns the rule instead of
meeting an opaque failure. The code runs with the Debian interpreter in isolated
mode (`-I`: no user site, no PYTHON* variables, no script folder on sys.path),
which has only the standard library.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from envs.sandbox import CommandResult, Sandbox

ALLOWED_MODULES = frozenset(
    {
        "math",
        "cmath",
        "fractions",
        "decimal",
        "itertools",
        "functools",
        "collections",
        "statistics",
        "random",
        "re",
        "string",
        "heapq",
        "bisect",
        "operator",
        "numbers",
    }
)
BLOCKED: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern))
    for label, pattern in (
        ("__import__", r"__import__"),
        ("__builtins__", r"__builtins__"),
        ("__subclasses__", r"__subclasses__"),
        ("__globals__", r"__globals__"),
        ("open(", r"\bopen\s*\("),
        ("exec(", r"\bexec\s*\("),
        ("eval(", r"\beval\s*\("),
        ("compile(", r"\bcompile\s*\("),
        ("input(", r"\binput\s*\("),
        ("breakpoint(", r"\bbreakpoint\s*\("),
        ("subprocess", r"\bsubprocess\b"),
        ("importlib", r"\bimportlib\b"),
        ("os.", r"\bos\s*\."),
        ("sys.", r"\bsys\s*\."),
    )
)
MAX_CODE_CHARS = 50_000
CALLS_DIR = "calls"
"""Each call's code is written to /app/calls/call_<n>.py: earlier calls stay readable in the workspace for debugging."""

DEFINITION: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "python",
        "description": (
            "Run Python 3 code (standard library only) and return what it prints (stdout and stderr). Nothing is"
            " returned unless you print it. Each call is a fresh interpreter: variables do not carry over."
            f" Allowed imports: {', '.join(sorted(ALLOWED_MODULES))}. No files, no os/sys, no network."
        ),
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The Python program to run."}},
            "required": ["code"],
            "additionalProperties": False,
        },
    },
}


def refusal(code: str) -> str | None:
    """Why `code` may not run (a message for the agent), or None when it may."""
    if len(code) > MAX_CODE_CHARS:
        return f"the code is {len(code)} characters long; at most {MAX_CODE_CHARS} are accepted"
    blocked = [label for label, pattern in BLOCKED if pattern.search(code)]
    if blocked:
        return f"the code uses {', '.join(blocked)}, which is not allowed here (the tool is for computation only)"
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        return f"SyntaxError: {e.msg} (line {e.lineno})"
    except (ValueError, RecursionError, MemoryError) as e:  # NUL bytes; absurd nesting
        return f"the code cannot be parsed: {type(e).__name__}"
    bad = sorted({name for name in _imported(tree) if name.split(".")[0] not in ALLOWED_MODULES})
    if bad:
        allowed = ", ".join(sorted(ALLOWED_MODULES))
        return f"importing {', '.join(bad)} is not allowed; the modules you may import are: {allowed}"
    return None


def run(box: Sandbox, code: str, index: int, wall_s: float) -> CommandResult:
    """Run one call's code in the sandbox (stdin closed) and return its result, stopped at `wall_s`."""
    path = f"{CALLS_DIR}/call_{index}.py"
    box.write_file(path, code)
    return box.run(f"exec /usr/bin/python3 -I {path}", wall_s=wall_s)


def _imported(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or "") if node.level else node.module or "")
    return names
