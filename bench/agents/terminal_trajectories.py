"""Generated agent trajectories for the terminal setting: the counting family (`counting_tasks`) played out.

Every trajectory is played against the real `TerminalEnv` (its system prompt, its tools, its replies to a
malformed call, its tool-result format), with a shell that stands in for the sandbox: it runs the few command
shapes the trajectories use over the task's files in memory and answers as bash, grep, find and wc do
(`tests/bench/test_agents_corpus.py` runs the same commands in the real sandbox and compares). The actions are
parsed by the episode's own `parse_action`, so the messages the policy learns from are what an episode renders.

The behaviour is imperfect on purpose (`BEHAVIOURS`): the policy sometimes answers in text without a command,
writes a guess, emits a malformed call, runs the right command but stops before writing the answer, or copies
a word of the instruction wrongly.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path

from envs.agent_turn import observation_messages, parse_action
from envs.sandbox import CommandResult, SandboxLimits
from envs.terminal import counting_tasks
from envs.terminal.counting_tasks import ANSWER_FILE, CountTask
from envs.terminal.env import TerminalEnv
from envs.terminal.task import TaskToml, TerminalTask

MAX_STEPS = 6
"""The episode step limit the policy is trained and served with (the system prompt states it)."""

BEHAVIOURS = {
    "good": 0.28,
    "look": 0.08,
    "no_tool": 0.34,
    "guess": 0.09,
    "malformed": 0.09,
    "forgot": 0.07,
    "miscopied": 0.05,
}
"""How often the base policy does each thing (per trajectory): `good` (the command straight into the answer file)
and `look` (the command, then its printed number written with echo) succeed; `malformed` recovers half of the
time; `forgot` runs the right command and submits without writing the answer. Answering in text without a
command is the most common mistake, always opening the same way ("The answer is"), so that it stays a real choice
at the first token when the policy samples below temperature 1."""


# ---- a shell over the task's files, for corpus generation ---------------------------------------------------------


class ShellStandIn:
    """Answers the trajectories' commands (`COMMANDS`) as bash in /app would, over the files in memory."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = dict(files)

    def copy_in(self, src, dst) -> None:  # the files are already here
        pass

    def write_file(self, path: str, content: str) -> None:
        self.files[path] = content

    def close(self) -> None:
        pass

    def run(self, command: str, wall_s: float | None = None, stdin: str | None = None, **_) -> CommandResult:
        target = None
        m = re.fullmatch(r"(.*?) > (\S+)", command)
        if m:
            command, target = m.group(1), m.group(2)
        code, out, err, redirected = self._run(command)
        if target is not None and redirected:
            self.files[target] = out
            out = ""
        return CommandResult(exit_code=code, stdout=out, stderr=err, duration_s=0.0)

    def _run(self, command: str) -> tuple[int, str, str, bool]:
        """(exit code, stdout, stderr, whether a `> file` after it would have been opened)."""
        if m := re.fullmatch(r"grep -c (\S+) (\S+)", command):
            word, path = m.groups()
            if path not in self.files:
                return 2, "", f"grep: {path}: No such file or directory\n", True
            n = sum(word in line for line in self.files[path].splitlines())
            return (0 if n else 1), f"{n}\n", "", True
        if m := re.fullmatch(r"find (\S+) -name '\*\.(\w+)' \| wc -l", command):
            folder, ext = m.groups()
            if not any(p.startswith(folder + "/") for p in self.files):
                return 0, "0\n", f"find: '{folder}': No such file or directory\n", True
            n = sum(p.startswith(folder + "/") and p.endswith("." + ext) for p in self.files)
            return 0, f"{n}\n", "", True
        if m := re.fullmatch(r"wc -l < (\S+)", command):
            (path,) = m.groups()
            if path not in self.files:
                return 1, "", f"bash: line 1: {path}: No such file or directory\n", False
            return 0, f"{self.files[path].count(chr(10))}\n", "", True
        if m := re.fullmatch(r"echo (\S+)", command):
            return 0, m.group(1) + "\n", "", True
        if m := re.fullmatch(r"cat (\S+)", command):
            (path,) = m.groups()
            if path not in self.files:
                return 1, "", f"cat: {path}: No such file or directory\n", True
            return 0, self.files[path], "", True
        raise ValueError(f"the stand-in shell does not know {command!r}")


class _Pool:
    limits = SandboxLimits()

    def __init__(self, files: dict[str, str]) -> None:
        self.box = ShellStandIn(files)

    def open(self, task_id: str) -> ShellStandIn:
        return self.box


# ---- the policy's texts ----------------------------------------------------------------------------------------------


