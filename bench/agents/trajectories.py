"""Generated agent trajectories for the tool-call setting: the base agent policy's pretraining corpus.

The tasks are the environment's own math problems (`envs.toolcall.math_tasks`) of `KINDS`: each needs exact
arithmetic on numbers far beyond what a small model can do in its head (`2^1500`'s digit sum, a modular power),
so only a good `python` call succeeds. Questions are drawn with the corpus's own seed, never the environment's,
so no held-out task is ever seen in pretraining.

Every trajectory is played against a real `MathEnv` (its prompt, its tool definition, its replies to a
malformed call or to code that prints nothing), with the code run in this process: the code is this module's own.
The actions are parsed by the episode's own `parse_action`, so the messages the policy learns from are exactly
the ones an episode renders. The behaviour is imperfect on purpose (`BEHAVIOURS`): the policy sometimes answers
without calling the tool, emits a malformed call, forgets to print, copies a number wrongly, or does not use the
result it got; learning has somewhere to go.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
from collections.abc import Callable
from functools import cache

from envs.agent_turn import observation_messages, parse_action
from envs.sandbox import CommandResult
from envs.toolcall.held_out import KINDS, held_out
from envs.toolcall.math_answer import is_correct
from envs.toolcall.math_env import MathEnv
from envs.toolcall.math_tasks import KINDS as ALL_KINDS
from envs.toolcall.math_tasks import MathProblem, answer_text

MAX_STEPS = 6
"""The episode step limit the policy is trained and served with (the system prompt states it)."""


PRIME = "all(n % d for d in range(2, int(n ** 0.5) + 1))"
"""Trial division: short to write, fast enough for the numbers these kinds ask about."""


SOLVERS: dict[str, tuple[str, Callable[..., str]]] = {
    "digit_sum_power": (r"digits of 2\^(\d+)", lambda k: f"print(sum(int(d) for d in str(2 ** {k})))"),
    "digit_sum_factorial": (
        r"digits of (\d+)!",
        lambda n: f"import math\nprint(sum(int(d) for d in str(math.factorial({n}))))",
    ),
    "digit_count": (r"digits does (\d+)\^(\d+) have", lambda a, b: f"print(len(str({a} ** {b})))"),
    "nth_prime": (
        r"What is the (\d+)(?:st|nd|rd|th) prime",
        lambda k: f"p = [n for n in range(2, 30000) if {PRIME}]\nprint(p[{k} - 1])",
    ),
    "prime_count": (r"satisfy (\d+) ≤ p ≤ (\d+)", lambda a, b: f"print(sum({PRIME} for n in range({a}, {b} + 1)))"),
    "collatz": (
        r"Starting from (\d+),",
        lambda k: f"n, s = {k}, 0\nwhile n > 1:\n    n, s = (n // 2 if n % 2 == 0 else 3 * n + 1), s + 1\nprint(s)",
    ),
}
"""The kinds the agent benchmark uses: how to find the question's numbers, and the short program they go into.
Kinds whose
numbers are short (at most six digits in the question, five in the answer): a small policy copies a number of one
or two tokens reliably enough to learn from, where a fifteen-digit one (gcd, modpow, from_base) defeats it."""
if tuple(SOLVERS) != KINDS:
    raise ImportError("the corpus's SOLVERS must be the held-out split's KINDS, in its order (envs.toolcall.held_out)")

BEHAVIOURS = {
    "good": 0.32,
    "no_tool": 0.36,
    "malformed": 0.10,
    "unchecked": 0.10,
    "no_print": 0.07,
    "miscopied": 0.05,
}
"""How often the base policy does each thing (per trajectory): only `good` succeeds for sure, and `malformed`
recovers half of the time. Answering without the tool is the most common mistake, and it always opens the same
way ("The answer is"), so that it stays a real choice at the first token when the policy samples below
temperature 1 (a mistake spread over many openings would vanish there)."""


def numbers(problem: MathProblem) -> tuple[str, ...]:
    """The numbers of the question that its program uses, in the program's order."""
    pattern, _ = SOLVERS[problem.kind]
    m = re.search(pattern, problem.question)
    if m is None:
        raise ValueError(f"the question does not match {pattern!r}: {problem.question!r}")
    return m.groups()


def solution(problem: MathProblem) -> str:
    return SOLVERS[problem.kind][1](*numbers(problem))


@cache
def _held_out_questions() -> frozenset[str]:
    return frozenset(p.question for p in held_out())


def corpus_problem(index: int, seed: int) -> MathProblem:
    """A pretraining problem, drawn with the corpus's own seed; a held-out question is drawn again."""
    rng = random.Random(f"agent-corpus:{seed}:{index}")
    kind = KINDS[index % len(KINDS)]
    while True:
        question, answer = ALL_KINDS[kind](rng)
        if question not in _held_out_questions():
            return MathProblem(index=index, kind=kind, question=question, answer=answer_text(answer))


# ---- playing a trajectory against the environment ----------------------------------------------------------------


