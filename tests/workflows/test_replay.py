"""Recorded histories must replay on the current workflow code: a change that breaks a running workflow fails here.

The histories come from `python -m tests.workflows.record_histories`. A workflow
change that makes one of them fail is nondeterministic for runs already in
flight: guard it with `workflow.patched` (and keep the old history) rather than
re-recording.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from openclaw_rl import tracing
from tests.workflows.record_histories import HISTORIES
from workflows.canary import CanaryWorkflow
from workflows.episode import EpisodeWorkflow
from workflows.evaluation import EvaluationWorkflow
from workflows.judge_turn import JudgeTurnWorkflow
from workflows.progress import ProgressReportWorkflow, ProgressRoundWorkflow
from workflows.rollout import RolloutWorkflow
from workflows.session import SessionWorkflow
from workflows.task_group import TaskGroupWorkflow
from workflows.training import TrainingWorkflow
from workflows.user_files import UserFilesWorkflow

RECORDED = {
    "session_paired_and_rolled_run1.json",
    "session_paired_and_rolled_run2.json",
    "session_paired_and_rolled_run3.json",
    # retired/: judge_turn_binary.json and judge_turn_opd.json (one activity a vote, before VOTES_IN_ONE_ACTIVITY)
    # and judge_turn_votes_*.json (its plain marker) no longer replay since the patch's call is gone: no judge
    # workflow that old is open.
    "judge_turn_binary_no_next_state.json",
    "judge_turn_retired_binary.json",
    "judge_turn_retired_in_one.json",
    "judge_turn_now_binary.json",
    "judge_turn_now_in_one.json",
    "judge_turn_now_no_hint.json",
    # retired/training_steps.json and training_all_stale_before_patch.json ran the loop that wrote a checkpoint at
    # every step (before PUBLISH_FROM_MEMORY); its patches are deprecated, so they no longer replay.
    "training_steps.json",
    "training_from_memory.json",
    "training_claim_drops.json",
    "episode_steps.json",
    "episode_env_lost.json",
    "task_group_published.json",
    "task_group_published_episode0.json",
    "episode_steps_now.json",
    "episode_steps_in_one.json",
    "task_group_published_now.json",
    "task_group_published_now_episode0.json",
    "rollout_tasks.json",
    "rollout_mixed.json",
    "rollout_queued.json",
    "rollout_mixed_queued.json",
    "evaluation_sets_and_episodes.json",
    "evaluation_moved_on.json",
    "user_files_export.json",
    "user_files_forget.json",
    "progress_round.json",
    "progress_report.json",
    "canary_promoted.json",
}
EPISODE_STEPS = [  # three steps; each step's vote is scheduled after the next call (judging never holds a step up)
    "env_open",
    "agent_step",
    "env_step",
    "agent_step",
    "step_vote",
    "env_step",
    "agent_step",
    "step_vote",
    "env_step",
    "env_outcome",
    "step_vote",
    "env_close",
]


def load(path: Path) -> WorkflowHistory:
    """The recorder put the workflow id in the started event; replay needs it (it names children and archive keys)."""
    text = path.read_text()
    workflow_id = json.loads(text)["events"][0]["workflowExecutionStartedEventAttributes"]["workflowId"]
    return WorkflowHistory.from_json(workflow_id, text)


def replayer(*workflows: type) -> Replayer:
    return Replayer(
        workflows=list(workflows)
        or [
            SessionWorkflow,
            JudgeTurnWorkflow,
            TrainingWorkflow,
            EpisodeWorkflow,
            TaskGroupWorkflow,
            RolloutWorkflow,
            EvaluationWorkflow,
            UserFilesWorkflow,
            ProgressReportWorkflow,
            ProgressRoundWorkflow,
            CanaryWorkflow,
        ],
        data_converter=pydantic_data_converter,
    )


def steps(history: WorkflowHistory) -> list[str]:
    """Scheduled activities and patch markers, in history order."""
    out = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            out.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        elif event.HasField("marker_recorded_event_attributes"):
            data = event.marker_recorded_event_attributes.details["patch-data"].payloads[0].data
            out.append(f"patch:{json.loads(data)['id']}")
    return out


def data(payloads) -> dict:
    """The first payload of an input or result, as the pydantic data converter wrote it (JSON)."""
    return json.loads(payloads.payloads[0].data)


def scheduled(history: WorkflowHistory, activity_type: str) -> list[dict]:
    """The inputs of every scheduled activity of one type, in history order."""
    return [
        data(e.activity_task_scheduled_event_attributes.input)
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity_type
    ]


def children(history: WorkflowHistory) -> list[tuple[str, dict]]:
    """(workflow id, input) of every child workflow started, in history order."""
    return [
        (a.workflow_id, data(a.input))
        for e in history.events
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
        for a in [e.start_child_workflow_execution_initiated_event_attributes]
    ]


def group_events(history: WorkflowHistory) -> list[tuple[str, str]]:
    """("start" | "done", child workflow id) of every child started and completed, in history order."""
    out = []
    for e in history.events:
        if e.HasField("start_child_workflow_execution_initiated_event_attributes"):
            out.append(("start", e.start_child_workflow_execution_initiated_event_attributes.workflow_id))
        elif e.HasField("child_workflow_execution_completed_event_attributes"):
            out.append(("done", e.child_workflow_execution_completed_event_attributes.workflow_execution.workflow_id))
    return out


def result(history: WorkflowHistory) -> dict:
    last = history.events[-1]
    assert last.HasField("workflow_execution_completed_event_attributes"), last
    return data(last.workflow_execution_completed_event_attributes.result)


def test_every_scenario_is_recorded():
    assert RECORDED <= {p.name for p in HISTORIES.glob("*.json")}


@pytest.mark.parametrize("name", sorted(p.name for p in HISTORIES.glob("*.json")))
async def test_history_replays_on_current_code(name: str):
    result = await replayer().replay_workflow(load(HISTORIES / name), raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{name}: {result.replay_failure!r}"


@pytest.mark.parametrize("name", ["episode_steps.json", "episode_env_lost.json"])
async def test_episode_history_replays_with_tracing_on(name: str, monkeypatch: pytest.MonkeyPatch):
    """Each step under a trace context of its own (derived from the run id, never drawn): the same commands."""
    monkeypatch.setattr(tracing, "_enabled", True)
    traced = Replayer(
        workflows=[EpisodeWorkflow], data_converter=pydantic_data_converter, interceptors=[TracingInterceptor()]
    )
    result = await traced.replay_workflow(load(HISTORIES / name), raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{name}: {result.replay_failure!r}"


def patch_markers(history: WorkflowHistory) -> list[dict]:
    """Each patch marker's id and whether it was written deprecated."""
    out = []
    for event in history.events:
        if event.HasField("marker_recorded_event_attributes"):
            data = event.marker_recorded_event_attributes.details["patch-data"].payloads[0].data
            out.append(json.loads(data))
    return out