def call_text(name: str, arguments: dict) -> str:
    """A tool call as the policy writes it (Hermes style, what the chat template renders back)."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def bash(command: str) -> str:
    return call_text("bash", {"command": command})


SUBMIT = call_text("submit", {})


def _malformed(command: str, rng: random.Random) -> str:
    good = json.dumps({"name": "bash", "arguments": {"command": command}})
    broken = rng.choice(
        [good[:-1], good.replace('"arguments": ', '"arguments" '), good.replace('"command"', "command")]
    )
    return "<tool_call>\n" + broken + "\n</tool_call>"


def _guess(rng: random.Random) -> str:
    return str(rng.randrange(1, 120))


def _miscopied(task: CountTask, rng: random.Random) -> str:
    """The command with one digit changed in the number a name carries (a log's day, a user id, a batch, an export:
    the last number in it), never its first digit to 0."""
    slot = rng.choice([k for k, v in sorted(task.slots.items()) if any(c.isdigit() for c in v)])
    value = task.slots[slot]
    number = list(re.finditer(r"\d+", value))[-1]
    i = rng.randrange(*number.span())
    first = i == number.start()
    digit = rng.choice([d for d in "0123456789"[1 if first else 0 :] if d != value[i]])
    return task.command_with(**{slot: value[:i] + digit + value[i + 1 :]})


def plan(task: CountTask, behaviour: str, rng: random.Random) -> list[str | Callable[[str], str]]:
    """The policy's texts, step by step; a callable step writes its text from the previous tool result."""
    into = f"{task.command} > {ANSWER_FILE}"
    if behaviour == "no_tool":
        return [f"The answer is {_guess(rng)}."]
    if behaviour == "guess":
        return [bash(f"echo {_guess(rng)} > {ANSWER_FILE}"), SUBMIT]
    if behaviour == "malformed":
        if rng.random() < 0.5:  # recovers
            return [_malformed(into, rng), bash(into), SUBMIT]
        return [_malformed(into, rng), SUBMIT]
    if behaviour == "forgot":
        return [bash(task.command), SUBMIT]
    if behaviour == "miscopied":
        return [bash(f"{_miscopied(task, rng)} > {ANSWER_FILE}"), SUBMIT]
    if behaviour == "look":
        return [bash(task.command), lambda out: bash(f"echo {_printed(out)} > {ANSWER_FILE}"), SUBMIT]
    if rng.random() < 0.3:  # checks what it wrote
        return [bash(into), bash(f"cat {ANSWER_FILE}"), SUBMIT]
    return [bash(into), SUBMIT]


def _printed(result: str) -> str:
    """The number a command printed, from its tool result (`12\\n[exit code 0]`)."""
    m = re.match(r"\s*(\d+)", result)
    return m.group(1) if m else _guess(random.Random(result))


def env_for(task: CountTask, files: dict[str, str] | None = None) -> TerminalEnv:
    """The real TerminalEnv over the stand-in shell (the task's own files unless `files` is given)."""
    spec = TerminalTask(
        task_id=task.task_id, root=Path("/nonexistent"), instruction=task.instruction, config=TaskToml()
    )
    return TerminalEnv(spec, _Pool(task.files if files is None else files), max_steps=MAX_STEPS)  # type: ignore[arg-type]


def trajectory(index: int, seed: int) -> tuple[list[tuple[list[dict], str]], list[dict], float]:
    """One episode played out: (messages before each step, the step's text) per step, the tools, the outcome."""
    task = counting_tasks.corpus_task(index, seed)
    rng = random.Random(f"terminal-behaviour:{seed}:{index}")
    behaviour = rng.choices(list(BEHAVIOURS), weights=list(BEHAVIOURS.values()))[0]
    env = env_for(task)
    messages = env.reset()
    steps: list[tuple[list[dict], str]] = []
    last_result = ""
    for n, item in enumerate(plan(task, behaviour, rng)):
        text = item(last_result) if callable(item) else item
        steps.append((list(messages), text))
        action, message = parse_action(text, call_id_prefix=f"s{n}")
        obs = env.step(action)
        messages += [message, *observation_messages(obs)]
        if obs.tool_results:
            last_result = obs.tool_results[-1].content
        if obs.done:
            break
    written = env.pool.box.files.get(ANSWER_FILE, "")  # type: ignore[attr-defined]
    outcome = 1.0 if written.strip() == str(task.answer) else 0.0
    tools = env.tools()
    env.close()
    return steps, tools, outcome


def shell_commands(index: int, seed: int) -> list[str]:
    """The bash commands of a corpus trajectory, in order (for comparing the stand-in with the real sandbox)."""
    steps, _, _ = trajectory(index, seed)
    commands = []
    for _, text in steps:
        action, _ = parse_action(text, call_id_prefix="x")
        commands += [c.arguments["command"] for c in action.tool_calls if c.name == "bash"]
    return commands
