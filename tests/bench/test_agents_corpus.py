"""The base agent policy's corpus: right programs, the episode's own messages, the imperfect mix, no held-out leak."""

from __future__ import annotations

import json
from collections import Counter

from bench.agents import basemodel, runner, trajectories
from envs.toolcall import python_tool
from envs.toolcall.math_env import SYSTEM_PROMPT


def test_every_kind_s_program_prints_the_exact_answer():
    problems = [trajectories.corpus_problem(i, 7) for i in range(140)]
    assert {p.kind for p in problems} == set(trajectories.KINDS)
    trajectories.check_solutions(problems)  # raises on a wrong program


def test_programs_pass_the_environment_s_own_checks():
    for i in range(len(trajectories.KINDS)):
        assert python_tool.refusal(trajectories.solution(trajectories.corpus_problem(i, 0))) is None


def test_a_good_trajectory_is_what_an_episode_renders():
    """Step texts parse as the episode parses them; the tool reply is the env's; the answer is the printed value."""
    for i in range(200):
        steps, tools, outcome = trajectories.trajectory(i, 3)
        if outcome == 1.0 and len(steps) == 2:
            break
    (opening, call), (before_answer, answer) = steps
    assert tools == [python_tool.DEFINITION]
    assert opening[0]["role"] == "system" and opening[0]["content"].startswith(SYSTEM_PROMPT.split("{")[0])
    assert f"at most {trajectories.MAX_STEPS} steps" in opening[0]["content"]
    assert call.startswith("<tool_call>\n") and call.endswith("\n</tool_call>")
    assert json.loads(call.split("\n")[1])["name"] == "python"
    assistant, tool = before_answer[-2], before_answer[-1]
    assert assistant["role"] == "assistant" and assistant["tool_calls"][0]["function"]["name"] == "python"
    assert tool["role"] == "tool" and tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert answer.endswith(f"\\boxed{{{tool['content']}}}")


def test_the_base_behaviour_is_imperfect_in_the_planned_proportions():
    runs = [trajectories.trajectory(i, 11) for i in range(1500)]
    success = sum(o for _, _, o in runs) / len(runs)
    # good (0.32) + half of malformed (0.05) + miscopied that still come out right (rare): about 0.37
    assert 0.31 < success < 0.44, success
    no_tool = [s for s, _, _ in runs if not s[0][1].startswith("<tool_call>")]
    assert 0.31 * len(runs) < len(no_tool) < 0.41 * len(runs)  # planned: 0.36
    assert all(s[0][1].startswith("The answer is") for s in no_tool)  # one opening: a choice at the first token
    malformed = [s for s, _, _ in runs if any("could not be parsed" in str(m.get("content")) for m in s[-1][0])]
    assert 0.07 * len(runs) < len(malformed) < 0.13 * len(runs)  # planned: 0.10


def test_corpus_questions_never_include_a_held_out_task():
    from envs.toolcall.math_tasks import generate

    _, held_out = runner.split_tasks(runner.AgentBenchConfig(eval_tasks=len(trajectories.held_out())), "toolcall")
    by_id = {p.task_id: p.question for p in generate(runner.MATH_COUNT)}
    held = {by_id[t] for t in held_out}
    seed = basemodel.DEFAULT.seed
    used = {basemodel.MIX.episode_of(i) for i in basemodel.corpus_indices(basemodel.DEFAULT)}
    seen = {trajectories.corpus_problem(n, seed).question for setting, n in used if setting == "toolcall"}
    assert len(seen) > 1000 and not held & seen


def test_training_and_held_out_tasks_are_disjoint_and_balanced():
    from envs.toolcall.math_tasks import generate

    cfg = runner.AgentBenchConfig(eval_tasks=72)
    for setting in runner.SETTINGS:
        train, held_out = runner.split_tasks(cfg, setting)
        assert not set(train) & set(held_out) and len(held_out) == 72
        assert runner.split_tasks(runner.AgentBenchConfig(seed=1), setting)[0] != train  # the seed orders them
    _, held_out = runner.split_tasks(cfg, "toolcall")
    kinds = Counter(p.kind for p in generate(runner.MATH_COUNT) if p.task_id in set(held_out))
    assert set(kinds) == set(trajectories.KINDS) and max(kinds.values()) - min(kinds.values()) <= 1
