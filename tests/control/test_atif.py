"""ATIF export (contracts/atif.py, control/atif.py): a chat session's turn log and a general-agent episode, built as
the audit and the store keep them, become trajectories that validate against ATIF's published JSON Schema
(tests/fixtures/atif: generated from Harbor's own models), pass the RFC's rules a schema cannot state, carry the
token ids and log-probs, and parse back into our models unchanged."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest

from contracts.atif import ATIF_VERSION, Trajectory
from contracts.chat import StoredChatRequest, ToolCall, TurnType
from contracts.episodes import EpisodeResult, StepRecord
from contracts.learning import JudgementRecord, JudgeSummary, NextState, PublishResult
from control.atif import atif_path, episode_trajectory, turns_trajectory, write_trajectory
from control.audit import AuditedTurn, TurnLog
from envs.base import Action, Observation, ToolCallAction, ToolResult
from store.episodes import EpisodeOpening, StepAction, StepObservation
from store.turns import TurnTokens

SCHEMA = json.loads((Path(__file__).parents[1] / "fixtures" / "atif" / "trajectory.schema.json").read_text())
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]


def check(trajectory: Trajectory) -> dict:
    """Written as a file would be; valid against the published schema and our models; read back equal."""
    doc = json.loads(json.dumps(trajectory.to_json_dict()))
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    back = Trajectory.model_validate(doc)
    assert back == trajectory
    assert back.to_json_dict() == doc
    return doc


def tokens(turn_id: str, prompt: list[int], response: list[int], text: str = "") -> TurnTokens:
    return TurnTokens(
        turn_id=turn_id,
        prompt_ids=prompt,
        response_ids=response,
        response_logprobs=[-0.25 * (i + 1) for i in range(len(response))],
        weight_version="3",
        finish_reason="stop",
        response_text=text,
        temperature=0.7,
    )


def turn(index: int, turn_id: str, **fields) -> AuditedTurn:
    at = T0 + timedelta(minutes=index)
    base = dict(
        index=index,
        turn_id=turn_id,
        turn_type=TurnType.MAIN,
        status="done",
        received_at=at,
        started_at=at,
        finished_at=at + timedelta(seconds=2),
        message_count=2,
        prompt_summary="",
        weight_version="3",
        request_key=f"oc:request:{turn_id}",
        data_key=f"oc:turn:{turn_id}",
    )
    return AuditedTurn(**{**base, **fields})


def session_log() -> tuple[TurnLog, dict, dict]:
    """Three turns: a tool call, the reply after its result (judged), and a side turn (a title)."""
    judged = JudgementRecord(
        sample_id="s#0",
        user_id="u1",
        session_id="sess",
        turn_id="t0",
        turn_index=0,
        policy_version="3",
        method="binary",
        judge=JudgeSummary(judge="heuristic", prm_votes=[1, 1], eval_score=1),
        result=PublishResult(published=True, reward=1.0, loss_mask=1, reason="judged", tokens=3),
    )
    turns = [
        turn(
            0,
            "t0",
            prompt_summary="What is the weather in Oslo?",
            tool_calls=[ToolCall(id="call_1", name="weather", arguments='{"city": "Oslo"}')],
            prompt_tokens=5,
            completion_tokens=3,
            next_state=NextState(role="tool", request_key="oc:request:t1", message_index=3, summary="sunny, 18C"),
            next_state_status="paired",
            judgement=judged,
        ),
        turn(
            1,
            "t1",
            prompt_summary="sunny, 18C",
            response_summary="It is sunny (clipped)",
            prompt_tokens=9,
            completion_tokens=4,
            reasoning_summary="The tool said (clipped)",
            next_state_status="pending",
        ),
        turn(
            2,
            "t2",
            turn_type=TurnType.SIDE,
            side_kind="title",
            prompt_summary="Title this chat",
            response_summary="Oslo weather",
            prompt_tokens=4,
            completion_tokens=2,
        ),
    ]
    log = TurnLog(
        session_id="sess",
        workflow_id="session/u1/sess",
        status="running",
        total=3,
        offset=0,
        closed_reason=None,
        runs=1,
        turns=turns,
    )
    q = {"role": "user", "content": "What is the weather in Oslo?"}
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
        ],
    }
    requests = {
        "t0": StoredChatRequest(messages=[{"role": "system", "content": "Be brief."}, q], tools=TOOLS),
        "t1": StoredChatRequest(
            messages=[
                {"role": "system", "content": "Be brief."},
                q,
                call,
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 18C"},
            ],
            tools=TOOLS,
        ),
        "t2": StoredChatRequest(messages=[{"role": "user", "content": [{"type": "text", "text": "Title this chat"}]}]),
    }
    toks = {
        "t0": tokens(
            "t0",
            [1, 2, 3, 4, 5],
            [6, 7, 8],
            '<tool_call>{"name": "weather", "arguments": {"city": "Oslo"}}</tool_call>',
        ),
        "t1": tokens(
            "t1",
            [1, 2, 3, 4, 5, 6, 7, 8, 9],
            [10, 11, 12, 13],
            "<think>\nThe tool said sunny.\n</think>\n\nIt is sunny.",
        ),
        "t2": None,  # its token data expired
    }
    return log, requests, toks


def test_turn_log_exports_as_valid_atif_with_token_ids_and_logprobs():
    log, requests, toks = session_log()
    doc = check(turns_trajectory(log, toks, requests, user_id="u1", model_name="Qwen/Qwen3-1.7B"))
    assert doc["schema_version"] == ATIF_VERSION == "ATIF-v1.7"
    assert doc["session_id"] == "sess" and doc["agent"]["name"] == "openclaw-rl"
    assert doc["agent"]["tool_definitions"] == TOOLS
    steps = doc["steps"]
    assert [(s["step_id"], s["source"]) for s in steps] == [
        (1, "system"),
        (2, "user"),
        (3, "agent"),
        (4, "agent"),
        (5, "user"),
        (6, "agent"),
    ]
    assert steps[1]["message"] == "What is the weather in Oslo?"
    call_step = steps[2]
    assert call_step["tool_calls"] == [
        {"tool_call_id": "call_1", "function_name": "weather", "arguments": {"city": "Oslo"}}
    ]
    assert call_step["observation"] == {"results": [{"source_call_id": "call_1", "content": "sunny, 18C"}]}
    m = call_step["metrics"]
    assert m["prompt_token_ids"] == [1, 2, 3, 4, 5] and m["completion_token_ids"] == [6, 7, 8]
    assert m["logprobs"] == [-0.25, -0.5, -0.75] and len(m["logprobs"]) == m["completion_tokens"] == 3
    assert m["extra"]["logprobs_temperature"] == 0.7
    assert call_step["extra"]["judgement"]["result"]["reward"] == 1.0
    reply = steps[3]
    assert reply["message"] == "It is sunny." and reply["reasoning_content"] == "The tool said sunny."
    assert reply["metrics"]["completion_token_ids"] == [10, 11, 12, 13]
    side = steps[5]
    assert steps[4]["message"] == "Title this chat" and side["extra"]["turn_type"] == "side"
    assert "prompt_token_ids" not in side["metrics"] and side["metrics"]["completion_tokens"] == 2
    assert doc["final_metrics"] == {"total_prompt_tokens": 18, "total_completion_tokens": 9, "total_steps": 6}


def test_turn_log_without_requests_exports_from_the_audit_summaries():
    log, _, _ = session_log()
    doc = check(turns_trajectory(log, {}, None))
    assert [s["source"] for s in doc["steps"]] == ["user", "agent", "agent", "user", "agent"]
    assert doc["steps"][1]["observation"]["results"][0]["content"] == "sunny, 18C"
    assert "prompt_token_ids" not in doc["steps"][1]["metrics"]


def episode() -> dict:
    """A two-step terminal episode as EpisodeWorkflow and env/agent activities record it."""
    eid, attempt = "episode/terminal-t1-x", 1
    sid = [f"{eid}:a{attempt}:s{i}" for i in range(2)]
    steps = [
        StepRecord(
            index=0,
            step_id=sid[0],
            action="bash(ls)",
            tool_calls=1,
            observation="a.txt",
            votes=[1],
            weight_version="3",
            prompt_tokens=6,
            completion_tokens=3,
        ),
        StepRecord(
            index=1,
            step_id=sid[1],
            action="done",
            observation="",
            done_reason="submitted",
            votes=[1, None],
            weight_version="3",
            prompt_tokens=11,
            completion_tokens=2,
        ),
    ]
    recorded = {
        0: (
            StepAction(
                message={"role": "assistant", "content": "", "reasoning_content": "look first"},
                action=Action(tool_calls=[ToolCallAction(id="c0", name="bash", arguments={"cmd": "ls"})]),
            ),
            StepObservation(
                observation=Observation(
                    tool_results=[ToolResult(call_id="c0", name="bash", content="a.txt")], user_message="Now submit."
                ),
                messages=[],
            ),
        ),
        1: (
            StepAction(message={"role": "assistant", "content": "done"}, action=Action(text="done")),
            StepObservation(observation=Observation(done=True, done_reason="submitted"), messages=[]),
        ),
    }
    result = EpisodeResult(
        episode_id=eid,
        setting="terminal",
        task_id="t1",
        attempt=attempt,
        attempt_key=f"oc:ep:{eid}:a{attempt}",
        outcome=1.0,
        steps=steps,
        end="submitted",
    )
    return dict(
        episode_id=eid,
        status="completed",
        attempt=attempt,
        steps=steps,
        outcome=1.0,
        tokens={0: tokens(sid[0], [1, 2, 3, 4, 5, 6], [7, 8, 9]), 1: tokens(sid[1], list(range(11)), [20, 21])},
        opening=EpisodeOpening(
            messages=[
                {"role": "system", "content": "You are in a shell."},
                {"role": "user", "content": "List the files, then submit."},
            ],
            tools=TOOLS,
            setting="terminal",
        ),
        recorded=recorded,
        advantages={0: (1.0, 0.5), 1: (1.0, 0.5)},
        result=result,
    )


def test_episode_exports_as_valid_atif():
    doc = check(episode_trajectory(**episode()))
    assert [s["source"] for s in doc["steps"]] == ["system", "user", "agent", "user", "agent"]
    act = doc["steps"][2]
    assert act["reasoning_content"] == "look first"
    assert act["tool_calls"][0] == {"tool_call_id": "c0", "function_name": "bash", "arguments": {"cmd": "ls"}}
    assert act["observation"]["results"][0]["source_call_id"] == "c0"
    assert act["metrics"]["completion_token_ids"] == [7, 8, 9] and act["metrics"]["logprobs"] == [-0.25, -0.5, -0.75]
    assert act["extra"]["advantage"] == 0.5 and act["extra"]["votes"] == [1]
    assert doc["steps"][3] == {
        "step_id": 4,
        "source": "user",
        "message": "Now submit.",
        "extra": {"step": 0, "from": "environment"},
    }
    assert doc["extra"]["outcome"] == 1.0 and doc["extra"]["setting"] == "terminal"
    assert doc["final_metrics"]["total_completion_tokens"] == 5


def test_episode_whose_store_data_expired_exports_from_its_step_records():
    e = episode()
    doc = check(episode_trajectory(**{**e, "opening": None, "recorded": None, "tokens": {}}))
    assert [s["message"] for s in doc["steps"]] == ["bash(ls)", "done"]
    assert doc["steps"][0]["observation"]["results"][0]["content"] == "a.txt"


def test_the_schema_and_our_models_refuse_what_the_rfc_refuses():
    log, requests, toks = session_log()
    doc = turns_trajectory(log, toks, requests).to_json_dict()
    validator = jsonschema.Draft202012Validator(SCHEMA)
    bad = json.loads(json.dumps(doc))
    bad["steps"][2]["metrics"]["token_ids"] = [1]  # no such field
    assert not validator.is_valid(bad)
    with pytest.raises(ValueError):
        Trajectory.model_validate(bad)
    swapped = json.loads(json.dumps(doc))
    swapped["steps"][0]["step_id"], swapped["steps"][1]["step_id"] = 2, 1
    with pytest.raises(ValueError, match="step ids run"):
        Trajectory.model_validate(swapped)
    user_metrics = json.loads(json.dumps(doc))
    user_metrics["steps"][1]["metrics"] = {"prompt_tokens": 1}
    with pytest.raises(ValueError, match="only on agent steps"):
        Trajectory.model_validate(user_metrics)
    dangling = json.loads(json.dumps(doc))
    dangling["steps"][3]["observation"] = {"results": [{"source_call_id": "call_9", "content": "x"}]}
    with pytest.raises(ValueError, match="call_9"):
        Trajectory.model_validate(dangling)


def test_written_beside_our_json(tmp_path):
    log, requests, toks = session_log()
    ours = tmp_path / "sess.json"
    assert atif_path(ours) == tmp_path / "sess.atif.json"
    assert atif_path(tmp_path / "sess") == tmp_path / "sess.atif.json"
    write_trajectory(turns_trajectory(log, toks, requests), atif_path(ours))
    check(Trajectory.model_validate_json((tmp_path / "sess.atif.json").read_text()))
