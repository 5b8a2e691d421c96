"""The terminal setting: every shipped task's oracle scores 1.0 and an idle episode less; the tools, the step
rules and the checker, all against the real bubblewrap sandbox."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from envs.base import Action, ToolCallAction, UnknownTask
from envs.sandbox import SandboxLimits, SandboxPool, sandbox_problem
from envs.terminal import BUILTIN_TASKS, TaskSetupFailed, TerminalEnv, TerminalTasks

WALL_S = 3.0
"""The bash tool's wall clock in these tests: short, so the runaway-command test stays quick."""

SHIPPED = TerminalTasks([BUILTIN_TASKS])
SHIPPED_IDS = [t.task_id for t in SHIPPED.tasks()]
CATEGORIES = {"files", "text", "git", "sqlite", "scripting", "debugging"}


@pytest.fixture(scope="session")
def sandboxes():
    if os.geteuid() != 0:
        pytest.skip("terminal episodes need root (a sandbox uid per episode); run the tests as root")
    why = sandbox_problem()
    if why:
        pytest.skip(f"sandboxes cannot run here: {why}")
    root = Path(tempfile.mkdtemp(prefix="oc-terminal-test-", dir="/tmp"))  # /tmp: sandbox uids can traverse it
    try:
        yield SandboxPool(root, SandboxLimits(wall_s=WALL_S, memory_mb=1024))
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def episodes(sandboxes):
    """Build environments for a test; every one is closed afterwards."""
    made: list[TerminalEnv] = []

    def make(source: TerminalTasks, task_id: str) -> TerminalEnv:
        env = source.make(task_id, sandboxes)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


def write_task(root: Path, task_id: str, files: dict[str, str]) -> Path:
    folder = root / task_id
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return folder


GREET = {
    "task.toml": """
        [metadata]
        title = "Greet"
        category = "files"

        [verifier]
        timeout_s = 20
    """,
    "instruction.md": "Write `hello` to /app/out.txt and `bye` to /app/bye.txt.\n",
    "environment/seed.txt": "seed\n",
    "setup.sh": "echo from-setup > setup.txt\n",
    "tests/test_outputs.py": """
        from pathlib import Path


        def test_out():
            assert Path("out.txt").read_text().strip() == "hello"


        def test_bye():
            assert Path("bye.txt").read_text().strip() == "bye"
    """,
    "solution/solve.sh": "echo hello > out.txt\necho bye > bye.txt\n",
}


NO_TESTS = {k: v for k, v in GREET.items() if not k.startswith("tests/")}
GREET_SH = {
    **NO_TESTS,
    # Harbor's convention: a reward, here the fraction of the two files that are right.
    "tests/test.sh": """
        n=0
        [ "$(cat out.txt 2>/dev/null)" = hello ] && n=$((n + 1))
        [ "$(cat bye.txt 2>/dev/null)" = bye ] && n=$((n + 1))
        echo "$n of 2 right"
        awk -v n=$n 'BEGIN { print n / 2 }' > /logs/verifier/reward.txt
    """,
}
GREET_SH_STRICT = {
    **NO_TESTS,
    # A reward file only when solved: a forged one the checker read would score.
    "tests/test.sh": """
        if [ "$(cat out.txt 2>/dev/null)" = hello ] && [ "$(cat bye.txt 2>/dev/null)" = bye ]; then
            echo 1 > /logs/verifier/reward.txt
        fi
    """,
}


def reward_task(root: Path, task_id: str, script: str, timeout_s: float = 20) -> TerminalTasks:
    """A one-task source whose test.sh is `script`."""
    toml = f'[metadata]\ncategory = "files"\n\n[verifier]\ntimeout_sec = {timeout_s}\n'
    write_task(root, task_id, {**NO_TESTS, "task.toml": toml, "tests/test.sh": script})
    return TerminalTasks([root])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> TerminalTasks:
    """A task folder of small tasks made for these tests."""
    root = tmp_path_factory.mktemp("terminal-tasks")
    write_task(root, "greet", GREET)
    write_task(root, "broken-setup", {**GREET, "setup.sh": "echo setting up; echo boom >&2; exit 3\n"})
    write_task(root, "bad-checker", {**GREET, "tests/test_outputs.py": "def test_x(:\n    pass\n"})
    write_task(root, "greet-sh", GREET_SH)
    write_task(root, "greet-sh-strict", GREET_SH_STRICT)
    # Both checkers in tests/: pytest unless task.toml says test.sh.
    write_task(root, "greet-both", {**GREET, "tests/test.sh": GREET_SH["tests/test.sh"]})
    both_sh = {**GREET, "tests/test.sh": GREET_SH["tests/test.sh"]}
    write_task(root, "greet-both-sh", {**both_sh, "task.toml": '[verifier]\nchecker = "test.sh"\n'})
    return TerminalTasks([root], max_steps=7)