def test_the_training_loop_serves_versions_from_memory_and_acknowledges_an_all_stale_batch_at_once():
    seq = steps(load(HISTORIES / "training_steps.json"))
    first = [s for s in seq if not s.startswith("patch:")]
    assert first[:4] == ["find_resume_point", "claim_batch", "train_step", "publish_version"], seq
    assert "export_checkpoint" in seq and "publish_weights" not in seq
    at = first.index("ack_batch")  # the all-stale batch: the version served again, then acknowledged
    assert first[at - 2 : at + 1] == ["train_step", "publish_version", "ack_batch"], first
    assert first.count("ack_batch") == 1  # the trained batches wait for a durable checkpoint


def test_claims_that_drop_stale_samples_ask_with_the_version_and_the_server_serves_it_again():
    history = load(HISTORIES / "training_claim_drops.json")
    claims = scheduled(history, "claim_batch")
    assert [(c["version"], c["max_staleness"]) for c in claims] == [(0, 2), (1, 2), (1, 2), (2, 2)]
    seq = [s for s in steps(history) if not s.startswith("patch:")]
    at = seq.index("claim_batch", seq.index("publish_version"))  # the claim that dropped 3 and brought nothing
    assert seq[at : at + 5] == ["claim_batch", "publish_version", "claim_batch", "train_step", "publish_version"], seq
    assert "ack_batch" not in seq  # the claims acknowledged their drops; the trained batches wait for a checkpoint


