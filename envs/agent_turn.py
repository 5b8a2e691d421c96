"""The agent-turn codec: the policy's completion as an environment `Action`, and an `Observation` as the chat
messages the conversation continues with (OpenAI format).

One module for the episodes (`agent_step`, `env_step`), the corpus builders and the benchmarks, so the messages a
policy is pretrained on, played against, and served are the same.
"""

from __future__ import annotations

import json

from envs.base import Action, Observation, ToolCallAction
from policy_client.chat_output import CALL_OPEN, parse_completion


def parse_action(text: str, call_id_prefix: str) -> tuple[Action, dict]:
    """The action and the assistant message the conversation continues with (OpenAI format)."""
    parsed = parse_completion(text, call_id_prefix=call_id_prefix)
    calls, errors = [], []
    for c in parsed.tool_calls:
        try:
            args = json.loads(c.arguments or "{}")
        except ValueError:
            args = None
        if not isinstance(args, dict):
            errors.append(f"the arguments of {c.name} are not a JSON object")
            continue
        calls.append(ToolCallAction(id=c.id, name=c.name, arguments=args))
    if CALL_OPEN in parsed.content:
        errors.append('a <tool_call> block is not valid JSON of the form {"name": ..., "arguments": {...}}')
    action = Action(text=parsed.content, tool_calls=calls, parse_error="; ".join(errors) or None)
    message: dict = {"role": "assistant", "content": parsed.content}
    if parsed.tool_calls:
        message["tool_calls"] = [c.to_openai() for c in parsed.tool_calls]
    return action, message


def observation_messages(obs: Observation) -> list[dict]:
    """What an observation adds to the conversation: one `tool` message per tool result (its call's id, the tool's
    name, its output), then what the user said, if anything."""
    added: list[dict] = [
        {"role": "tool", "tool_call_id": r.call_id, "name": r.name, "content": r.content} for r in obs.tool_results
    ]
    if obs.user_message:
        added.append({"role": "user", "content": obs.user_message})
    return added
