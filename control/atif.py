"""Our turn logs and episodes as ATIF trajectories (contracts/atif.py): `openclaw-rl turns --export` and
`openclaw-rl episodes export` write them beside our own JSON.

A chat session's turn log: each turn is the messages its request added since the turn before (system and user
messages become system and user steps; tool results become the observation of the agent step whose calls they
answer) and one agent step, the reply: its text, reasoning, tool calls, and its metrics with the prompt's and
response's token ids and the rollout log-probs kept for training. A general-agent episode: the opening (system
prompt, task) and, per step, the agent's action (an agent step, metrics as above) with the environment's
observation (tool results; a user message when the environment speaks as the user).

What ATIF has no field for stays in `extra`: a turn's id, type and judgement, an episode step's votes, reward and
advantage, the weight version that served a step, and the temperature its log-probs were taken at.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

from contracts.atif import (
    ATIF_VERSION,
    Agent,
    FinalMetrics,
    Metrics,
    Observation,
    ObservationResult,
    Step,
    ToolCall,
    Trajectory,
)
from contracts.chat import StoredChatRequest
from contracts.episodes import StepRecord
from policy_client.chat_output import parse_completion
from store.episodes import EpisodeOpening, StepAction, StepObservation
from store.turns import TurnTokens

AGENT_NAME = "openclaw-rl"


def agent_version() -> str:
    try:
        return package_version(AGENT_NAME)
    except PackageNotFoundError:  # a checkout that was never installed
        return "0+unknown"


def atif_path(json_path: Path) -> Path:
    """Where the ATIF file goes beside our JSON file: `x.json` -> `x.atif.json`."""
    stem = json_path.stem if json_path.suffix == ".json" else json_path.name
    return json_path.with_name(stem + ".atif.json")


def write_private(path: Path, text: str) -> None:
    """A file only its owner reads (mode 600): it holds users' conversations, as `users export` does."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, 0o600)  # a file that was there before keeps its mode through O_TRUNC


def write_trajectory(trajectory: Trajectory, path: Path) -> None:
    write_private(path, json.dumps(trajectory.to_json_dict(), indent=2, ensure_ascii=False) + "\n")


def _text(content: Any) -> str:
    """A chat message's content as text (OpenAI content parts: their text joined; an image part named)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    out.append(part["text"])
                elif part.get("type"):
                    out.append(f"[{part['type']}]")
            elif isinstance(part, str):
                out.append(part)
        return "\n".join(out)
    return json.dumps(content, ensure_ascii=False)


def _arguments(raw: str | dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A call's arguments as ATIF's object; text that is no JSON object is kept whole in `extra`."""
    if isinstance(raw, dict):
        return raw, None
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return parsed, None
    return {}, {"raw_arguments": raw}


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def _metrics(prompt_tokens: int, completion_tokens: int, tokens: TurnTokens | None) -> Metrics:
    if tokens is None:  # the turn's token data expired (redis.data_ttl_s) or it never finished
        return Metrics(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    return Metrics(
        prompt_tokens=prompt_tokens or len(tokens.prompt_ids),
        completion_tokens=completion_tokens or len(tokens.response_ids),
        prompt_token_ids=tokens.prompt_ids,
        completion_token_ids=tokens.response_ids,
        logprobs=tokens.response_logprobs,
        extra={
            "logprobs_temperature": tokens.temperature,
            "weight_version": tokens.weight_version,
            "finish_reason": tokens.finish_reason,
            "resumed_at": tokens.resumed_at,
        },
    )


def _final(steps: list[Step], extra: dict[str, Any] | None = None) -> FinalMetrics:
    ms = [s.metrics for s in steps if s.metrics is not None]
    return FinalMetrics(
        total_prompt_tokens=sum(m.prompt_tokens or 0 for m in ms),
        total_completion_tokens=sum(m.completion_tokens or 0 for m in ms),
        total_steps=len(steps),
        extra=extra,
    )


class _Steps:
    """Steps numbered as they are added; tool results attach to the last agent step whose calls they answer."""

    def __init__(self) -> None:
        self.steps: list[Step] = []

    def add(self, **fields: Any) -> Step:
        step = Step(step_id=len(self.steps) + 1, **fields)
        self.steps.append(step)
        return step

    def observe(self, results: list[ObservationResult]) -> bool:
        """Attach results to the last agent step (a result naming no call of its loses its `source_call_id`).
        False when there is no agent step yet."""
        last = next((s for s in reversed(self.steps) if s.source == "agent"), None)
        if last is None or not results:
            return False
        called = {c.tool_call_id for c in last.tool_calls or []}
        for r in results:
            if r.source_call_id is not None and r.source_call_id not in called:
                r.extra = {**(r.extra or {}), "tool_call_id": r.source_call_id}
                r.source_call_id = None
        before = last.observation.results if last.observation else []
        last.observation = Observation(results=[*before, *results])
        return True


def _messages(into: _Steps, messages: Sequence[dict[str, Any]], at: str | None, extra: dict[str, Any]) -> None:
    """Client messages as steps: system and user ones as steps, tool results as observations."""
    for m in messages:
        role = m.get("role")
        if role == "tool":
            result = ObservationResult(source_call_id=m.get("tool_call_id"), content=_text(m.get("content")))
            if not into.observe([result]):
                into.add(source="user", message=result.content or "", timestamp=at, extra={**extra, "role": "tool"})
        elif role in ("system", "developer"):
            into.add(source="system", message=_text(m.get("content")), timestamp=at, extra=extra or None)
        elif role == "user":
            into.add(source="user", message=_text(m.get("content")), timestamp=at, extra=extra or None)


def _new_messages(request: StoredChatRequest, first: bool) -> tuple[list[dict[str, Any]], int]:
    """The messages a turn's request added: those after its last assistant message (all of them when it has none).
    The first turn exported keeps the system messages before it too. Returns them and how many were left out."""
    msgs = request.messages
    last = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), default=-1)
    tail = msgs[last + 1 :]
    head = [m for m in msgs[: last + 1] if m.get("role") in ("system", "developer")] if first else []
    return head + tail, len(msgs) - len(tail) - len(head)


