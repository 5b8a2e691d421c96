"""BFCL v4 multi-turn tasks: listing, live API calls, and BFCL's own checker on replayed and empty episodes."""

from __future__ import annotations

import pytest

from envs.base import Action, ToolCallAction, UnknownTask
from envs.toolcall.bfcl_data import CATEGORIES, bfcl_problem, load

why = bfcl_problem()
if why:
    pytest.skip(f"BFCL tasks need the bfcl-eval package: {why}", allow_module_level=True)

from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils  # noqa: E402

from envs.toolcall.bfcl import BfclEnv, BfclTasks, oracle_turns  # noqa: E402
from envs.toolcall.bfcl_calls import call_string  # noqa: E402
from envs.toolcall.source import ToolCallTasks  # noqa: E402

REPLAYED = [
    "bfcl/multi_turn_base_0",  # file system and Twitter
    "bfcl/multi_turn_base_60",
    "bfcl/multi_turn_base_120",
    "bfcl/multi_turn_base_199",
    "bfcl/multi_turn_miss_func_0",  # a held-out function offered at turn 3
    "bfcl/multi_turn_miss_func_49",  # its ground truth calls a held-out function before it is offered
    "bfcl/multi_turn_miss_param_10",  # a turn whose ground truth is empty (the agent must ask)
    "bfcl/multi_turn_long_context_30",
]


@pytest.fixture(scope="module")
def source() -> BfclTasks:
    return BfclTasks()


def _env(source: BfclTasks, task_id: str) -> BfclEnv:
    env = source.make(task_id, None)
    env.reset()
    return env


def _call(name: str, call_id: str = "c1", **arguments) -> Action:
    return Action(tool_calls=[ToolCallAction(id=call_id, name=name, arguments=arguments)])


def _checker_instances() -> list[str]:
    return [k for k in vars(multi_turn_utils) if k.startswith("openclaw_")]


def test_task_source_lists_every_multi_turn_entry(source):
    tasks = source.tasks()
    assert len(tasks) == sum(len(load(c)) for c in CATEGORIES) == 800
    assert len([t for t in tasks if t.category == "bfcl_multi_turn_base"]) == 200
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert all(t.setting == "toolcall" and t.task_id.startswith("bfcl/multi_turn_") and t.title for t in tasks)
    for t in tasks[:5]:
        entry = source.entry(t.task_id)
        assert t.max_steps == 4 * len(entry.turns)
    for bad in ("bfcl/multi_turn_base_9999", "bfcl/simple_python_0", "math/0", "multi_turn_base_0"):
        with pytest.raises(UnknownTask):
            source.make(bad, None)


def test_toolcall_source_lists_both_families_without_collisions():
    tasks = ToolCallTasks().tasks()
    ids = [t.task_id for t in tasks]
    assert len(ids) == len(set(ids)) == 200 + 800
    assert sum(i.startswith("math/") for i in ids) == 200 and sum(i.startswith("bfcl/") for i in ids) == 800
    assert isinstance(ToolCallTasks().make("bfcl/multi_turn_base_3", None), BfclEnv)


def test_opening_messages_and_tool_schemas(source):
    env = source.make("bfcl/multi_turn_base_0", None)
    system, user = env.reset()
    assert system["role"] == "system" and "function" in system["content"]
    assert user["role"] == "user" and user["content"] == env.entry.turns[0][0]["content"]
    tools = env.tools()
    names = {t["function"]["name"] for t in tools}
    assert {"cd", "mv", "post_tweet"} <= names
    for tool in tools:
        assert tool["type"] == "function"
        params = tool["function"]["parameters"]
        assert params["type"] == "object" and "response" not in tool["function"]
        for prop in params["properties"].values():
            assert prop["type"] in {"string", "integer", "number", "boolean", "array", "object"}


@pytest.mark.parametrize("task_id", REPLAYED)
def test_replaying_the_ground_truth_turn_by_turn_passes(source, task_id):
    env = _env(source, task_id)
    turns = oracle_turns(env.entry)
    for i, calls in enumerate(turns):
        if calls:
            obs = env.step(Action(tool_calls=calls))
            assert len(obs.tool_results) == len(calls) and not obs.done
        obs = env.step(Action(text="Done."))
        if i + 1 < len(turns):
            assert not obs.done and obs.user_message
        else:
            assert obs.done and obs.done_reason == "no_more_turns"
    assert env.outcome() == 1.0, env.verdict
    assert _checker_instances() == []  # the checker's instances do not outlive the check


