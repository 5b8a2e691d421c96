"""The terminal agent's tools: their OpenAI definitions, argument models and path rules.

Arguments are checked with pydantic so a wrong call gets back a precise message
("command: Field required", "timeout: Extra inputs are not permitted") the
policy can learn from, instead of a crash or a silent guess.
"""

from __future__ import annotations

import posixpath
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from envs.sandbox import INSIDE_WORKSPACE


class _Args(BaseModel):
    # An argument the tool does not have is refused rather than ignored: the agent may think it had an effect.
    model_config = ConfigDict(extra="forbid")


class BashArgs(_Args):
    command: str


class WriteFileArgs(_Args):
    path: str
    content: str


class ReadFileArgs(_Args):
    path: str


class SubmitArgs(BaseModel):
    # Models often pass a summary to submit; it changes nothing, so it is allowed.
    model_config = ConfigDict(extra="ignore")


ARGS: dict[str, type[BaseModel]] = {
    "bash": BashArgs,
    "write_file": WriteFileArgs,
    "read_file": ReadFileArgs,
    "submit": SubmitArgs,
}


def _fn(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


def definitions(wall_s: float) -> list[dict[str, Any]]:
    path = {"type": "string", "description": "A path under /app (absolute, or relative to /app)."}
    return [
        _fn(
            "bash",
            "Run a shell command with bash in /app and return its exit code, stdout and stderr. Each call is a"
            f" fresh shell (cd and variables do not carry over); a command running over {wall_s:g} s is stopped.",
            {"command": {"type": "string", "description": "The bash command (pipes, &&, heredocs allowed)."}},
        ),
        _fn(
            "write_file",
            "Write text to a file under /app, creating missing folders and replacing the file if it exists.",
            {"path": path, "content": {"type": "string", "description": "The file's full new content."}},
        ),
        _fn("read_file", "Read a text file under /app (a long file is shown head and tail).", {"path": path}),
        _fn("submit", "Say the task is done. The episode ends and your work is checked.", {}),
    ]


def parse_args(name: str, arguments: dict[str, Any]) -> BaseModel:
    """The validated arguments of a known tool; `ValueError` with a readable message otherwise."""
    model = ARGS.get(name)
    if model is None:
        raise ValueError(f"unknown tool {name!r}; the tools are {', '.join(ARGS)}")
    try:
        return model.model_validate(arguments)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors())
        raise ValueError(f"bad arguments for {name}: {problems}") from None


def workspace_relative(path: str) -> str:
    """`path` as ./relative to /app, refusing anything outside /app (`ValueError`).

    The file is then read or written by a command in the sandbox, as the agent's
    own uid, so permissions and symlinks behave exactly as they do for `bash`.
    """
    p = path.strip()
    if not p:
        raise ValueError("the path is empty")
    if "\x00" in p:
        raise ValueError("the path contains a NUL byte")
    full = posixpath.normpath(p if p.startswith("/") else posixpath.join(INSIDE_WORKSPACE, p))
    if not full.startswith(INSIDE_WORKSPACE + "/"):
        raise ValueError(f"{path!r} is outside {INSIDE_WORKSPACE}: files can only be read and written under it")
    return "./" + full[len(INSIDE_WORKSPACE) + 1 :]
