"""The mini-swe-agent protocol: one ```bash block per reply, its return code and output as the next state.

A reply with no block or with several gets a format error as its next state
(the agent reads it and tries again; it is never an exception). The episode
ends when a command's output starts with the submit marker, as in
mini-swe-agent: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.
"""

from __future__ import annotations

import re

from envs.sandbox import CommandResult

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SUBMIT_COMMAND = f"echo {SUBMIT_MARKER}"
OUTPUT_CHARS = 10_000
"""Longer output is shown as its head and tail, half of this each, with a warning (mini-swe-agent's limit)."""

_BLOCK = re.compile(r"```bash[ \t]*\n(.*?)\n?[ \t]*```", re.S)

SYSTEM_PROMPT = """\
You are a software engineer working in a Linux shell. You fix issues in a Python repository by running shell \
commands, one command per reply.

Every reply has two parts: a THOUGHT section with your reasoning, then exactly ONE bash code block holding \
exactly one command (several commands joined with && or || count as one). For example:

THOUGHT: I should find where the function is defined before changing it.

```bash
grep -rn "def parse_line" .
```

A reply without a bash block, or with more than one, is rejected and costs a step."""

INSTANCE_PROMPT = """\
<issue>
{problem_statement}
</issue>

The repository is checked out in /app, the working directory of every command. Change its non-test source \
files so that the issue above is resolved, in a general way that fits the code base.

How commands run:
- Each command runs in a fresh bash shell in /app: `cd` and variables do not carry over (prefix a command with \
`cd dir && ...` when you need to). A command running over {wall_s:g} seconds is stopped.
- You see the command's return code and its output (stdout then stderr); long output is cut to its head and tail.
- There is no network. python3 with its standard library, pytest, git and the usual command-line tools \
(grep, sed, awk, find, cat, head, tail) are available; nothing can be installed.
- Use non-interactive commands only: no editors (vi, nano), no pagers. Edit files with sed, with a heredoc \
(cat <<'EOF' > file), or with a python3 script.
- The repository is a git repository: `git diff` shows your changes so far.

Suggested workflow: find and read the relevant code, reproduce the issue with a small script, fix the source, \
run the script and the tests again, check edge cases. Do not edit the existing tests.

You have at most {max_steps} steps. When you are done, submit your work with this command, on its own:

```bash
{submit}
```

After submitting you cannot change anything; your work is then checked by tests you cannot see."""

FORMAT_ERROR = """\
Format error: your reply had {found} bash code blocks; it must have exactly ONE.{extra}

Write a THOUGHT section, then one command in a single block:

THOUGHT: what you want to do and why.

```bash
your_command_here
```

If you are done, submit with `{submit}` as the only command of your reply."""

LONG_OUTPUT = """\
<warning>
The output of your last command was too long to show whole; its middle is left out below. Try a command \
that prints less: head, tail or sed -n to show part of a file, a narrower grep pattern, or \
redirect the output to a file and search in it.
</warning>
<output_head>
{head}
</output_head>
<elided_chars>
{elided} characters elided
</elided_chars>
<output_tail>
{tail}
</output_tail>"""


def commands(text: str) -> list[str]:
    """The bash blocks of a reply, in order."""
    return _BLOCK.findall(text)


def format_error(found: int, tool_calls: int = 0, parse_error: str | None = None) -> str:
    extra = ""
    if tool_calls or parse_error:
        extra = " Tool calls are not available here: write the command in a ```bash block instead."
    return FORMAT_ERROR.format(found=found, extra=extra, submit=SUBMIT_COMMAND)


def output_of(res: CommandResult) -> str:
    """What the agent reads of a command: stdout then stderr, and why the sandbox stopped it (if it did)."""
    out = res.stdout + res.stderr
    if res.limit:
        out += f"\n[the command was stopped by the sandbox's {res.limit.replace('_', ' ')} limit]"
    return out


def observation(returncode: int, output: str, steps_left: int | None = None) -> str:
    """The next state as mini-swe-agent writes it: return code, then the output (head and tail when long)."""
    if len(output) <= OUTPUT_CHARS:
        body = (
            f"<output>\n{output}</output>" if output.endswith("\n") or not output else f"<output>\n{output}\n</output>"
        )
    else:
        half = OUTPUT_CHARS // 2
        body = LONG_OUTPUT.format(head=output[:half], elided=len(output) - 2 * half, tail=output[-half:])
    text = f"<returncode>{returncode}</returncode>\n{body}"
    if steps_left is not None and steps_left >= 0:
        # The reference reminds the agent of its remaining steps after every command.
        text += f"\n{_reminder(steps_left)}"
    return text


def is_submission(res: CommandResult) -> bool:
    """mini-swe-agent's rule: the command succeeded and the first line of its output is the marker."""
    lines = res.stdout.lstrip().splitlines()
    return res.exit_code == 0 and bool(lines) and lines[0].strip() == SUBMIT_MARKER


def _reminder(steps_left: int) -> str:
    if steps_left == 0:
        return "No steps left: your work is checked as it is now."
    if steps_left == 1:
        return f"REMINDER: 1 step left. Submit now with `{SUBMIT_COMMAND}` unless one more change is needed."
    return f"REMINDER: {steps_left} steps left."