PUBLISH_FROM_MEMORY = "publish-from-memory-durable-checkpoints-on-a-cadence"
STRICT_CADENCE = "checkpoint-cadence-waits-for-the-write-in-flight"
ADOPT_CONFIRMED_AFTER_LOSS = "adopt-a-checkpoint-confirmed-by-a-lost-trainer"


def test_the_training_histories_are_from_the_release_that_deprecated_its_patches():
    """Step two of retiring a patch: the calls are gone, and runs of the release that deprecated them (their markers
    marked deprecated) replay without them: training_steps.json and training_from_memory.json are such runs, and
    replay in test_recorded_histories_replay. retired/training_from_memory.json, recorded before
    ADOPT_CONFIRMED_AFTER_LOSS, lost its trainer without it: it no longer replays (below)."""
    every_run = [{"id": PUBLISH_FROM_MEMORY, "deprecated": True}, {"id": STRICT_CADENCE, "deprecated": True}]
    assert patch_markers(load(HISTORIES / "training_steps.json")) == every_run
    lost = patch_markers(load(HISTORIES / "training_from_memory.json"))  # a run that loses its trainer
    assert lost == [*every_run, {"id": ADOPT_CONFIRMED_AFTER_LOSS, "deprecated": True}]
    before = patch_markers(load(HISTORIES / "retired" / "training_from_memory.json"))  # the build before
    assert before == [{"id": PUBLISH_FROM_MEMORY, "deprecated": False}]


async def test_training_histories_from_before_the_patches_no_longer_replay():
    """The checkpoint-at-every-step loop is gone with its patches, and a loss without the adoption of a confirmed
    checkpoint too: no open run can be on that code (a training run continues as new within CLAIMS_PER_RUN claims,
    onto the newest code)."""
    for name in ("training_steps.json", "training_all_stale_before_patch.json", "training_from_memory.json"):
        got = await replayer(TrainingWorkflow).replay_workflow(
            load(HISTORIES / "retired" / name), raise_on_replay_failure=False
        )
        assert isinstance(got.replay_failure, workflow.NondeterminismError), (name, got.replay_failure)


def test_history_from_memory_publishes_versions_and_confirms_durable_checkpoints():
    """Versions published from the trainer's memory, a durable checkpoint every 2 versions confirmed (its batches
    acknowledged there, never by ack_batch), a TrainerLost at a step and the way back to the last checkpoint."""
    history = load(HISTORIES / "training_from_memory.json")
    seq = [s for s in steps(history) if not s.startswith("patch:")]
    assert seq[:1] == ["find_resume_point"]
    assert seq[1:11] == [
        "claim_batch",
        "train_step",
        "publish_version",
        "claim_batch",
        "train_step",
        "publish_version",
        "start_checkpoint",  # after version 2, then written and confirmed beside the next claim
        "finish_checkpoint",
        "claim_batch",
        "confirm_checkpoint",
    ]
    assert "ack_batch" not in seq and "publish_weights" not in seq
    assert seq.count("find_resume_point") == 3  # attached again after the loss, then a newer confirmed one looked for
    assert [(s["version"], s["since"]) for s in scheduled(history, "start_checkpoint")] == [(2, 0), (4, 2)]
    confirms = scheduled(history, "confirm_checkpoint")
    assert [(c["checkpoint"]["version"], [b["version"] for b in c["batches"]]) for c in confirms] == [
        (2, [1, 2]),
        (4, [4]),  # version 3 was lost: its batch, trained again from checkpoint 2, is in version 4
    ]
    assert [(t["version"], t["durable_version"], t["from_durable"]) for t in scheduled(history, "train_step")] == [
        (0, 0, False),
        (1, 0, False),
        (2, 2, False),
        (3, 2, False),  # TrainerLost
        (3, 2, True),
    ]
    assert [c["skip"] for c in scheduled(history, "claim_batch")] == [
        {},
        {"test": ["1-0", "1-1"]},
        {"test": ["1-0", "1-1", "2-0", "2-1"]},
        {"test": ["3-0", "3-1"]},
        {},  # after the loss: version 3's batch is claimed again
        {"test": ["3-0", "3-1"]},
    ]
    failed = [
        e.activity_task_failed_event_attributes.failure.application_failure_info.type
        for e in history.events
        if e.HasField("activity_task_failed_event_attributes")
    ]
    assert failed == ["TrainerLost"]


