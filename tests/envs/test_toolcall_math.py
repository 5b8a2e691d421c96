"""The tool-call setting's math family: the problem list, the answer check, and episodes with the sandboxed tool."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from envs.base import Action, ToolCallAction, UnknownTask
from envs.sandbox import SandboxLimits, SandboxPool, SandboxUnavailable, sandbox_problem
from envs.toolcall import bfcl_data
from envs.toolcall.math_answer import is_correct, last_boxed, normalize
from envs.toolcall.math_env import MathEnv
from envs.toolcall.math_tasks import KINDS, MathProblem, generate
from envs.toolcall.source import ToolCallTasks

REPO = Path(__file__).resolve().parents[2]
FINGERPRINT = "e935ba48d13ae731aa37d3f00faef8971eb1230ebf8e9b8e8558a1974c06f079"
"""sha256 of the first 200 problems: task ids name these problems, so a change to the list must be deliberate."""


def _fingerprint(problems: tuple[MathProblem, ...]) -> str:
    return hashlib.sha256(json.dumps([p.model_dump() for p in problems]).encode()).hexdigest()


def _problem(kind: str) -> MathProblem:
    return next(p for p in generate(200) if p.kind == kind)


# ---- the generator -------------------------------------------------------------------------------------------------


def test_generator_is_deterministic_unique_and_pinned():
    problems = generate(200)
    assert len(problems) == 200
    assert len({p.question for p in problems}) == 200
    assert len({p.task_id for p in problems}) == 200
    assert {p.kind for p in problems} == set(KINDS)
    assert all("\\boxed{}" in p.question and p.answer for p in problems)
    assert generate(300)[:200] == problems  # a longer list extends the shorter one
    assert _fingerprint(problems) == FINGERPRINT


def test_generator_gives_the_same_list_in_a_fresh_interpreter():
    code = (
        "import hashlib, json; from envs.toolcall.math_tasks import generate; "
        "print(hashlib.sha256(json.dumps([p.model_dump() for p in generate(200)]).encode()).hexdigest())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # set/dict order must not matter
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == FINGERPRINT


# ---- the answer check -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "truth"),
    [
        ("1234567", "1234567"),
        ("1,234,567", "1234567"),
        ("1{,}234{,}567", "1234567"),
        ("1\\,234\\,567", "1234567"),
        ("1234567.0", "1234567"),
        ("$-42$", "-42"),
        ("x = 17", "17"),
        ("17.", "17"),
        ("2/4", "1/2"),
        ("\\frac{1}{2}", "1/2"),
        ("\\dfrac{3}{6}", "1/2"),
        ("-\\frac{3}{4}", "-3/4"),
        ("0.5", "1/2"),
        ("0.25", "1/4"),
        ("1819/2520", "1819/2520"),
        ("\\text{2112312322132}", "2112312322132"),
    ],
)
def test_equivalent_answers_normalise_alike(given, truth):
    assert normalize(given) == normalize(truth)


@pytest.mark.parametrize(
    ("given", "truth"),
    [
        ("1,2", "12"),  # not a thousands separator
        ("0.333", "1/3"),  # exact, not rounded
        ("1235", "1234"),
        ("1/3", "2/3"),
        ("1e99999999", "1"),  # refused as a number, never built
    ],
)
def test_different_answers_stay_different(given, truth):
    assert normalize(given) != normalize(truth)


def test_the_last_boxed_answer_counts():
    assert last_boxed("first \\boxed{1} then \\boxed{\\frac{1}{2}}.") == "\\frac{1}{2}"
    assert last_boxed("no box here") is None
    assert last_boxed("\\boxed{unclosed") is None
    assert is_correct("I think \\boxed{7}, no wait: \\boxed{1,234}", "1234")
    assert not is_correct("\\boxed{1234} is wrong, it is \\boxed{7}", "1234")
    assert not is_correct("the answer is 1234", "1234")


# ---- episodes without the sandbox -------------------------------------------------------------------------------


def _python(code: str, call_id: str = "c1") -> Action:
    return Action(tool_calls=[ToolCallAction(id=call_id, name="python", arguments={"code": code})])


def test_reset_tools_and_a_direct_answer_need_no_sandbox():
    problem = generate(200)[0]
    env = MathEnv(problem, None)
    system, user = env.reset()
    assert system["role"] == "system" and "\\boxed{}" in system["content"] and "python" in system["content"]
    assert user == {"role": "user", "content": problem.question}
    assert [t["function"]["name"] for t in env.tools()] == ["python"]
    obs = env.step(Action(text=f"So the answer is \\boxed{{{problem.answer}}}."))
    assert obs.done and obs.done_reason == "answered"
    assert env.outcome() == 1.0
    env.close()
    env.close()  # safe twice


@pytest.mark.parametrize(
    ("code", "named"),
    [
        ("import os\nprint(os.getcwd())", "os"),
        ("import subprocess", "subprocess"),
        ("from socket import socket", "socket"),
        ("import math, shutil", "shutil"),
        ("from . import x", "."),
        ("print(open('/etc/passwd').read())", "open("),
        ("__import__('os').system('id')", "__import__"),
        ("exec('print(1)')", "exec("),
        ("x = eval('2+2')", "eval("),
        ("import math\nos.system('id')", "os."),
        ("import math\nsys.exit(1)", "sys."),
    ],
)
def test_disallowed_code_is_refused_before_it_runs(code, named):
    env = MathEnv(generate(200)[0], None)  # no sandbox: a refused call must not need one
    env.reset()
    obs = env.step(_python(code))
    (result,) = obs.tool_results
    assert result.error and not obs.done
    assert named in result.content and "not allowed" in result.content
    assert env.python_runs == 0


def test_agent_mistakes_are_reported_and_the_episode_goes_on():
    env = MathEnv(generate(200)[0], None)
    env.reset()
    obs = env.step(Action(tool_calls=[ToolCallAction(id="a", name="bash", arguments={"command": "ls"})]))
    assert obs.tool_results[0].error and "unknown tool" in obs.tool_results[0].content
    obs = env.step(Action(tool_calls=[ToolCallAction(id="b", name="python", arguments={})]))
    assert obs.tool_results[0].error and "code" in obs.tool_results[0].content
    obs = env.step(Action(tool_calls=[ToolCallAction(id="c", name="python", arguments={"code": "1", "x": 2})]))
    assert obs.tool_results[0].error and "unexpected arguments x" in obs.tool_results[0].content
    obs = env.step(_python("print((1,"))
    assert obs.tool_results[0].error and "SyntaxError" in obs.tool_results[0].content
    obs = env.step(Action(parse_error="a <tool_call> block is not valid JSON"))
    assert not obs.done and obs.user_message and "could not be parsed" in obs.user_message
    assert env.step(Action(text="\\boxed{0}")).done
    assert env.outcome() == 0.0


def test_a_python_call_without_a_sandbox_pool_is_a_worker_error():
    env = MathEnv(generate(200)[0], None)
    env.reset()
    with pytest.raises(SandboxUnavailable):
        env.step(_python("print(1)"))


def test_tool_bonus_must_stay_below_a_right_answer():
    with pytest.raises(ValueError):
        MathEnv(generate(200)[0], None, tool_bonus=1.0)


# ---- the task source ----------------------------------------------------------------------------------------------


def test_source_lists_and_makes_math_tasks():
    source = ToolCallTasks(bfcl=False)
    tasks = source.tasks()
    assert len(tasks) == 200 and len({t.task_id for t in tasks}) == 200
    assert all(t.setting == "toolcall" and t.task_id.startswith("math/") and t.max_steps == 16 for t in tasks)
    env = source.make("math/5", None)
    assert isinstance(env, MathEnv) and env.problem == generate(200)[5]
    for bad in ("math/200", "math/-1", "math/05", "math/x", "bfcl/multi_turn_base_0", "other/1"):
        with pytest.raises(UnknownTask):
            source.make(bad, None)


def test_bfcl_asked_for_but_not_installed_says_how_to_install(monkeypatch):
    real = bfcl_data.importlib.util.find_spec
    monkeypatch.setattr(
        bfcl_data.importlib.util, "find_spec", lambda name, *a: None if name == "bfcl_eval" else real(name, *a)
    )
    assert "pip install --no-deps bfcl-eval==" in (bfcl_data.bfcl_problem() or "")
    with pytest.raises(bfcl_data.BfclUnavailable, match="no-deps"):
        ToolCallTasks(bfcl=True).tasks()
    assert len(ToolCallTasks(bfcl=False).tasks()) == 200


# ---- episodes with the sandboxed tool ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sandboxes():
    if os.geteuid() != 0:
        pytest.skip("sandboxed python calls need root (a sandbox uid per episode); run the tests as root")
    why = sandbox_problem()
    if why:
        pytest.skip(f"sandboxes cannot run here: {why}")
    root = Path(tempfile.mkdtemp(prefix="oc-toolcall-test-", dir="/tmp"))  # /tmp: sandbox uids can traverse it
    try:
        yield SandboxPool(root, SandboxLimits(wall_s=30, memory_mb=1024))  # the pool opens root to 0711
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _episode(sandboxes: SandboxPool, problem: MathProblem, code: str, **kwargs) -> tuple[MathEnv, str]:
    """Reset, run `code` with the python tool, and return the env and what the code printed."""
    env = MathEnv(problem, sandboxes, **kwargs)
    env.reset()
    obs = env.step(_python(code))
    (result,) = obs.tool_results
    assert not result.error and result.exit_code == 0, result.content
    return env, result.content.strip()


def test_computing_with_the_tool_then_answering_scores_one(sandboxes):
    product = _problem("product")
    a, b = map(int, re.findall(r"\d{6,}", product.question))
    env, printed = _episode(sandboxes, product, f"print({a} * {b})")
    try:
        assert printed == product.answer
        obs = env.step(Action(text=f"The product is \\boxed{{{printed}}}."))
        assert obs.done and obs.done_reason == "answered"
        assert env.outcome() == 1.0
    finally:
        env.close()

    series = _problem("telescoping")
    shift, n = map(int, re.search(r"k\+(\d+)\)\) for k = 1, 2, \.\.\., (\d+)", series.question).groups())
    code = f"from fractions import Fraction\nprint(sum(Fraction(1, k * (k + {shift})) for k in range(1, {n} + 1)))"
    env, printed = _episode(sandboxes, series, code)
    try:
        assert printed == series.answer
        env.step(Action(text=f"\\boxed{{{printed}}}"))
        assert env.outcome() == 1.0
    finally:
        env.close()


def test_a_wrong_answer_scores_zero_or_the_configured_tool_bonus(sandboxes):
    problem = _problem("modpow")
    for bonus, expected in ((0.0, 0.0), (0.1, 0.1)):
        env, printed = _episode(sandboxes, problem, "print(2 + 2)", tool_bonus=bonus)
        try:
            assert printed == "4"
            env.step(Action(text="\\boxed{4}"))
            assert env.outcome() == expected
        finally:
            env.close()
    env = MathEnv(problem, None, tool_bonus=0.1)  # no tool run: no bonus
    env.reset()
    env.step(Action(text="\\boxed{4}"))
    assert env.outcome() == 0.0


def test_an_infinite_loop_is_stopped_and_the_next_call_works(sandboxes):
    env = MathEnv(generate(200)[0], sandboxes, python_wall_s=2.0)
    env.reset()
    try:
        obs = env.step(_python("while True:\n    pass"))
        (stopped,) = obs.tool_results
        assert stopped.error and stopped.exit_code == 124 and "wall clock" in stopped.content
        obs = env.step(_python("import math\nprint(math.factorial(20))"))
        (ok,) = obs.tool_results
        assert not ok.error and ok.content.strip() == "2432902008176640000"
        assert env.python_runs == 2
    finally:
        env.close()


def test_an_exception_in_the_code_comes_back_as_an_error_result(sandboxes):
    env = MathEnv(generate(200)[0], sandboxes)
    env.reset()
    try:
        (result,) = env.step(_python("print(1 // 0)")).tool_results
        assert result.error and result.exit_code == 1 and "ZeroDivisionError" in result.content
        (result,) = env.step(_python("x = 1")).tool_results
        assert not result.error and "printed nothing" in result.content
    finally:
        env.close()