class _LocalBox:
    """Runs this module's own programs in-process: the environment's sandbox interface, for corpus generation."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def write_file(self, path: str, content: str) -> None:
        self.files[path] = content

    def run(self, command: str, wall_s: float) -> CommandResult:
        path = command.split()[-1]
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(self.files[path], path, "exec"), {})  # noqa: S102 - the code is generated by this module
        except Exception as exc:  # as python3 reports it: the traceback's frame and the error on stderr
            where = f'  File "{path}", line {_line(exc)}, in <module>'
            err = f"Traceback (most recent call last):\n{where}\n{type(exc).__name__}: {exc}\n"
            return CommandResult(exit_code=1, stdout=out.getvalue(), stderr=err, duration_s=0.0)
        return CommandResult(exit_code=0, stdout=out.getvalue(), stderr="", duration_s=0.0)

    def close(self) -> None:
        pass


def _line(exc: Exception) -> int:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_lineno if tb is not None else 1


class _LocalPool:
    def open(self, task_id: str) -> _LocalBox:
        return _LocalBox()


def call_text(code: str) -> str:
    """A tool call as the policy writes it (Hermes style, what the chat template renders back)."""
    return "<tool_call>\n" + json.dumps({"name": "python", "arguments": {"code": code}}) + "\n</tool_call>"


def _malformed(code: str, rng: random.Random) -> str:
    good = json.dumps({"name": "python", "arguments": {"code": code}})
    broken = rng.choice([good[:-1], good.replace('"arguments": ', '"arguments" '), good.replace('"code"', "code")])
    return "<tool_call>\n" + broken + "\n</tool_call>"


def _guess(truth: str, rng: random.Random) -> str:
    """A wrong number about the size of the truth: what answering without computing gives."""
    digits = max(1, len(truth.lstrip("-")))
    while True:
        guess = str(rng.randrange(10 ** (digits - 1) if digits > 1 else 0, 10**digits))
        if guess != truth:
            return guess


def _miscopy(problem: MathProblem, rng: random.Random) -> str:
    """The program with one digit changed in a number it copied from the question (never its first digit to 0)."""
    values = list(numbers(problem))
    which = rng.randrange(len(values))
    value = values[which]
    i = rng.randrange(len(value))
    value = value[:i] + rng.choice([d for d in "0123456789"[1 if i == 0 else 0 :] if d != value[i]]) + value[i + 1 :]
    values[which] = value
    return SOLVERS[problem.kind][1](*values)


def _final(value: str, rng: random.Random) -> str:
    if not re.fullmatch(r"-?\d+", value):  # the code failed: it answers anyway, with a guess
        return _direct(_guess("1" * 6, rng), rng)
    lead = rng.choice(["The result is {v}.", "The code printed {v}.", "So the answer is {v}.", ""])
    return (lead.format(v=value) + "\n\n" if lead else "") + f"\\boxed{{{value}}}"


def _direct(value: str, rng: random.Random) -> str:
    lead = rng.choice(["The answer is", "This comes to", "I get", "It is"])
    return f"{lead} \\boxed{{{value}}}."


def plan(problem: MathProblem, behaviour: str, rng: random.Random) -> list[str | Callable[[str], str]]:
    """The policy's texts, step by step; a callable step writes its text from the previous tool result."""
    code, truth = solution(problem), problem.answer
    if behaviour == "no_tool":
        return [f"The answer is \\boxed{{{_guess(truth, rng)}}}."]
    if behaviour == "malformed":
        if rng.random() < 0.5:  # recovers
            return [_malformed(code, rng), call_text(code), lambda out: _final(out, rng)]
        return [_malformed(code, rng), _direct(_guess(truth, rng), rng)]
    if behaviour == "unchecked":
        return [call_text(code), _final(_guess(truth, rng), rng)]
    if behaviour == "no_print":
        bare = re.sub(r"print\((.*)\)$", r"\1", code)
        return [call_text(bare), _direct(_guess(truth, rng), rng)]
    if behaviour == "miscopied":
        return [call_text(_miscopy(problem, rng)), lambda out: _final(out, rng)]
    return [call_text(code), lambda out: _final(out, rng)]


def trajectory(index: int, seed: int) -> tuple[list[tuple[list[dict], str]], list[dict], float]:
    """One episode played out: (messages before each step, the step's text) per step, the tools, the outcome."""
    problem = corpus_problem(index, seed)
    rng = random.Random(f"agent-behaviour:{seed}:{index}")
    behaviour = rng.choices(list(BEHAVIOURS), weights=list(BEHAVIOURS.values()))[0]
    env = MathEnv(problem, _LocalPool(), max_steps=MAX_STEPS)  # type: ignore[arg-type]
    messages = env.reset()
    steps: list[tuple[list[dict], str]] = []
    last_result = ""
    for n, item in enumerate(plan(problem, behaviour, rng)):
        text = item(last_result) if callable(item) else item
        steps.append((list(messages), text))
        action, message = parse_action(text, call_id_prefix=f"s{n}")
        obs = env.step(action)
        messages += [message, *observation_messages(obs)]
        if obs.tool_results:
            last_result = obs.tool_results[-1].content
        if obs.done:
            break
    outcome = env.outcome()
    env.close()
    return steps, env.tools(), outcome


def check_solutions(problems: list[MathProblem]) -> None:
    """Every solver's program prints the exact answer (raises otherwise): the corpus teaches right programs."""
    box = _LocalBox()
    for p in problems:
        box.write_file("x", solution(p))
        printed = box.run("run x", 10).stdout.strip()
        if not is_correct(f"\\boxed{{{printed}}}", p.answer):
            raise AssertionError(f"{p.kind}: the program printed {printed!r}, the answer is {p.answer!r}")
