"""RolloutWorkflow: keeps P environments busy over a task set, one task group after another.

Groups run as child workflows, as many at once as fit in `parallel` episodes
(at least one group); when one finishes the next task's group starts. A mixed
rollout (`parts`: a task set per setting) interleaves its groups round-robin
across the settings, so every setting's samples arrive from the start. Progress
is in the Temporal UI's current details and the `progress` query (what
`openclaw-rl episodes watch` shows). Before its history grows long it drains the
running groups and continues as new with its cursor and totals.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from contracts.episodes import (
        LIST_TASKS,
        ROLLOUT_WORKFLOW,
        ListTasksInput,
        RolloutInput,
        RolloutPart,
        RolloutProgress,
        SettingProgress,
        TaskGroupInput,
        TaskGroupResult,
        TaskList,
    )
    from openclaw_rl.search_attributes import OUTCOME, SETTING, of_task
    from workflows.activity_calls import execute
    from workflows.task_group import TaskGroupWorkflow
    from workflows.versioning import UPGRADE_AT_CONTINUE

GROUPS_PER_RUN = 200
"""Groups started per workflow run before it drains and continues as new (history stays far from its limits)."""
KEEP_RECENT = 10
MIXED = "mixed"
"""The OpenclawSetting of a mixed rollout (its groups and episodes carry their own setting)."""


def mixed_order(parts: list[RolloutPart], passes: int) -> list[tuple[int, str]]:
    """(part index, task id) of every group of a mixed rollout, in start order: each part's task list `passes`
    times over, interleaved round-robin across the parts (a part with fewer tasks runs out first)."""
    seqs = [[p.task_ids[i % len(p.task_ids)] for i in range(len(p.task_ids) * passes)] for p in parts]
    return [(j, seq[k]) for k in range(max(map(len, seqs), default=0)) for j, seq in enumerate(seqs) if k < len(seq)]


# Unsandboxed, like SessionWorkflow: the sandbox's per-task cost is on every step's path, and this code is
# deterministic by construction (no I/O, time or randomness but workflow.*).
@workflow.defn(name=ROLLOUT_WORKFLOW, sandboxed=False)
class RolloutWorkflow:
    @workflow.init
    def __init__(self, inp: RolloutInput) -> None:
        self.inp = inp
        self.running: dict[int, str] = {}
        self.total = 0
        self.order: list[tuple[int, str]] = []
        self.groups_per_setting: dict[str, int] = {}
        self.episodes_running: dict[int, int] = {}

    @workflow.run
    async def run(self, inp: RolloutInput) -> RolloutProgress:
        if inp.parts:  # a mixed rollout: a code path of its own, so single-setting histories replay unchanged
            return await self._run_mixed(inp)
        workflow.upsert_search_attributes([SETTING.value_set(inp.setting)])
        if not inp.task_ids:
            listed: TaskList = await execute(
                LIST_TASKS, ListTasksInput(setting=inp.setting), task_queue=inp.config.env_task_queue
            )
            inp.task_ids = listed.task_ids
        self.total = len(inp.task_ids) * inp.passes
        slots = max(1, inp.parallel // inp.samples_per_task)
        started_this_run = 0
        pending: list[asyncio.Task] = []  # a list: workflow.wait returns lists, in the order given
        while inp.cursor < self.total or pending:
            while len(pending) < slots and inp.cursor < self.total and started_this_run < GROUPS_PER_RUN:
                pending.append(self._start(inp))
                started_this_run += 1
            self._details()
            if not pending:
                break
            done, pending = await workflow.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                self._record(task.result())
            self._details()
        if inp.cursor < self.total:  # drained after GROUPS_PER_RUN: carry on in a fresh history
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(inp, initial_versioning_behavior=UPGRADE_AT_CONTINUE)
        return self.progress()

    def _start(self, inp: RolloutInput):
        index = inp.cursor
        inp.cursor += 1
        task_id = inp.task_ids[index % len(inp.task_ids)]
        group_id = f"{inp.rollout_id}.g{index}"
        self.running[index] = task_id

        async def group() -> TaskGroupResult | None:
            try:
                return await workflow.execute_child_workflow(
                    TaskGroupWorkflow.run,
                    TaskGroupInput(
                        group_id=group_id,
                        setting=inp.setting,
                        task_id=task_id,
                        samples=inp.samples_per_task,
                        config=inp.config,
                        publish=inp.publish,
                    ),
                    id=f"group/{group_id}",
                    static_summary=f"{inp.setting} {task_id} x{inp.samples_per_task}",
                    search_attributes=of_task(inp.setting, task_id) if inp.config.attributes_at_start_and_end else None,
                )
            except ChildWorkflowError:
                workflow.logger.warning("a task group failed", extra={"group": group_id})
                return TaskGroupResult(
                    group_id=group_id,
                    task_id=task_id,
                    outcomes=[],
                    failed=inp.samples_per_task,
                    published=0,
                    dropped_steps=0,
                )
            finally:
                self.running.pop(index, None)

        return asyncio.ensure_future(group())

    # ---- mixed rollouts (parts) ------------------------------------------------------------------------------
    async def _run_mixed(self, inp: RolloutInput) -> RolloutProgress:
        workflow.upsert_search_attributes([SETTING.value_set(MIXED)])
        for part in inp.parts:
            if not part.task_ids:
                listed: TaskList = await execute(
                    LIST_TASKS,
                    ListTasksInput(setting=part.setting),
                    task_queue=(part.config or inp.config).env_task_queue,
                )
                part.task_ids = listed.task_ids
        self.order = mixed_order(inp.parts, inp.passes)
        self.total = len(self.order)
        for j, _ in self.order:
            name = inp.parts[j].setting
            self.groups_per_setting[name] = self.groups_per_setting.get(name, 0) + 1
        started_this_run = 0
        pending: list[asyncio.Task] = []  # a list: workflow.wait returns lists, in the order given
        while inp.cursor < self.total or pending:
            while inp.cursor < self.total and started_this_run < GROUPS_PER_RUN and self._fits(inp):
                pending.append(self._start_part(inp))
                started_this_run += 1
            self._details()
            if not pending:
                break
            done, pending = await workflow.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                setting, result = task.result()
                self._record(result, setting)
            self._details()
        if inp.cursor < self.total:
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(inp, initial_versioning_behavior=UPGRADE_AT_CONTINUE)
        return self.progress()

    def _samples(self, inp: RolloutInput, part: RolloutPart) -> int:
        return part.samples_per_task or inp.samples_per_task

    def _fits(self, inp: RolloutInput) -> bool:
        """The next group fits in `parallel` episodes beside the running ones (one group always may run)."""
        part = inp.parts[self.order[inp.cursor][0]]
        running = sum(self.episodes_running.values())
        return not running or running + self._samples(inp, part) <= inp.parallel

    def _start_part(self, inp: RolloutInput):
        index = inp.cursor
        inp.cursor += 1
        j, task_id = self.order[index]
        part = inp.parts[j]
        samples = self._samples(inp, part)
        group_id = f"{inp.rollout_id}.g{index}"
        self.running[index] = task_id
        self.episodes_running[index] = samples

        config = part.config or inp.config

        async def group() -> tuple[str, TaskGroupResult]:
            try:
                return part.setting, await workflow.execute_child_workflow(
                    TaskGroupWorkflow.run,
                    TaskGroupInput(
                        group_id=group_id,
                        setting=part.setting,
                        task_id=task_id,
                        samples=samples,
                        config=config,
                        publish=inp.publish,
                    ),
                    id=f"group/{group_id}",
                    static_summary=f"{part.setting} {task_id} x{samples}",
                    search_attributes=of_task(part.setting, task_id) if config.attributes_at_start_and_end else None,
                )
            except ChildWorkflowError:
                workflow.logger.warning("a task group failed", extra={"group": group_id, "setting": part.setting})
                failed = TaskGroupResult(
                    group_id=group_id, task_id=task_id, outcomes=[], failed=samples, published=0, dropped_steps=0
                )
                return part.setting, failed
            finally:
                self.running.pop(index, None)
                self.episodes_running.pop(index, None)

        return asyncio.ensure_future(group())

    def _record(self, result: TaskGroupResult | None, setting: str | None = None) -> None:
        if result is None:
            return
        if setting is not None:  # a mixed rollout also counts per setting
            t = self.inp.totals
            for name, value in (
                ("groups_done", 1),
                ("episodes_done", len(result.outcomes)),
                ("outcome_sum", sum(result.outcomes)),
                ("published", result.published),
            ):
                t[f"{setting}:{name}"] = t.get(f"{setting}:{name}", 0) + value
        t = self.inp.totals
        t["groups_done"] = t.get("groups_done", 0) + 1
        t["episodes_done"] = t.get("episodes_done", 0) + len(result.outcomes)
        t["episodes_failed"] = t.get("episodes_failed", 0) + result.failed
        t["outcome_sum"] = t.get("outcome_sum", 0.0) + sum(result.outcomes)
        t["published"] = t.get("published", 0) + result.published
        self.inp.done = (self.inp.done + [result])[-KEEP_RECENT:]
        if t["episodes_done"]:
            workflow.upsert_search_attributes([OUTCOME.value_set(t["outcome_sum"] / t["episodes_done"])])

    def _details(self) -> None:
        p = self.progress()
        mean = f", mean outcome {p.mean_outcome:.2f}" if p.mean_outcome is not None else ""
        per = "".join(
            f"\n{name}: {s.groups_done}/{s.groups_total} groups, {s.episodes_done} episodes"
            + (f", mean outcome {s.mean_outcome:.2f}" if s.mean_outcome is not None else "")
            + f", {s.published} samples"
            for name, s in p.per_setting.items()
        )
        workflow.set_current_details(
            f"{p.setting}: {p.groups_done}/{p.groups_total} groups done, {p.running} running, "
            f"{p.episodes_done} episodes{mean}, {p.published} samples published{per}"
        )

    @workflow.query
    def progress(self) -> RolloutProgress:
        t = self.inp.totals
        episodes = int(t.get("episodes_done", 0))
        settings = list(dict.fromkeys(p.setting for p in self.inp.parts)) or [self.inp.setting or ""]
        per_setting = {}
        for name in settings if self.inp.parts else []:
            n = int(t.get(f"{name}:episodes_done", 0))
            per_setting[name] = SettingProgress(
                groups_total=self.groups_per_setting.get(name, 0),
                groups_done=int(t.get(f"{name}:groups_done", 0)),
                episodes_done=n,
                mean_outcome=t[f"{name}:outcome_sum"] / n if n else None,
                published=int(t.get(f"{name}:published", 0)),
            )
        return RolloutProgress(
            rollout_id=self.inp.rollout_id,
            setting="+".join(settings),
            groups_total=self.total,
            groups_started=self.inp.cursor,
            groups_done=int(t.get("groups_done", 0)),
            running=len(self.running),
            episodes_done=episodes,
            mean_outcome=t["outcome_sum"] / episodes if episodes else None,
            published=int(t.get("published", 0)),
            recent=self.inp.done,
            settings=settings,
            per_setting=per_setting,
        )