def bash(command: str, call_id: str = "c1") -> ToolCallAction:
    return ToolCallAction(id=call_id, name="bash", arguments={"command": command})


def call(name: str, call_id: str = "c1", **arguments) -> ToolCallAction:
    return ToolCallAction(id=call_id, name=name, arguments=arguments)


# ---- every shipped task ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", SHIPPED_IDS)
def test_oracle_solves_task(episodes, task_id):
    env = episodes(SHIPPED, task_id)
    env.reset()
    res = env.run_oracle()
    assert res.exit_code == 0, res.report()
    assert env.outcome() == 1.0, env.verdict.report


@pytest.mark.parametrize("task_id", SHIPPED_IDS)
def test_doing_nothing_does_not_solve_task(episodes, task_id):
    env = episodes(SHIPPED, task_id)
    env.reset()
    obs = env.step(Action(text="I am done."))
    assert obs.done and obs.done_reason == "answered"
    assert env.outcome() < 1.0
    assert env.verdict.valid, env.verdict.report  # the checker ran (it is not 0 because it broke)
    if env.verdict.checker == "pytest":
        assert 2 <= env.verdict.total <= 6


def test_shipped_task_list():
    infos = SHIPPED.tasks()
    assert len(infos) >= 30
    assert len({t.task_id for t in infos}) == len(infos)
    assert SHIPPED.skipped == {}
    assert {t.category for t in infos} == CATEGORIES
    for info in infos:
        assert info.setting == "terminal" and info.title and info.max_steps == 10
        assert SHIPPED.get(info.task_id).solution_dir is not None, info.task_id
    checkers = {SHIPPED.get(t.task_id).checker for t in infos}
    assert checkers == {"pytest", "test.sh"}  # Harbor's test.sh convention has a shipped example


# ---- task folders ---------------------------------------------------------------------------------------------------


def test_malformed_folders_skipped(tmp_path):
    write_task(tmp_path, "good", GREET)
    write_task(tmp_path, "good-sh", GREET_SH)
    write_task(tmp_path, "no-instruction", {k: v for k, v in GREET.items() if k != "instruction.md"})
    write_task(tmp_path, "no-tests", NO_TESTS)
    write_task(tmp_path, "bad-toml", {**GREET, "task.toml": "[metadata\ntitle = 1\n"})
    write_task(tmp_path, "no-test-sh", {**GREET, "task.toml": '[verifier]\nchecker = "test.sh"\n'})
    write_task(tmp_path, "no-pytest", {**GREET_SH, "task.toml": '[verifier]\nchecker = "pytest"\n'})
    write_task(tmp_path, "bad-checker-name", {**GREET, "task.toml": '[verifier]\nchecker = "make"\n'})
    source = TerminalTasks([tmp_path])
    assert [t.task_id for t in source.tasks()] == ["good", "good-sh"]
    assert {p.name for p in source.skipped} == {
        "no-instruction",
        "no-tests",
        "bad-toml",
        "no-test-sh",
        "no-pytest",
        "bad-checker-name",
    }
    with pytest.raises(UnknownTask):
        source.make("no-tests", None)
    with pytest.raises(UnknownTask):
        source.make("nothing-like-it", None)


def test_several_task_dirs_first_wins(tmp_path):
    write_task(tmp_path / "a", "greet", GREET)
    write_task(tmp_path / "b", "greet", {**GREET, "task.toml": '[metadata]\ntitle = "Other"\n'})
    write_task(tmp_path / "b", "untitled", {k: v for k, v in GREET.items() if k != "task.toml"})
    source = TerminalTasks([tmp_path / "a", tmp_path / "b"], max_steps=4)
    infos = {t.task_id: t for t in source.tasks()}
    assert infos["greet"].title == "Greet"
    assert infos["untitled"].title.startswith("Write `hello`")  # no task.toml: the instruction's first line
    assert infos["untitled"].max_steps == 4


