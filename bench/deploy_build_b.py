"""Build B of `bench deploy`: the workflow code of this checkout with one change its old histories cannot replay.

A timer before each turn of a session and before each attempt of an episode: a history written by build A has
the turn's activity (or the environment's opening) where B's code now starts a timer, so replaying it on B is a
non-determinism error. That is the kind of change Worker Versioning lets a roll-out make without a patch.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from contracts.episodes import EPISODE_WORKFLOW, EpisodeInput, EpisodeResult
from contracts.session import SESSION_WORKFLOW, SessionInput, SessionSummary, TurnRequest, TurnResult
from workflows.episode import EpisodeWorkflow
from workflows.rollout import RolloutWorkflow
from workflows.session import SessionWorkflow
from workflows.task_group import TaskGroupWorkflow

CHANGE = timedelta(milliseconds=1)


@workflow.defn(name=SESSION_WORKFLOW, sandboxed=False)
class SessionWorkflowB(SessionWorkflow):
    @workflow.init
    def __init__(self, inp: SessionInput) -> None:
        super().__init__(inp)

    @workflow.run
    async def run(self, inp: SessionInput) -> SessionSummary:
        return await super().run(inp)

    async def _run_turn(self, req: TurnRequest) -> TurnResult:
        await workflow.sleep(CHANGE)
        return await super()._run_turn(req)


@workflow.defn(name=EPISODE_WORKFLOW, sandboxed=False)
class EpisodeWorkflowB(EpisodeWorkflow):
    @workflow.init
    def __init__(self, inp: EpisodeInput) -> None:
        super().__init__(inp)

    @workflow.run
    async def run(self, inp: EpisodeInput) -> EpisodeResult:
        return await super().run(inp)

    async def _attempt(self, inp: EpisodeInput, attempt: int) -> EpisodeResult:
        await workflow.sleep(CHANGE)
        return await super()._attempt(inp, attempt)


BUILD_B_WORKFLOWS = [SessionWorkflowB, RolloutWorkflow, TaskGroupWorkflow, EpisodeWorkflowB]