def test_episode_history_runs_its_steps_then_the_outcome():
    history = load(HISTORIES / "episode_steps.json")
    assert steps(history) == EPISODE_STEPS
    assert [v["step"] for v in scheduled(history, "step_vote")] == [0, 1, 2]
    done = result(history)
    assert (done["attempt"], done["outcome"], done["end"]) == (1, 1.0, "submitted")
    assert [s["votes"] for s in done["steps"]] == [[1], [-1], [1]]
    assert [s["step_id"] for s in done["steps"]] == [f"episode/solve-replayed:a1:s{i}" for i in range(3)]


def upserts(history: WorkflowHistory) -> list[set[str]]:
    """The search attributes each upsert set, in history order."""
    return [
        set(e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields)
        for e in history.events
        if e.HasField("upsert_workflow_search_attributes_event_attributes")
    ]


def started_with(history: WorkflowHistory) -> set[str]:
    first = history.events[0].workflow_execution_started_event_attributes
    return set(first.search_attributes.indexed_fields)


def test_an_episode_started_now_gets_its_attributes_with_its_start_and_one_upsert_at_the_end():
    """Two billable actions fewer an episode: OpenclawSetting and OpenclawTask come with the start, the policy version
    with the outcome. Episodes started before (episode_steps.json) upsert each, and still replay so."""
    before, now = load(HISTORIES / "episode_steps.json"), load(HISTORIES / "episode_steps_now.json")
    assert upserts(before) == [
        {"OpenclawSetting", "OpenclawTask"},
        {"OpenclawPolicyVersion"},
        {"OpenclawOutcome"},
    ]
    assert started_with(now) >= {"OpenclawSetting", "OpenclawTask"}
    assert upserts(now) == [{"OpenclawOutcome", "OpenclawPolicyVersion"}]
    assert steps(now) == steps(before) == EPISODE_STEPS
    group, child = (
        load(HISTORIES / "task_group_published_now.json"),
        load(HISTORIES / "task_group_published_now_episode0.json"),
    )
    assert upserts(group) == [{"OpenclawOutcome"}]
    assert started_with(child) >= {"OpenclawSetting", "OpenclawTask"} and upserts(child) == [
        {"OpenclawOutcome", "OpenclawPolicyVersion"}
    ]