# ---- reset, tools, steps --------------------------------------------------------------------------------------------


def test_reset_prepares_workspace(episodes, tiny):
    env = episodes(tiny, "greet")
    system, user = env.reset()
    assert system["role"] == "system" and "/app" in system["content"] and "submit" in system["content"]
    assert "7 steps" in system["content"]
    assert user == {"role": "user", "content": GREET["instruction.md"].strip()}
    assert [t["function"]["name"] for t in env.tools()] == ["bash", "write_file", "read_file", "submit"]
    obs = env.step(Action(tool_calls=[bash("cat seed.txt setup.txt; pwd")]))
    assert obs.tool_results[0].content.startswith("seed\nfrom-setup\n/app")


def test_bash_returns_output_and_exit_code(episodes, tiny):
    env = episodes(tiny, "greet")
    env.reset()
    obs = env.step(Action(tool_calls=[bash("echo out; echo err >&2; exit 3")]))
    (res,) = obs.tool_results
    assert res.exit_code == 3 and not res.error and res.call_id == "c1" and res.name == "bash"
    assert "out" in res.content and "err" in res.content and "[exit code 3]" in res.content
    assert not obs.done


def test_write_and_read_file(episodes, tiny):
    env = episodes(tiny, "greet")
    env.reset()
    obs = env.step(
        Action(
            tool_calls=[
                call("write_file", "w", path="notes/a.txt", content="line 1\nline 2\n"),
                call("read_file", "r", path="/app/notes/a.txt"),
                bash("stat -c %u notes/a.txt; id -u", "b"),
            ]
        )
    )
    w, r, b = obs.tool_results
    assert not w.error and "wrote 14 bytes" in w.content
    assert not r.error and r.content == "line 1\nline 2\n"
    owner, me = b.content.splitlines()[:2]
    assert owner == me  # written as the agent's own uid, not as root
    missing = env.step(Action(tool_calls=[call("read_file", path="nope.txt")])).tool_results[0]
    assert missing.error and "No such file" in missing.content


def test_paths_outside_app_refused(episodes, tiny):
    env = episodes(tiny, "greet")
    env.reset()
    outside = ["/etc/passwd", "../escape.txt", "/app/../etc/x", "/app", "/tmp/x", ""]
    calls = [call("write_file", f"w{i}", path=p, content="x") for i, p in enumerate(outside)]
    calls.append(call("read_file", "r", path="/etc/hostname"))
    obs = env.step(Action(tool_calls=calls))
    assert len(obs.tool_results) == len(calls)
    assert all(r.error and r.content.startswith("error:") for r in obs.tool_results)
    assert "outside /app" in obs.tool_results[0].content
    assert not obs.done


def test_bad_calls_reported_and_episode_goes_on(episodes, tiny):
    env = episodes(tiny, "greet")
    env.reset()
    obs = env.step(Action(parse_error="invalid JSON in tool call arguments"))
    assert not obs.done and "could not be parsed" in obs.user_message and "invalid JSON" in obs.user_message
    obs = env.step(
        Action(
            tool_calls=[
                call("rm_rf", "a", path="/"),
                call("bash", "b"),
                call("bash", "c", command="ls", timeout=5),
                call("bash", "d", command=["ls"]),
                call("write_file", "e", path="x.txt"),
            ]
        )
    )
    unknown, missing, extra, wrong_type, no_content = obs.tool_results
    assert "unknown tool 'rm_rf'" in unknown.content
    assert "command" in missing.content and "required" in missing.content.lower()
    assert "timeout" in extra.content
    assert wrong_type.error and no_content.error and not obs.done
    assert env.step(Action(tool_calls=[bash("echo still here")])).tool_results[0].content.startswith("still here")


def test_no_tool_calls_ends_episode(episodes, tiny):
    env = episodes(tiny, "greet")
    env.reset()
    obs = env.step(Action(text="The answer is 42."))
    assert obs.done and obs.done_reason == "answered" and obs.tool_results == []


