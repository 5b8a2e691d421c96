"""CanaryWorkflow: one user's candidate adapter versions, judged one after another until each is promoted or rolled
back (contracts.canary). Id `canary/<pseudonym>`; started (or joined) by the publication that proposes a candidate.

A round: the other version answers the turns served since the last round (policy pool), the judge compares both ways
(judge pool), the verdicts go into the evidence, and the sequential test (evals.canary) decides or asks for more.
Each round's verdicts and the decision are in the history, the activities' results. After a decision the workflow
continues as new with the user's next candidate, if one waited; else it ends (the next publication starts it again).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from contracts.canary import (
        CANARY_ANSWERS,
        CANARY_DECIDE,
        CANARY_JUDGE,
        CANARY_WORKFLOW,
        CANDIDATE_SIGNAL,
        CanaryInput,
        DecideInput,
        Decision,
        Evidence,
        RoundAnswers,
        RoundInput,
        RoundVerdicts,
    )
    from evals import canary
    from workflows.activity_calls import execute
    from workflows.versioning import UPGRADE_AT_CONTINUE

ROUNDS_PER_RUN = 200
"""Rounds before the run continues as new with its evidence (a quiet user's canary waits round after round)."""


@workflow.defn(name=CANARY_WORKFLOW)
class CanaryWorkflow:
    def __init__(self) -> None:
        self.evidence = Evidence()
        self.version: int | None = None
        self.proposed: list[int] = []
        """Candidates proposed since the last round began (activities.canary_start's signal-with-start)."""

    @workflow.signal(name=CANDIDATE_SIGNAL)
    def candidate(self, version: int) -> None:
        self.proposed.append(version)

    @workflow.query
    def state(self) -> dict:
        return {"version": self.version, "evidence": self.evidence.model_dump()}

    @workflow.run
    async def run(self, inp: CanaryInput) -> Decision | None:
        self.evidence, self.version = inp.evidence, inp.version
        cursor = inp.cursor
        for _ in range(ROUNDS_PER_RUN):
            self.proposed.clear()
            answers: RoundAnswers = await execute(
                CANARY_ANSWERS,
                RoundInput(
                    tenant=inp.tenant, version=self.version, cursor=cursor,
                    max_turns=max(1, inp.max_turns - self.evidence.turns), wait_s=inp.wait_s,
                ),
                task_queue=inp.policy_task_queue,
            )  # fmt: skip
            if answers.status == "no candidate":
                if self.proposed:  # proposed after the round looked: look again
                    continue
                return None
            if answers.version != self.version:  # the first round, or a candidate decided outside this run
                self.version, self.evidence = answers.version, Evidence()
            cursor = answers.cursor
            if answers.key:
                try:
                    judged: RoundVerdicts = await execute(CANARY_JUDGE, answers, task_queue=inp.judge_task_queue)
                except ActivityError:  # the round's answers are gone (expired, forgotten): its turns count for nothing
                    workflow.logger.warning("a canary round could not be judged", extra={"tenant": inp.tenant})
                else:
                    self.evidence = canary.add(self.evidence, judged.verdicts)
            verdict, why = canary.decision(self.evidence, inp.worse, inp.alpha, inp.beta, inp.max_turns)
            if verdict is None:
                continue
            assert self.version is not None
            decided: Decision = await execute(
                CANARY_DECIDE,
                DecideInput(
                    tenant=inp.tenant, version=self.version, promote=verdict == "promote", reason=why,
                    evidence=self.evidence,
                ),
                task_queue=inp.judge_task_queue,
            )  # fmt: skip
            if decided.next_version is None and decided.verdict != "superseded" and not self.proposed:
                return decided
            # A version waits, or one was proposed meanwhile, or this decision had been written already (a retry):
            # the next run reads whatever candidate is pending (none: it ends), so no candidate is left unjudged.
            workflow.continue_as_new(
                inp.model_copy(update={"version": decided.next_version, "cursor": 0, "evidence": Evidence()}),
                initial_versioning_behavior=UPGRADE_AT_CONTINUE,
            )
        workflow.continue_as_new(
            inp.model_copy(update={"version": self.version, "cursor": cursor, "evidence": self.evidence}),
            initial_versioning_behavior=UPGRADE_AT_CONTINUE,
        )