def _answers_a_tool_call(t: Any) -> bool:
    """The turn's next state is a tool result."""
    return t.next_state is not None and t.next_state.role == "tool"


def _reply(t: Any, data: TurnTokens | None) -> tuple[str, str | None]:
    """The reply's text and reasoning: whole, parsed from the kept decoded text as the turn's answer was; the audit's
    summaries (clipped) when the token data is gone."""
    if data is not None and data.response_text:
        parsed = parse_completion(data.response_text, call_id_prefix=t.turn_id[:12])
        return parsed.content, parsed.reasoning
    return t.response_summary, t.reasoning_summary


def turns_trajectory(
    log: Any,
    tokens: Mapping[str, TurnTokens | None],
    requests: Mapping[str, StoredChatRequest | None] | None = None,
    *,
    user_id: str | None = None,
    model_name: str | None = None,
) -> Trajectory:
    """A session's turn log (control.audit.TurnLog) as one trajectory. `tokens`: each turn's token data by turn id;
    `requests`: each turn's stored chat request by turn id (without it, a user step is the turn's prompt summary)."""
    requests = requests or {}
    out = _Steps()
    tools: list[dict[str, Any]] | None = None
    left_out = 0
    for n, t in enumerate(log.turns):
        turn = {"turn_id": t.turn_id, "turn_index": t.index, "turn_type": str(t.turn_type)}
        if t.side_kind:
            turn["side_kind"] = t.side_kind
        request = requests.get(t.turn_id)
        if request is not None:
            new, skipped = _new_messages(request, first=n == 0)
            left_out += skipped
            _messages(out, new, _iso(t.received_at), turn)
            tools = tools or request.tools
        elif not (n > 0 and _answers_a_tool_call(log.turns[n - 1])):  # a tool result's summary: the turn before's
            at = _iso(t.received_at)
            out.add(source="user", message=t.prompt_summary, timestamp=at, extra={**turn, "summary": True})
        data = tokens.get(t.turn_id)
        calls = []
        for c in t.tool_calls:
            args, extra = _arguments(c.arguments)
            calls.append(ToolCall(tool_call_id=c.id, function_name=c.name, arguments=args, extra=extra))
        message, reasoning = _reply(t, data)
        audit: dict[str, Any] = {**turn, "status": t.status, "weight_version": t.weight_version}
        if t.error:
            audit["error"] = t.error
        if t.next_state_status != "n/a":
            audit["next_state_status"] = t.next_state_status
        if t.judgement is not None:
            audit["judgement"] = t.judgement.model_dump(mode="json")
        out.add(
            source="agent",
            timestamp=_iso(t.finished_at or t.started_at),
            message=message,
            reasoning_content=reasoning,
            tool_calls=calls or None,
            metrics=_metrics(t.prompt_tokens, t.completion_tokens, data),
            llm_call_count=1,
            extra=audit,
        )
        if request is None and _answers_a_tool_call(t):  # its result, as the audit summarizes it
            only = t.tool_calls[0].id if len(t.tool_calls) == 1 else None
            out.observe([ObservationResult(source_call_id=only, content=t.next_state.summary, extra={"summary": True})])
    if not out.steps:
        raise ValueError(f"session {log.session_id}: no turns to export")
    notes = None
    if left_out:
        notes = (
            f"{left_out} message(s) the first exported turn's request carried from before it (earlier history the "
            "client sent) are not steps here."
        )
    return Trajectory(
        schema_version=ATIF_VERSION,
        session_id=log.session_id,
        trajectory_id=f"{log.workflow_id}:turns:{log.offset}-{log.offset + len(log.turns)}",
        agent=Agent(name=AGENT_NAME, version=agent_version(), model_name=model_name, tool_definitions=tools),
        steps=out.steps,
        notes=notes,
        final_metrics=_final(out.steps),
        extra={
            "kind": "chat_session",
            "user_id": user_id,
            "workflow_id": log.workflow_id,
            "status": log.status,
            "closed_reason": log.closed_reason,
            "turns_total": log.total,
            "turns_offset": log.offset,
        },
    )