def test_submit_ends_episode(episodes, tiny):
    env = episodes(tiny, "greet")
    env.reset()
    obs = env.step(
        Action(
            tool_calls=[
                bash("echo hello > out.txt", "a"),
                call("submit", "b", summary="wrote out.txt"),
                bash("echo bye > bye.txt", "c"),
            ]
        )
    )
    ran, submitted, skipped = obs.tool_results
    assert ran.exit_code == 0 and not submitted.error
    assert skipped.error and "not run" in skipped.content
    assert obs.done and obs.done_reason == "submitted"
    assert env.outcome() == 0.5  # out.txt written before the submit, bye.txt never


def test_runaway_command_stopped(episodes, tiny):
    env = episodes(tiny, "greet")
    env.reset()
    started = time.monotonic()
    obs = env.step(Action(tool_calls=[bash("echo start; sleep 1000 & while :; do :; done")]))
    (res,) = obs.tool_results
    assert time.monotonic() - started < WALL_S + 5
    assert res.exit_code == 124 and res.error and "wall clock" in res.content and "start" in res.content
    after = env.step(Action(tool_calls=[bash("pgrep -c sleep || true; echo ok")])).tool_results[0]
    assert after.exit_code == 0 and after.content.splitlines()[:2] == ["0", "ok"]


# ---- the checker ----------------------------------------------------------------------------------------------------


def test_outcome_partial_and_cached(episodes, tiny):
    env = episodes(tiny, "greet")
    env.reset()
    env.step(Action(tool_calls=[call("write_file", path="/app/out.txt", content="hello\n")]))
    assert env.outcome() == 0.5
    assert (env.verdict.passed, env.verdict.total) == (1, 2)
    env.step(Action(tool_calls=[call("write_file", path="bye.txt", content="bye\n")]))
    assert env.outcome() == 0.5  # computed once per episode


def test_checker_hidden_and_not_hijackable(episodes, tiny):
    env = episodes(tiny, "greet")
    env.reset()
    obs = env.step(
        Action(
            tool_calls=[
                bash("ls /tests /results 2>&1; ls -a", "ls"),
                # Files that would take the checker over if /app were on its sys.path or a pytest rootdir.
                call("write_file", "p", path="pytest.py", content="import sys\nsys.exit(0)\n"),
                call("write_file", "c", path="conftest.py", content="collect_ignore_glob = ['*']\n"),
            ]
        )
    )
    listing = obs.tool_results[0].content
    assert "No such file" in listing and "test_outputs" not in listing
    assert env.outcome() == 0.0 and env.verdict.valid and env.verdict.total == 2


def test_collection_error_scores_zero(episodes, tiny):
    env = episodes(tiny, "bad-checker")
    env.reset()
    env.run_oracle()
    assert env.outcome() == 0.0 and not env.verdict.valid


def test_which_checker(tiny):
    assert tiny.get("greet").checker == "pytest"
    assert tiny.get("greet-sh").checker == "test.sh"
    assert tiny.get("greet-both").checker == "pytest"
    assert tiny.get("greet-both-sh").checker == "test.sh"


@pytest.mark.parametrize("task_id", ["greet-sh", "greet-both-sh"])
def test_test_sh_solved_scores_one(episodes, tiny, task_id):
    env = episodes(tiny, task_id)
    env.reset()
    assert env.run_oracle().exit_code == 0
    assert env.outcome() == 1.0, env.verdict.report
    v = env.verdict
    assert v.checker == "test.sh" and v.valid and v.reward == 1.0 and v.reason == "" and "2 of 2 right" in v.report


def test_test_sh_unsolved_scores_zero_and_partial_counts(episodes, tiny):
    env = episodes(tiny, "greet-sh")
    env.reset()
    env.step(Action(text="I am done."))
    assert env.outcome() == 0.0 and env.verdict.valid and env.verdict.reward == 0.0
    env = episodes(tiny, "greet-sh")
    env.reset()
    env.step(Action(tool_calls=[call("write_file", path="out.txt", content="hello\n")]))
    assert env.outcome() == 0.5 and env.verdict.valid