def test_an_episode_started_today_checks_and_closes_in_one_call_and_judges_its_steps_in_one():
    """finish_in_one and votes_in_one (control.episodes): env_finish instead of env_outcome then env_close, and one
    step_votes after the last step (beside the outcome's check) for every step's votes instead of a step_vote each:
    3 actions fewer for these 3 steps of one vote. Episodes started before (episode_steps_now.json) replay so."""
    now, in_one = load(HISTORIES / "episode_steps_now.json"), load(HISTORIES / "episode_steps_in_one.json")
    assert steps(in_one) == [
        "env_open",
        *["agent_step", "env_step"] * 3,
        "env_finish",
        "step_votes",  # started in the same workflow task as env_finish: both at once
    ]
    assert [v["steps"] for v in scheduled(in_one, "step_votes")] == [[0, 1, 2]]
    assert upserts(in_one) == upserts(now) == [{"OpenclawOutcome", "OpenclawPolicyVersion"}]
    same = ("index", "action", "observation", "votes")
    assert [{k: s[k] for k in same} for s in result(in_one)["steps"]] == [
        {k: s[k] for k in same} for s in result(now)["steps"]
    ]
    assert result(in_one)["outcome"] == result(now)["outcome"]


def test_lost_worker_history_starts_over_under_a_new_attempt():
    history = load(HISTORIES / "episode_env_lost.json")
    seq = steps(history)
    # attempt 1: its env_step goes unanswered (nobody polls the lost worker's queue) and nothing is closed there
    assert seq[:4] == ["env_open", "agent_step", "env_step", "env_open"]
    assert seq.count("env_open") == 2 and seq.count("env_close") == 1 and seq[-1] == "env_close"
    timed_out = [e for e in history.events if e.HasField("activity_task_timed_out_event_attributes")]
    assert len(timed_out) == 1
    assert [o["attempt_key"].rsplit(":", 1)[1] for o in scheduled(history, "env_open")] == ["a1", "a2"]
    assert {r["attempt_key"].rsplit(":", 1)[1] for r in scheduled(history, "env_outcome")} == {"a2"}
    done = result(history)
    assert done["attempt"] == 2 and done["outcome"] == 1.0
    assert all(s["step_id"].endswith(f":a2:s{s['index']}") for s in done["steps"])


def test_group_history_publishes_its_episodes_step_samples_once():
    history = load(HISTORIES / "task_group_published.json")
    assert [wf_id for wf_id, _ in children(history)] == ["episode/replayed/0", "episode/replayed/1"]
    assert all(inp["group_id"] == "replayed" for _, inp in children(history))
    assert steps(history) == ["publish_step_samples"]
    completed = [
        i for i, e in enumerate(history.events) if e.HasField("child_workflow_execution_completed_event_attributes")
    ]
    published = [i for i, e in enumerate(history.events) if e.HasField("activity_task_scheduled_event_attributes")]
    assert len(completed) == 2 and published[0] > max(completed)  # published only once every episode is in
    [pub] = scheduled(history, "publish_step_samples")
    assert sorted((s["episode_id"], s["step"]) for s in pub["steps"]) == [
        (f"episode/replayed/{k}", t) for k in (0, 1) for t in range(3)
    ]
    done = result(history)
    assert sorted(done["outcomes"]) == [0.0, 1.0] and done["published"] == 6 and done["dropped_steps"] == 0


def test_group_child_history_is_an_episode_of_the_group():
    history = load(HISTORIES / "task_group_published_episode0.json")
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.parent_workflow_execution.workflow_id == "group/replayed"
    assert steps(history) == EPISODE_STEPS
    done = result(history)
    assert done["group_id"] == "replayed" and done["outcome"] == 1.0


def test_rollout_history_runs_one_group_per_task():
    history = load(HISTORIES / "rollout_tasks.json")
    assert steps(history) == []  # task ids given: nothing listed
    groups = children(history)
    assert [wf_id for wf_id, _ in groups] == ["group/replayed.g0", "group/replayed.g1"]
    assert [(g["task_id"], g["samples"], g["setting"]) for _, g in groups] == [
        ("t1", 2, "terminal"),
        ("t2", 2, "terminal"),
    ]
    done = result(history)
    assert (done["groups_done"], done["episodes_done"], done["published"], done["mean_outcome"]) == (2, 4, 12, 0.5)


