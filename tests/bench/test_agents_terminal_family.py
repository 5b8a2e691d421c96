"""The agent benchmark's terminal family: the task folders, their checker, and the corpus's stand-in shell held
against the real sandbox (the same commands, the same tool results)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from bench.agents import basemodel, terminal_trajectories
from envs.agent_turn import parse_action
from envs.sandbox import SandboxLimits, SandboxPool, sandbox_problem
from envs.terminal import counting_tasks
from envs.terminal.source import TerminalTasks


@pytest.fixture(scope="module")
def sandboxes():
    if os.geteuid() != 0:
        pytest.skip("terminal episodes need root (a sandbox uid per episode)")
    why = sandbox_problem()
    if why:
        pytest.skip(f"sandboxes cannot run here: {why}")
    root = Path(tempfile.mkdtemp(prefix="oc-counting-test-", dir="/tmp"))
    try:
        yield SandboxPool(root, SandboxLimits())
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_tasks_are_balanced_reproducible_and_their_answers_vary():
    assert [counting_tasks.task(i) for i in range(6)] == [counting_tasks.task(i) for i in range(6)]
    kinds = Counter(t.kind for t in counting_tasks.held_out())
    assert set(kinds) == set(counting_tasks.KINDS) and max(kinds.values()) - min(kinds.values()) <= 1
    answers = [counting_tasks.task(i).answer for i in range(60)]
    assert len(set(answers)) > 30 and min(answers) >= 0
    training = {counting_tasks.task(i).instruction for i in range(counting_tasks.HELD_OUT_FROM)}
    assert not training & counting_tasks.held_out_instructions()  # held-out instructions are new to RL too


def test_held_out_instructions_never_appear_in_the_corpus():
    held = counting_tasks.held_out_instructions()
    used = {basemodel.MIX.episode_of(i) for i in basemodel.corpus_indices(basemodel.DEFAULT)}
    seed = basemodel.DEFAULT.seed
    seen = {counting_tasks.corpus_task(n, seed).instruction for setting, n in used if setting == "terminal"}
    assert len(seen) > 1000 and not held & seen


def test_written_tasks_load_and_the_oracle_scores_one_a_wrong_answer_zero(tmp_path, sandboxes):
    root = counting_tasks.ensure_tasks(tmp_path)
    assert counting_tasks.ensure_tasks(tmp_path) == root  # written once
    source = TerminalTasks([root], max_steps=terminal_trajectories.MAX_STEPS)
    assert len(source.tasks()) == counting_tasks.TASKS and not source.skipped
    for index in (0, 1, 2, counting_tasks.HELD_OUT_FROM):
        task = counting_tasks.task(index)
        env = source.make(task.task_id, sandboxes)
        env.reset()
        assert env.run_oracle().exit_code == 0
        assert env.outcome() == 1.0, env.verdict
        env.close()
        env = source.make(task.task_id, sandboxes)
        env.reset()
        env.box.run(f"echo {task.answer + 1} > answer.txt")
        assert env.outcome() == 0.0
        env.close()


def _replay(texts: list[str], env) -> list[dict]:
    messages = env.reset()
    for n, text in enumerate(texts):
        action, message = parse_action(text, call_id_prefix=f"s{n}")
        obs = env.step(action)
        messages.append(message)
        messages += [{"role": "tool", "tool_call_id": r.call_id, "name": r.name, "content": r.content}
                     for r in obs.tool_results]  # fmt: skip
        if obs.user_message:
            messages.append({"role": "user", "content": obs.user_message})
        if obs.done:
            break
    return messages


def test_the_stand_in_shell_answers_as_the_sandbox_does(tmp_path, sandboxes):
    """Every behaviour's commands, run in the real sandbox on the same files, give the corpus's exact messages
    (missing files, wrong words, no match, a malformed call) and the same outcome."""
    seed, seen = 5, Counter()
    for index in range(200):
        steps, _, outcome = terminal_trajectories.trajectory(index, seed)
        task = counting_tasks.corpus_task(index, seed)
        kind = (task.kind, len(steps), outcome)
        if seen[kind] >= 2:
            continue
        seen[kind] += 1
        folder = tmp_path / f"t{index}"
        task = task.model_copy(update={"task_id": f"t{index}"})
        counting_tasks.write_task(task, folder)
        env = TerminalTasks([folder], max_steps=terminal_trajectories.MAX_STEPS).make(task.task_id, sandboxes)
        try:
            real = _replay([text for _, text in steps], env)
            assert real[: len(steps[-1][0])] == steps[-1][0], (index, steps[-1][0], real)
            assert env.outcome() == outcome, (index, env.verdict)
        finally:
            env.close()
    assert len(seen) >= 12  # kinds x behaviours covered


def test_the_base_behaviour_is_imperfect_in_the_planned_proportions():
    runs = [terminal_trajectories.trajectory(i, 11) for i in range(1200)]
    success = sum(o for _, _, o in runs) / len(runs)
    # good (0.28) + look (0.08) + half of malformed (0.045) + a miscopy that finds the same count (rare)
    assert 0.34 < success < 0.47, success
    texts = [s[0][1] for s, _, _ in runs]
    no_tool = [t for t in texts if not t.startswith("<tool_call>")]
    assert 0.29 * len(runs) < len(no_tool) < 0.39 * len(runs)  # planned: 0.34
    assert all(t.startswith("The answer is") for t in no_tool)