@pytest.mark.parametrize("task_id", REPLAYED)
def test_doing_nothing_fails(source, task_id):
    env = _env(source, task_id)
    assert any(env.entry.ground_truth)  # the ground truth changes or reads state somewhere
    for _ in env.entry.turns:
        obs = env.step(Action(text="I cannot help with that."))
    assert obs.done and env.outcome() == 0.0
    assert env.verdict and env.verdict.error_type == "multi_turn:empty_turn_model_response"


def test_an_episode_cut_short_fails_even_when_right_so_far(source):
    env = _env(source, "bfcl/multi_turn_base_0")
    env.step(Action(tool_calls=oracle_turns(env.entry)[0]))
    env.step(Action(text="Done."))
    assert env.outcome() == 0.0 and env.verdict.error_type == "multi_turn:force_terminated"


def test_wrong_state_fails(source):
    env = _env(source, "bfcl/multi_turn_base_0")
    turns = oracle_turns(env.entry)
    for calls in turns:
        env.step(Action(tool_calls=calls))
        env.step(_call("mkdir", dir_name="extra_folder"))  # one change the user never asked for
        env.step(Action(text="Done."))
    assert env.outcome() == 0.0 and env.verdict.error_type == "multi_turn:instance_state_mismatch"


def test_bad_calls_come_back_as_errors_and_the_turn_goes_on(source):
    env = _env(source, "bfcl/multi_turn_base_0")
    unknown = env.step(_call("rm_rf", path="/"))
    assert unknown.tool_results[0].error and "no function named 'rm_rf'" in unknown.tool_results[0].content
    builtin = env.step(_call("open", file="/etc/passwd"))  # a Python builtin is not a function of the task
    assert builtin.tool_results[0].error and "no function named 'open'" in builtin.tool_results[0].content
    missing = env.step(_call("cd"))
    assert missing.tool_results[0].error and "Error during execution" in missing.tool_results[0].content
    extra = env.step(_call("cd", folder="document", color="red"))
    assert extra.tool_results[0].error and "color" in extra.tool_results[0].content
    bad_name = env.step(Action(tool_calls=[ToolCallAction(id="x", name="cd", arguments={"folder)#": "a"})]))
    assert bad_name.tool_results[0].error and "not a parameter name" in bad_name.tool_results[0].content
    api_error = env.step(_call("cd", folder="no_such_folder"))
    assert api_error.tool_results[0].error and "No such" in api_error.tool_results[0].content
    ok = env.step(_call("cd", folder="document"))
    assert not ok.tool_results[0].error and "document" in ok.tool_results[0].content
    parse = env.step(Action(parse_error="bad JSON in a tool call"))
    assert not parse.done and "could not be parsed" in parse.user_message
    assert not any(o.done for o in (unknown, builtin, missing, extra, bad_name, api_error, ok))
    # Only calls that ran are replayed by the checker; refused ones (unknown names, bad parameter names) are not.
    assert env.model_turns == [
        [["cd()"], ["cd(folder='document',color='red')"], ["cd(folder='no_such_folder')"], ["cd(folder='document')"]]
    ]


def test_runaway_math_arguments_are_refused(source):
    entry = next(e for e in load("multi_turn_base") if "MathAPI" in e.involved_classes)
    env = _env(source, "bfcl/" + entry.id)
    big = env.step(_call("power", base=10, exponent=10**9))
    assert big.tool_results[0].error and "out of the range" in big.tool_results[0].content
    ok = env.step(_call("power", base=2, exponent=10))
    assert not ok.tool_results[0].error and "1024" in ok.tool_results[0].content
    assert env.model_turns[0] == [[call_string("power", {"base": 2, "exponent": 10})]]


def test_held_out_functions_arrive_in_a_user_turn(source):
    env = _env(source, "bfcl/multi_turn_miss_func_0")
    (turn,) = env.entry.held_out
    held = [d["name"] for d in env.entry.held_out[turn]]
    assert held and not set(held) & {t["function"]["name"] for t in env.tools()}
    for _ in range(turn):
        obs = env.step(Action(text="ok"))
    assert "I have updated some more functions" in obs.user_message
    assert all(f'"name": "{name}"' in obs.user_message for name in held)