def test_mixed_rollout_history_interleaves_its_parts():
    history = load(HISTORIES / "rollout_mixed.json")
    assert steps(history) == ["list_tasks"]  # the toolcall part named no tasks
    assert scheduled(history, "list_tasks") == [{"setting": "toolcall"}]
    groups = children(history)
    assert [(g["setting"], g["task_id"], g["samples"]) for _, g in groups] == [
        ("terminal", "t1", 2),
        ("toolcall", "toolcall-listed", 1),
        ("terminal", "t2", 2),
    ]
    done = result(history)
    assert done["setting"] == "terminal+toolcall" and done["groups_done"] == 3 and done["episodes_done"] == 5
    assert done["per_setting"]["toolcall"]["groups_done"] == 1


def test_queued_rollout_history_starts_each_group_when_the_one_before_finishes():
    """Recorded after the fix to pending-as-list (afd0721): one slot (parallel 2, groups of 2), three groups."""
    history = load(HISTORIES / "rollout_queued.json")
    assert steps(history) == []
    groups = [f"group/replayed-queued.g{i}" for i in range(3)]
    assert group_events(history) == [(kind, g) for g in groups for kind in ("start", "done")]
    assert [(g["task_id"], g["samples"], g["setting"]) for _, g in children(history)] == [
        ("t1", 2, "terminal"),
        ("t2", 2, "terminal"),
        ("t3", 2, "terminal"),
    ]
    done = result(history)
    assert (done["groups_total"], done["groups_started"], done["groups_done"], done["running"]) == (3, 3, 3, 0)
    assert (done["episodes_done"], done["published"], done["mean_outcome"]) == (6, 18, 0.5)
    assert [r["group_id"] for r in done["recent"]] == [f"replayed-queued.g{i}" for i in range(3)]


def test_queued_mixed_rollout_history_starts_the_groups_that_did_not_fit_as_others_finish():
    """Recorded after the fix to pending-as-list (afd0721): groups of 2 (terminal) and 1 (toolcall) episodes,
    interleaved, in 3 episodes."""
    history = load(HISTORIES / "rollout_mixed_queued.json")
    assert steps(history) == []  # every part names its tasks
    g = [f"group/replayed-mixed-queued.g{i}" for i in range(4)]
    assert group_events(history) == [
        ("start", g[0]),
        ("start", g[1]),  # 2 + 1 episodes: g2 (2 more) does not fit
        ("done", g[0]),
        ("start", g[2]),
        ("done", g[1]),
        ("start", g[3]),
        ("done", g[2]),
        ("done", g[3]),
    ]
    assert [(c["setting"], c["task_id"], c["samples"]) for _, c in children(history)] == [
        ("terminal", "t1", 2),
        ("toolcall", "c1", 1),
        ("terminal", "t2", 2),
        ("toolcall", "c2", 1),
    ]
    done = result(history)
    assert done["setting"] == "terminal+toolcall"
    assert (done["groups_total"], done["groups_started"], done["groups_done"], done["running"]) == (4, 4, 4, 0)
    assert (done["episodes_done"], done["published"]) == (6, 18)
    per = done["per_setting"]
    assert (per["terminal"]["groups_done"], per["terminal"]["episodes_done"], per["terminal"]["published"]) == (
        2,
        4,
        12,
    )
    assert (per["toolcall"]["groups_done"], per["toolcall"]["episodes_done"], per["toolcall"]["published"]) == (2, 2, 6)


def test_evaluation_history_scores_the_answer_sets_then_the_held_out_tasks_as_groups_that_publish_nothing():
    history = load(HISTORIES / "evaluation_sets_and_episodes.json")
    assert steps(history) == [
        "eval_plan",
        "evaluate_set",
        "record_eval_scores",
        "evaluate_set",
        "record_eval_scores",
        "eval_episode_tasks",
        "record_eval_scores",
    ]
    assert [s["set"] for s in scheduled(history, "evaluate_set")] == ["personalization-student", "user-support"]
    groups = children(history)
    assert [wf_id.rsplit("-", 1)[0] for wf_id, _ in groups] == [
        "group/eval-3-terminal-solve",
        "group/eval-3-terminal-fail",
    ]
    assert all(inp["publish"] is False and inp["config"]["prm_votes"] == 0 for _, inp in groups)
    done = result(history)
    assert done["skipped"] is None and [s["set"] for s in done["scores"]] == [
        "personalization-student",
        "user-support",
        "episodes-terminal",
    ]
    assert done["scores"][-1]["metrics"] == {"success": 0.5} and done["scores"][-1]["count"] == 2