def episode_trajectory(
    episode_id: str,
    *,
    status: str,
    attempt: int,
    steps: Sequence[StepRecord],
    outcome: float | None,
    tokens: Mapping[int, TurnTokens | None],
    opening: EpisodeOpening | None = None,
    recorded: Mapping[int, tuple[StepAction | None, StepObservation | None]] | None = None,
    advantages: Mapping[int, tuple[float, float]] | None = None,
    result: Any = None,
    model_name: str | None = None,
) -> Trajectory:
    """One attempt of a general-agent episode as a trajectory. `steps`: its step records (EpisodeResult.steps or the
    running episode's progress); `tokens`: each step's token data by step index; `opening` and `recorded`: what the
    store still keeps of its messages (store.episodes.EpisodeData.recorded; without them a step is its record's
    action and observation text); `advantages`: step -> (reward, advantage) of its published samples; `result`:
    the EpisodeResult when it finished."""
    recorded = recorded or {}
    advantages = advantages or {}
    out = _Steps()
    if opening is not None:
        _messages(out, opening.messages, None, {})
    for s in steps:
        act, obs = recorded.get(s.index, (None, None))
        extra: dict[str, Any] = {"step": s.index, "step_id": s.step_id, "votes": s.votes}
        for name in ("weight_version", "parse_error", "done_reason"):
            if getattr(s, name):
                extra[name] = getattr(s, name)
        if s.index in advantages:
            extra["reward"], extra["advantage"] = advantages[s.index]
        calls, reasoning = [], None
        if act is not None:
            message = act.action.text or _text(act.message.get("content"))
            reasoning = act.message.get("reasoning_content") or None
            calls = [
                ToolCall(tool_call_id=c.id, function_name=c.name, arguments=c.arguments) for c in act.action.tool_calls
            ]
        else:
            message = s.action
            extra["summary"] = True
        out.add(
            source="agent",
            message=message,
            reasoning_content=reasoning,
            tool_calls=calls or None,
            metrics=_metrics(s.prompt_tokens, s.completion_tokens, tokens.get(s.index)),
            llm_call_count=1,
            extra=extra,
        )
        if obs is not None:
            o = obs.observation
            results = [
                ObservationResult(source_call_id=r.call_id, content=r.content, extra={"name": r.name})
                for r in o.tool_results
            ]
            if o.screenshot:
                results.append(ObservationResult(content=None, extra={"screenshot": o.screenshot}))
            out.observe(results)
            if o.user_message:
                out.add(source="user", message=o.user_message, extra={"step": s.index, "from": "environment"})
        elif s.observation:
            out.observe([ObservationResult(content=s.observation, extra={"summary": True})])
    if not out.steps:
        raise ValueError(f"episode {episode_id}: nothing recorded to export")
    root: dict[str, Any] = {"kind": "episode", "episode_id": episode_id, "status": status, "attempt": attempt}
    if outcome is not None:
        root["outcome"] = outcome
    if result is not None:
        root.update(setting=result.setting, task_id=result.task_id, end=result.end, group_id=result.group_id)
    return Trajectory(
        schema_version=ATIF_VERSION,
        session_id=episode_id,
        trajectory_id=f"{episode_id}:a{attempt}",
        agent=Agent(
            name=AGENT_NAME,
            version=agent_version(),
            model_name=model_name,
            tool_definitions=opening.tools if opening is not None and opening.tools else None,
        ),
        steps=out.steps,
        final_metrics=_final(out.steps, {"outcome": outcome} if outcome is not None else None),
        extra=root,
    )


async def load_turns_trajectory(store: Any, log: Any, *, user_id: str | None = None, **kw: Any) -> Trajectory:
    """`turns_trajectory` with each turn's token data and chat request read from the store."""
    ids = [t.turn_id for t in log.turns]
    tokens = {i: await store.turns.load(i) for i in ids}
    requests = {t.turn_id: await store.requests.load_key(t.request_key) for t in log.turns}
    return turns_trajectory(log, tokens, requests, user_id=user_id, **kw)
