"""Recorded histories must replay on the current workflow code: a change that breaks a running workflow fails here.

The histories come from `python -m tests.workflows.record_histories`. A workflow
change that makes one of them fail is nondeterministic for runs already in
flight: guard it with `workflow.patched` (and keep the old history) rather than
re-recording.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from contracts.training import StepSummary, TrainingInput
from tests.workflows.record_histories import HISTORIES, TrainingWorkflowBeforePatch
from workflows.judge_turn import JudgeTurnWorkflow
from workflows.session import SessionWorkflow
from workflows.training import TrainingWorkflow

PATCH = "skip-publish-of-all-stale-batch"
RECORDED = {
    "session_paired_and_rolled_run1.json",
    "session_paired_and_rolled_run2.json",
    "session_paired_and_rolled_run3.json",
    "judge_turn_binary.json",
    "judge_turn_binary_no_next_state.json",
    "judge_turn_opd.json",
    "training_steps.json",
    "training_all_stale_before_patch.json",
}


@workflow.defn(name="TrainingWorkflow", sandboxed=False)
class TrainingWorkflowUnguarded(TrainingWorkflowBeforePatch):
    """The patch without its `workflow.patched` guard: an all-stale batch is never published, whatever the history
    says."""

    @workflow.run
    async def run(self, inp: TrainingInput):
        return await super().run(inp)

    def _publishes(self, summary: StepSummary) -> bool:
        return bool(summary.trained)


def load(path: Path) -> WorkflowHistory:
    """The recorder put the workflow id in the started event; replay needs it (it names children and archive keys)."""
    text = path.read_text()
    workflow_id = json.loads(text)["events"][0]["workflowExecutionStartedEventAttributes"]["workflowId"]
    return WorkflowHistory.from_json(workflow_id, text)


def replayer(*workflows: type) -> Replayer:
    return Replayer(
        workflows=list(workflows) or [SessionWorkflow, JudgeTurnWorkflow, TrainingWorkflow],
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


def test_every_scenario_is_recorded():
    assert RECORDED <= {p.name for p in HISTORIES.glob("*.json")}


@pytest.mark.parametrize("name", sorted(p.name for p in HISTORIES.glob("*.json")))
async def test_history_replays_on_current_code(name: str):
    result = await replayer().replay_workflow(load(HISTORIES / name), raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{name}: {result.replay_failure!r}"


def test_patched_history_skips_publishing_the_all_stale_batch():
    seq = steps(load(HISTORIES / "training_steps.json"))
    assert seq.count(f"patch:{PATCH}") == 1
    at = seq.index(f"patch:{PATCH}")
    assert seq[at - 1 : at + 2] == ["train_step", f"patch:{PATCH}", "ack_batch"]
    assert seq.count("publish_weights") == 2 and "export_checkpoint" in seq


def test_history_before_the_patch_published_the_all_stale_batch():
    seq = steps(load(HISTORIES / "training_all_stale_before_patch.json"))
    assert not any(s.startswith("patch:") for s in seq)
    assert seq[:4] == ["claim_batch", "train_step", "publish_weights", "ack_batch"]


async def test_history_before_the_patch_replays_on_the_old_branch():
    await replayer(TrainingWorkflow).replay_workflow(load(HISTORIES / "training_all_stale_before_patch.json"))


async def test_dropping_the_patch_guard_breaks_replay_of_the_old_history():
    with pytest.raises(workflow.NondeterminismError, match="'publish_weights' does not match .* 'ack_batch'"):
        await replayer(TrainingWorkflowUnguarded).replay_workflow(
            load(HISTORIES / "training_all_stale_before_patch.json")
        )


async def test_old_code_cannot_replay_the_patched_history():
    """Proves training_steps.json takes the patched branch: the code before the patch diverges from it."""
    with pytest.raises(workflow.NondeterminismError, match=PATCH):
        await replayer(TrainingWorkflowBeforePatch).replay_workflow(load(HISTORIES / "training_steps.json"))