def test_evaluation_history_that_moved_on_records_nothing_after_the_moved_set():
    history = load(HISTORIES / "evaluation_moved_on.json")
    assert steps(history) == ["eval_plan", "evaluate_set", "record_eval_scores", "evaluate_set"]
    done = result(history)
    assert done["skipped"] == "version 3 moved on" and [s["set"] for s in done["scores"]] == ["personalization-student"]


def test_a_turns_votes_are_one_activity_since_the_patch_and_one_each_before():
    now = steps(load(HISTORIES / "judge_turn_retired_in_one.json"))
    assert now.count("judge_votes") == 1 and "prm_vote" not in now and "hint" not in now, now
    before = steps(load(HISTORIES / "retired" / "judge_turn_binary.json"))
    assert before.count("prm_vote") == 3 and "judge_votes" not in before, before


def test_a_judge_is_one_activity_unless_a_hint_is_accepted():
    """Plans of sessions started now ask for `judge_and_publish`; the retired patch writes no marker any more. An
    accepted hint is returned unpublished: its teacher pass, then the publish."""
    assert steps(load(HISTORIES / "judge_turn_now_binary.json")) == ["judge_and_publish"]
    assert steps(load(HISTORIES / "judge_turn_now_no_hint.json")) == ["judge_and_publish"]
    assert steps(load(HISTORIES / "judge_turn_now_in_one.json")) == [
        "judge_and_publish",
        "teacher_logprobs",
        "publish_sample",
    ]
    done = result(load(HISTORIES / "judge_turn_now_binary.json"))
    assert done["judge"]["prm_votes"] == [1, 1, -1] and done["judge"]["eval_score"] == 1, done
    assert done["result"]["published"] and done["result"]["reward"] == 1.0, done


async def test_judges_with_the_retired_patchs_plain_marker_no_longer_replay():
    """The patch's call is gone: a history with its plain marker (a run of the build that added it) fails, one with
    the deprecated marker replays (above). Why the build before this one had to deprecate it first."""
    for name in ("judge_turn_votes_binary.json", "judge_turn_votes_in_one.json"):
        got = await replayer(JudgeTurnWorkflow).replay_workflow(
            load(HISTORIES / "retired" / name), raise_on_replay_failure=False
        )
        assert isinstance(got.replay_failure, workflow.NondeterminismError), (name, got.replay_failure)


def test_the_deprecated_patch_marks_its_marker_deprecated_so_the_next_release_can_drop_the_call():
    def patch_markers(name: str) -> list[dict]:
        events = json.loads((HISTORIES / name).read_text())["events"]
        payloads = [
            e["markerRecordedEventAttributes"]["details"]["patch-data"]["payloads"][0]["data"]
            for e in events
            if e["eventType"] == "EVENT_TYPE_MARKER_RECORDED"
        ]
        return [json.loads(base64.b64decode(p)) for p in payloads]

    patch = "judge-votes-in-one-activity"
    assert patch_markers("retired/judge_turn_votes_binary.json") == [{"id": patch, "deprecated": False}]
    assert patch_markers("judge_turn_retired_binary.json") == [{"id": patch, "deprecated": True}]
    assert patch_markers("judge_turn_now_binary.json") == patch_markers("judge_turn_now_in_one.json") == []
    assert steps(load(HISTORIES / "judge_turn_retired_binary.json")) == [
        f"patch:{patch}",
        "judge_votes",
        "publish_sample",
    ]
