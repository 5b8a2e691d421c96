"""The Messages and Responses codecs on their own: each protocol's request into the internal chat form, the
answer's stop reason, the session a request names, and the error shape (no stack)."""

from __future__ import annotations

import json

import pytest

from api import anthropic_messages as am
from api import openai_responses as orr
from api.errors import ApiError
from contracts.chat import GenerateOutput, ToolCall


def out(**kw) -> GenerateOutput:
    return GenerateOutput(**{"content": "", "finish_reason": "stop", "prompt_tokens": 3, "completion_tokens": 2, **kw})


def test_a_messages_request_becomes_the_chat_form_with_tool_calls_and_results_in_order():
    req = am.validate(
        {
            "model": "policy",
            "max_tokens": 50,
            "system": [{"type": "text", "text": "be brief"}],
            "tools": [{"name": "read", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any"},
            "stop_sequences": ["END"],
            "messages": [
                {"role": "user", "content": "read it"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Looking."},
                        {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "A"}]},
                        {"type": "text", "text": "and?"},
                    ],
                },
            ],
        }
    )
    chat = am.to_chat(req)
    msgs = [m.for_template() for m in chat.messages]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "user"]
    assert msgs[0]["content"] == "be brief" and msgs[2]["content"] == "Looking."
    assert msgs[2]["tool_calls"][0]["function"] == {"name": "read", "arguments": json.dumps({"path": "a"})}
    assert msgs[3] == {"role": "tool", "content": "A", "tool_call_id": "t1"}
    assert chat.tool_choice == "required" and chat.stop_list() == ["END"] and chat.max_tokens == 50
    assert chat.template_tools()[0]["function"]["parameters"] == {"type": "object"}


@pytest.mark.parametrize(
    ("user_id", "session"),
    [
        ("user_abc_account_123_session_9f1c-77", "9f1c-77"),
        (json.dumps({"device_id": "d", "session_id": "s-1"}), "s-1"),
        ("just-a-person", None),
        (None, None),
    ],
)
def test_a_messages_session_comes_from_the_session_part_of_metadata_user_id(user_id, session):
    body = {"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "metadata": {"user_id": user_id}}
    hint = am.session_hint(am.validate(body))
    assert (hint.session_id if hint else None) == session


def test_stop_reasons_and_blocks_of_an_answer():
    call = ToolCall(id="c1", name="read", arguments='{"path": "x"}')
    assert am.stop_reason(out(content="hi")) == "end_turn"
    assert am.stop_reason(out(content="hi", finish_reason="length")) == "max_tokens"
    assert am.stop_reason(out(content="hi", stop_sequence="END")) == "stop_sequence"
    assert am.stop_reason(out(tool_calls=[call], finish_reason="tool_calls")) == "tool_use"
    blocks = am.content_blocks(out(content="hi", tool_calls=[call]))
    assert blocks == [
        {"type": "text", "text": "hi"},
        {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "x"}},
    ]
    odd = ToolCall(id="c2", name="read", arguments="[1]")
    assert am.content_blocks(out(tool_calls=[odd]))[0]["input"] == {"arguments": [1]}


def test_messages_errors_take_anthropics_shape_and_a_422_is_its_400():
    assert am.error_shape(ApiError(422, "messages: bad")) == (
        400,
        {"type": "error", "error": {"type": "invalid_request_error", "message": "messages: bad"}},
    )
    assert am.error_shape(ApiError(429, "slow down"))[1]["error"]["type"] == "rate_limit_error"
    assert am.error_shape(ApiError(401, "who?"))[1]["error"]["type"] == "authentication_error"
    with pytest.raises(ApiError) as bad:
        am.validate({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image"}]}]})
    assert bad.value.status == 400 and "messages.0.content" in bad.value.message


def test_responses_items_become_the_chat_form_and_calls_join_the_assistant_message():
    req = orr.validate(
        {
            "instructions": "be brief",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "read it"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
                {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "read", "arguments": "{}"},
                {"type": "reasoning", "summary": []},
                {"type": "function_call_output", "call_id": "c1", "output": "A"},
                {"type": "function_call_output", "call_id": "c2", "output": "B"},
            ],
            "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}],
            "tool_choice": {"type": "function", "name": "read"},
            "max_output_tokens": 9,
        }
    )
    history = orr.to_messages(req)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in history[1]["tool_calls"]] == ["c1", "c2"] and history[1]["content"] == "Looking."
    chat = orr.to_chat(req, history)
    assert chat.messages[0].role == "system" and chat.max_tokens == 9
    assert chat.tool_choice == {"type": "function", "function": {"name": "read"}}
    assert orr.to_messages(orr.validate({"input": "hello"})) == [{"role": "user", "content": "hello"}]


def test_codex_tools_and_items_map_onto_function_tools_and_calls():
    """What Codex CLI sends (tests/api/test_harness_codex.py): custom and namespace tools become function tools the
    policy can call, hosted ones are left out; a custom tool's call and output round-trip as chat tool calls."""
    grammar = {"type": "grammar", "syntax": "lark", "definition": "start: hunk+"}
    req = orr.validate(
        {
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "patch it"}]},
                {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch"},
                {"type": "custom_tool_call_output", "call_id": "c1", "output": "Success"},
            ],
            "tools": [
                {"type": "function", "name": "exec_command", "strict": False, "parameters": {"type": "object"}},
                {"type": "custom", "name": "apply_patch", "description": "edit files", "format": grammar},
                {"type": "namespace", "name": "agents", "tools": [{"type": "function", "name": "spawn_agent"}]},
                {"type": "web_search", "external_web_access": False},
                {"type": "tool_search", "execution": "client", "parameters": {"type": "object"}},
            ],
            "tool_choice": "auto",
            "parallel_tool_calls": True,
            "reasoning": {"summary": "auto"},
            "store": False,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "thread-1",
            "text": {"verbosity": "low"},
            "client_metadata": {"x": "y"},
        }
    )
    history = orr.to_messages(req)
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool"]
    call = history[2]["tool_calls"][0]["function"]
    assert call == {"name": "apply_patch", "arguments": '{"input": "*** Begin Patch"}'}
    tools = orr.to_chat(req, history).tools
    assert [t.function.name for t in tools] == ["exec_command", "apply_patch", "spawn_agent"]
    assert tools[1].function.parameters["required"] == ["input"]
    assert "start: hunk+" in tools[1].function.parameters["properties"]["input"]["description"]
    assert orr.tool_kinds(req) == {"apply_patch": "custom", "spawn_agent": "namespace:agents"}
    assert orr.custom_input(json.dumps({"input": "*** Begin Patch\n"})) == "*** Begin Patch\n"
    assert orr.custom_input("not json") == "not json"


@pytest.mark.parametrize(
    "body",
    [
        {"input": 5},
        {"input": [{"type": "input_image", "image_url": "x"}]},
        {"input": [{"type": "function_call", "name": "x"}]},
        {"input": "hi", "tools": [{"type": "teleport"}]},
        {"input": "hi", "tools": [{"type": "custom"}]},
        {"input": "hi", "tools": [{"type": "namespace", "name": "n", "tools": [{"type": "web_search"}]}]},
        {"input": [{"type": "custom_tool_call", "call_id": "c", "name": "x", "input": 5}]},
        {"input": "hi", "store": "maybe"},
    ],
)
def test_a_responses_request_of_the_wrong_shape_is_a_400_with_where(body):
    with pytest.raises(ApiError) as bad:
        orr.validate(body)
    assert bad.value.status == 400 and bad.value.param
