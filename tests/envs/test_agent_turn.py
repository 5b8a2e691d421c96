"""The agent-turn codec (envs/agent_turn.py): the one parser of a policy's completion and the one renderer of an
observation as chat messages, shared by the episodes, the corpus builders and the benchmarks."""

from __future__ import annotations

from envs.agent_turn import observation_messages, parse_action
from envs.base import Observation, ToolResult


def test_a_tool_call_parses_into_an_action_and_the_assistant_message():
    text = 'Let me count.\n<tool_call>\n{"name": "bash", "arguments": {"command": "wc -l < a.txt"}}\n</tool_call>'
    action, message = parse_action(text, call_id_prefix="s0")
    assert [(c.name, c.arguments) for c in action.tool_calls] == [("bash", {"command": "wc -l < a.txt"})]
    assert action.parse_error is None and action.text == "Let me count."
    assert message["role"] == "assistant" and message["content"] == "Let me count."
    (call,) = message["tool_calls"]
    assert call["id"] == action.tool_calls[0].id and "s0" in call["id"]
    assert call["function"]["name"] == "bash"


def test_a_final_answer_has_no_tool_calls():
    action, message = parse_action("The answer is 42.", call_id_prefix="s3")
    assert action.tool_calls == [] and action.parse_error is None and action.text == "The answer is 42."
    assert message == {"role": "assistant", "content": "The answer is 42."}


def test_a_malformed_call_is_part_of_the_action_never_an_error():
    action, _ = parse_action('<tool_call>\n{"name": "bash", "arguments": [1, 2]}\n</tool_call>', call_id_prefix="s1")
    assert action.tool_calls == [] and "not a JSON object" in (action.parse_error or "")
    action, _ = parse_action("<tool_call>\n{not json\n</tool_call>", call_id_prefix="s1")
    assert action.tool_calls == [] and "<tool_call>" in (action.parse_error or "")


def test_an_observation_renders_each_tool_result_with_its_call_id_and_name_then_the_user():
    obs = Observation(
        tool_results=[
            ToolResult(call_id="s0-0", name="bash", content="3\n", exit_code=0),
            ToolResult(call_id="s0-1", name="python", content="Traceback", error=True),
        ],
        user_message="Write the number to answer.txt.",
    )
    assert observation_messages(obs) == [
        {"role": "tool", "tool_call_id": "s0-0", "name": "bash", "content": "3\n"},
        {"role": "tool", "tool_call_id": "s0-1", "name": "python", "content": "Traceback"},
        {"role": "user", "content": "Write the number to answer.txt."},
    ]
    assert observation_messages(Observation(done=True)) == []
