"""`agent_step` (policy pool): one policy step of a general-agent episode, token-in/token-out.

The episode so far is rendered once with the chat template and its tools, the
policy generates through the same rollout core as a chat turn (its prompt ids,
response ids and rollout log-probs kept under the step id), and the response is
parsed into an action: OpenAI / Qwen tool calls, or a final message. A
malformed call is part of the action (the environment reports it), never an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import pool_metrics
from activities.episode_data import conversation
from activities.heartbeat import heartbeating
from activities.rollout import Rollout, RolloutResult
from contracts.chat import AGENTS_TENANT, ChatSampling
from contracts.client_episodes import (
    CLIENT_CLOSING,
    CLIENT_STEP,
    ClientStepActivityInput,
    ClientStepActivityOutput,
    ClosingInput,
)
from contracts.episodes import AGENT_STEP, AgentStepInput, AgentStepOutput
from contracts.errors import ErrorType
from contracts.summary import clip
from envs.agent_turn import parse_action
from envs.base import Action, Observation, ToolResult
from openclaw_rl.settings import Settings
from policy_client import PolicyClient
from policy_client.chat import message_text
from policy_client.chat_output import generate_output
from store.client import Store
from store.episodes import EpisodeOpening, StepAction, StepObservation
from store.turns import TurnTokens

HEARTBEAT_S = 5.0


@dataclass(frozen=True)
class _Generated:
    prompt_ids: list[int]
    gen: RolloutResult
    text: str
    action: Action


class AgentActivities:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.store = Store.from_settings(settings)
        self.policy = PolicyClient.from_settings(settings)
        self.rollout = Rollout(settings, self.store, self.policy)

    @activity.defn(name=AGENT_STEP.name)
    async def agent_step(self, inp: AgentStepInput) -> AgentStepOutput:
        messages, tools = await conversation(self.store.episodes, inp.attempt_key, inp.step)
        sampling = ChatSampling(temperature=inp.temperature, max_tokens=inp.max_tokens)
        step = await self._step(inp.attempt_key, inp.step, inp.step_id, messages, tools, sampling)
        prompt_ids, gen, action = step.prompt_ids, step.gen, step.action
        pool_metrics.episode_step("agent")
        return AgentStepOutput(
            action=summarize(action),
            tool_calls=len(action.tool_calls),
            parse_error=action.parse_error,
            finish_reason=gen.finish,
            weight_version=gen.weight_version,
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(gen.ids),
        )

    @activity.defn(name=CLIENT_STEP.name)
    async def client_step(self, inp: ClientStepActivityInput) -> ClientStepActivityOutput:
        """A client-driven episode's model call: its messages rendered as sent (token-exact samples), the answer
        kept as the step's action, and what the request added since the previous answer as that step's next
        state."""
        req = await self.store.requests.load_key(inp.request_key)
        if req is None:
            raise ApplicationError(
                f"the model call's request {inp.request_key} is not in Redis",
                type=ErrorType.REQUEST_MISSING,
                non_retryable=True,
            )
        eps = self.store.episodes
        previous = None
        # The opening is what the harness sent first (its own system prompt and the task), also for a task episode
        # (whose environment wrote its own): the judge reads what the policy saw.
        if inp.step == 0:
            await eps.open(
                inp.attempt_key, EpisodeOpening(messages=req.messages, tools=req.tools or [], setting=inp.setting)
            )
        else:
            added = messages_after_last_answer(req.messages)
            obs = observation_of(added)
            await eps.save_observation(inp.attempt_key, inp.step - 1, StepObservation(observation=obs, messages=added))
            previous = clip(obs.text())
        step = await self._step(inp.attempt_key, inp.step, inp.step_id, req.messages, req.tools, inp.sampling)
        prompt_ids, gen, text, action = step.prompt_ids, step.gen, step.text, step.action
        pool_metrics.episode_step("client")
        output = generate_output(
            text,
            gen.finish,
            call_id_prefix=f"s{inp.step}",
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(gen.ids),
            weight_version=gen.weight_version,
        )
        return ClientStepActivityOutput(output=output, action=summarize(action), previous_observation=previous)

    async def _step(
        self,
        attempt_key: str,
        index: int,
        step_id: str,
        messages: list[dict],
        tools: list[dict] | None,
        sampling: ChatSampling,
    ) -> _Generated:
        """One policy step of an episode: render, generate, keep the token data under the step id, parse the
        answer into the step's action and save it."""
        prompt_ids = await self.rollout.render(messages, tools)
        params = await self.rollout.params(sampling, len(prompt_ids))
        async with heartbeating(HEARTBEAT_S):
            gen = await self.rollout.generate(prompt_ids, params, tenant=AGENTS_TENANT)
        text = self.rollout.decode(gen.ids)
        await self.rollout.keep(
            TurnTokens(
                turn_id=step_id,
                prompt_ids=prompt_ids,
                response_ids=gen.ids,
                response_logprobs=gen.logprobs,
                weight_version=gen.weight_version,
                finish_reason=gen.finish,
                response_text=text,
                temperature=sampling.temperature,
            )
        )
        action, message = parse_action(text, call_id_prefix=f"s{index}")
        await self.store.episodes.save_action(attempt_key, index, StepAction(message=message, action=action))
        return _Generated(prompt_ids=prompt_ids, gen=gen, text=text, action=action)

    @activity.defn(name=CLIENT_CLOSING.name)
    async def client_closing(self, inp: ClosingInput) -> None:
        results = [
            ToolResult(call_id="", name=name, content=r.content, exit_code=r.exit_code, error=r.error)
            for name, r in zip(inp.tool_names, inp.tool_results)
        ]
        added = [{"role": "tool", "name": r.name, "content": r.content} for r in results]
        obs = Observation(tool_results=results, done=True, done_reason="answered")
        await self.store.episodes.save_observation(
            inp.attempt_key, inp.step, StepObservation(observation=obs, messages=added)
        )

    async def aclose(self) -> None:
        await self.policy.aclose()
        await self.store.aclose()


def messages_after_last_answer(messages: list[dict]) -> list[dict]:
    """What a client's request adds after the assistant's last answer: tool results, a user's reply."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return [dict(m) for m in messages[last + 1 :]]


def observation_of(added: list[dict]) -> Observation:
    """The next state a client's messages make: tool messages as tool results, the rest as what the user said."""
    results = [
        ToolResult(
            call_id=str(m.get("tool_call_id") or ""),
            name=str(m.get("name") or "tool"),
            content=message_text(m.get("content")),
        )
        for m in added
        if m.get("role") == "tool"
    ]
    said = "\n\n".join(message_text(m.get("content")) for m in added if m.get("role") != "tool")
    return Observation(tool_results=results, user_message=said or None)


def summarize(action: Action) -> str:
    if action.tool_calls:
        return clip("; ".join(f"{c.name}({json.dumps(c.arguments, ensure_ascii=False)})" for c in action.tool_calls))
    return clip(action.text.strip() or "(empty)")