def test_test_sh_forged_reward_is_ignored(episodes, tiny):
    env = episodes(tiny, "greet-sh-strict")
    env.reset()
    forge = "\n".join(
        [
            "mkdir -p /logs/verifier",
            "echo 1 > /logs/verifier/reward.txt",
            """echo '{"reward": 1}' > /logs/verifier/reward.json""",
            "(sleep 5; echo 1 > /logs/verifier/reward.txt) &",  # a late writer: it dies with its command
            "mkdir -p logs/verifier && echo 1 > logs/verifier/reward.txt",  # /app/logs: not where the checker reads
            "cat /logs/verifier/reward.txt",
        ]
    )
    obs = env.step(Action(tool_calls=[bash(forge, "forge"), bash("cat /logs/verifier/reward.txt; ls /tests", "look")]))
    forged, look = obs.tool_results
    assert forged.exit_code == 0 and forged.content.startswith("1\n")  # the write worked, in its own command
    assert "No such file" in look.content  # each command's / is its own: the forged file died with its command
    assert env.outcome() == 0.0
    assert not env.verdict.valid and "no reward file" in env.verdict.reason


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("true", "wrote no reward file"),
        ("echo lots > /logs/verifier/reward.txt", "not a number: 'lots'"),
        (": > /logs/verifier/reward.txt", "empty"),
        ("echo 1.5 > /logs/verifier/reward.txt", "outside [0, 1]"),
        ("echo -0.25 > /logs/verifier/reward.txt", "outside [0, 1]"),
        ("echo nan > /logs/verifier/reward.txt", "outside [0, 1]"),
        ("echo '{\"score\": 1}' > /logs/verifier/reward.json", '"reward" key'),
        ('echo \'{"reward": "1"}\' > /logs/verifier/reward.json', "not a number"),
        ("echo '{\"reward\": 1' > /logs/verifier/reward.json", "not JSON"),
        ("echo bad > /logs/verifier/reward.txt; echo '{\"reward\": 1}' > /logs/verifier/reward.json", "not a number"),
        ("ln -s /etc/hostname /logs/verifier/reward.txt", "cannot be read"),  # never read through a link
        ("mkfifo /logs/verifier/reward.txt", "not a regular file"),  # nor wait on a fifo
        ("head -c 100000 /dev/zero | tr '\\0' 1 > /logs/verifier/reward.txt", "over 65536 bytes"),
    ],
)
def test_a_bad_reward_file_is_an_invalid_verdict(episodes, tmp_path, script, reason):
    env = episodes(reward_task(tmp_path, "bad-reward", script), "bad-reward")
    env.reset()
    assert env.outcome() == 0.0
    v = env.verdict
    assert v.checker == "test.sh" and not v.valid and reason in v.reason, v.reason
    assert f"[checker: {v.reason}]" in v.report


def test_a_test_sh_past_its_time_limit_is_an_invalid_verdict(episodes, tmp_path):
    env = episodes(reward_task(tmp_path, "slow", "echo 1 > /logs/verifier/reward.txt; sleep 30\n", 1.0), "slow")
    env.reset()
    started = time.monotonic()
    assert env.outcome() == 0.0 and time.monotonic() - started < 10
    assert not env.verdict.valid and env.verdict.limit == "wall_clock" and "1 s time limit" in env.verdict.reason


@pytest.mark.parametrize(
    ("script", "outcome"),
    [
        ('echo \'{"reward": 0.25, "style": 1}\' > /logs/verifier/reward.json', 0.25),
        ("echo 0.5 > /logs/verifier/reward.txt; echo '{\"reward\": 1}' > /logs/verifier/reward.json", 0.5),
        ("echo ' 1 ' > /logs/verifier/reward.txt; exit 3", 1.0),  # Harbor reads the reward, not the exit code
    ],
)
def test_reward_files_as_harbor_reads_them(episodes, tmp_path, script, outcome):
    env = episodes(reward_task(tmp_path, "reward", script), "reward")
    env.reset()
    assert env.outcome() == outcome and env.verdict.valid, env.verdict.reason


def test_failing_setup_raises(episodes, tiny):
    env = episodes(tiny, "broken-setup")
    with pytest.raises(TaskSetupFailed, match="(?s)exited 3.*boom"):
        env.reset()
    assert env.box is None  # the sandbox was released


def test_close_is_idempotent(episodes, tiny):
    env = episodes(tiny, "greet")
    env.reset()
    workspace = env.box.workspace
    env.close()
    env.close()
    assert not workspace.exists()
    with pytest.raises(RuntimeError):
        env.step(Action(tool_calls=[bash("true")]))
