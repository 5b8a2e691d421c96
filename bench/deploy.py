"""`openclaw-rl bench deploy`: roll a new build of the workflow code out while sessions chat and a rollout runs.

What it runs: the Temporal dev server as `up` starts it, the real SessionWorkflow, RolloutWorkflow, TaskGroupWorkflow
and EpisodeWorkflow on a workflow worker of build A, activity pools modelled as in `bench fairness` (generate and an
env step take `--gen-ms`). Build B is the same workflow code with one change that old histories cannot replay: a
timer before each turn and before each episode attempt (bench.deploy_build_b). Halfway, B's worker starts and is
made current; the sessions open on A chat on through the roll-out, then end; new sessions and a second rollout
start on B.
Modes:
  versioned    Worker Versioning (temporal.versioning): A and B are versions of one Worker Deployment; whatever
               started on A is pinned to it, and A drains.
  unversioned  today's roll-out without it: A's worker stops and B's takes its queue; every open history meets B.
Prints per mode the turns and episode steps during the roll-out, the non-determinism errors (workflow tasks failed
as non-deterministic, read from the histories), the failed turns, and whether the sessions open on A finished on A,
then the last line (versioned): `deploy: <n> turns, <m> episode steps during the roll-out, non-determinism errors
<e>, failed turns <f>, sessions on old build finished on it <k>/<k>`.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from contextlib import AsyncExitStack

from temporalio import activity
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client
from temporalio.common import VersioningBehavior
from temporalio.worker import Worker, WorkerDeploymentConfig, WorkerDeploymentVersion

from bench.deploy_build_b import BUILD_B_WORKFLOWS
from bench.dev_server import start_dev_server
from bench.fairness import Pools, turn
from contracts.episodes import EnvStepInput, EnvStepResult, EpisodeConfig, RolloutInput
from contracts.session import EndSession, SessionConfig, SessionInput
from control.deployments import describe, make_current
from openclaw_rl.settings import Settings
from workflows.episode import EpisodeWorkflow
from workflows.rollout import RolloutWorkflow
from workflows.session import SessionWorkflow
from workflows.task_group import TaskGroupWorkflow

MODES = ("versioned", "unversioned")
BUILD_A_WORKFLOWS = [SessionWorkflow, RolloutWorkflow, TaskGroupWorkflow, EpisodeWorkflow]
DRAINAGE_CONFIG = {
    # How soon a version with no open pinned workflow reads "drained" (minutes by default).
    "matching.wv.VersionDrainageStatusVisibilityGracePeriod": '"5s"',
    "matching.wv.VersionDrainageStatusRefreshInterval": '"2s"',
}


class Load:
    def __init__(self, client: Client, q: str, args: argparse.Namespace, pools: Pools):
        self.client, self.q, self.args, self.pools = client, q, args, pools
        self.answered: list[float] = []
        self.failed: list[str] = []
        self.stop = asyncio.Event()

    def session(self, tag: str, s: int) -> SessionInput:
        config = SessionConfig(policy_task_queue=self.q + "-policy", workflow_task_queue=self.q, idle_timeout_s=600,
                               turns_per_run=200, generate_heartbeat_s=60, generate_timeout_s=600)  # fmt: skip
        return SessionInput(user_id=f"user-{s}", session_id=f"{tag}-{s}-{uuid.uuid4().hex[:6]}", config=config)

    async def chat(self, inp: SessionInput, until: asyncio.Event) -> None:
        n = 0
        while not until.is_set() and not self.stop.is_set():
            try:
                await asyncio.wait_for(turn(self.client, inp, n, None), self.args.turn_timeout_s)
                self.answered.append(time.monotonic())
            except (asyncio.TimeoutError, Exception) as exc:  # noqa: BLE001 - every failed turn is counted
                self.failed.append(f"{inp.session_id}: {type(exc).__name__}: {str(exc)[:120]}")
            n += 1
        await self.client.get_workflow_handle(self.workflow_id(inp)).signal(SessionWorkflow.end, EndSession())

    @staticmethod
    def workflow_id(inp: SessionInput) -> str:
        from contracts.chat import tenant_of

        return f"session/{tenant_of(inp.user_id)}/{inp.session_id}"

    async def rollout(self, tag: str) -> str:
        cfg = EpisodeConfig(max_steps=8, prm_votes=1, policy_task_queue=self.q + "-policy", judge_task_queue=self.q,
                            env_task_queue=self.pools.env_q, env_lost_after_s=60)  # fmt: skip
        inp = RolloutInput(rollout_id=f"deploy-{tag}-{uuid.uuid4().hex[:6]}", setting="terminal",
                           task_ids=[f"t{i}" for i in range(self.args.rollout_tasks)], samples_per_task=4,
                           parallel=8, config=cfg, publish=False)  # fmt: skip
        handle = await self.client.start_workflow(
            RolloutWorkflow.run, inp, id=f"rollout/{inp.rollout_id}", task_queue=self.q
        )
        return handle.id


class CountingPools(Pools):
    """The fairness benchmark's pools, counting env steps (what an episode did during the roll-out)."""

    def __init__(self, *a):
        super().__init__(*a)
        self.steps: list[float] = []

    @activity.defn(name="env_step")
    async def env_step(self, inp: EnvStepInput) -> EnvStepResult:  # type: ignore[override]
        self.steps.append(time.monotonic())
        return await super().env_step(inp)


async def nondeterminism_errors(client: Client, since_query: str) -> tuple[int, list[str]]:
    """Workflow tasks failed as non-deterministic, over every workflow the mode started."""
    count, where = 0, []
    async for wf in client.list_workflows(since_query):
        async for event in client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                cause = event.workflow_task_failed_event_attributes.cause
                if cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR:
                    count += 1
                    where.append(wf.id)
    return count, where


async def pinned_build(client: Client, workflow_id: str) -> tuple[str, str]:
    """The last run's build and status."""
    desc = await client.get_workflow_handle(workflow_id).describe()
    info = desc.raw_description.workflow_execution_info.versioning_info
    return info.deployment_version.build_id, desc.status.name if desc.status else "?"


def worker(client: Client, q: str, workflows: list[type], pools: Pools, build: str | None, dep: str) -> Worker:
    config = (
        WorkerDeploymentConfig(version=WorkerDeploymentVersion(dep, build), use_worker_versioning=True,
                               default_versioning_behavior=VersioningBehavior.PINNED)
        if build else None
    )  # fmt: skip
    return Worker(client, task_queue=q, workflows=workflows, max_concurrent_workflow_tasks=50,
                  activities=[pools.archive_turns, pools.step_vote, pools.publish_step_samples],
                  **({"deployment_config": config} if config else {}))  # fmt: skip


async def run_mode(client: Client, mode: str, args: argparse.Namespace) -> dict:
    q = f"deploy-{mode}-{uuid.uuid4().hex[:6]}"
    dep = f"bench-{q}"
    settings = Settings(temporal={"versioning": {"enabled": True, "deployment_name": dep}})
    pools = CountingPools(args.gen_ms / 1000, q + "-env", q + "-envw")
    load = Load(client, q, args, pools)
    versioned = mode == "versioned"
    started = time.time()
    async with AsyncExitStack() as stack:
        for w in (
            Worker(client, task_queue=q + "-policy", activities=[pools.generate, pools.agent_step],
                   max_concurrent_activities=args.slots),
            Worker(client, task_queue=pools.env_q, activities=[pools.env_open]),
            Worker(client, task_queue=pools.worker_q, activities=[pools.env_step, pools.env_outcome, pools.env_close]),
        ):  # fmt: skip
            await stack.enter_async_context(w)
        a = worker(client, q, BUILD_A_WORKFLOWS, pools, "build-a" if versioned else None, dep)
        await a.__aenter__()
        a_running = True
        try:
            if versioned:
                await make_current(client, settings, "build-a")
            old_done = asyncio.Event()
            old = [load.session("old", s) for s in range(args.sessions)]
            old_chats = [asyncio.ensure_future(load.chat(inp, old_done)) for inp in old]
            await load.rollout("a")
            await asyncio.sleep(args.before)

            rollout_t0, turns_before = time.monotonic(), len(load.answered)
            if not versioned:  # today's roll-out: the old worker goes, the new one takes its queue
                await a.__aexit__(None, None, None)
                a_running = False
            b = worker(client, q, BUILD_B_WORKFLOWS, pools, "build-b" if versioned else None, dep)
            await stack.enter_async_context(b)
            if versioned:
                await make_current(client, settings, "build-b")
            new_done = asyncio.Event()
            new_chats = [
                asyncio.ensure_future(load.chat(load.session("new", s), new_done)) for s in range(args.sessions)
            ]
            await load.rollout("b")
            await asyncio.sleep(args.after)
            old_done.set()
            await asyncio.wait_for(asyncio.gather(*old_chats, return_exceptions=True), args.turn_timeout_s + 30)
            rollout_s = time.monotonic() - rollout_t0
            turns = len(load.answered) - turns_before
            steps = sum(1 for t in pools.steps if t >= rollout_t0)
            new_done.set()
            await asyncio.wait_for(asyncio.gather(*new_chats, return_exceptions=True), args.turn_timeout_s + 30)

            finished_on_a = 0
            for inp in old if versioned else []:  # without versions none is on A: each meets B's code
                for _ in range(40):
                    build, status = await pinned_build(client, load.workflow_id(inp))
                    if status != "RUNNING":
                        break
                    await asyncio.sleep(0.5)
                finished_on_a += build == "build-a" and status == "COMPLETED"
            drainage = "-"
            if versioned:
                for _ in range(30):
                    state = await describe(client, settings)
                    row = next((x for x in state.builds if x.build_id == "build-a"), None) if state else None
                    drainage = (row.drainage or row.status) if row else "?"
                    if drainage == "drained":
                        break
                    await asyncio.sleep(1)
            query = f'StartTime > "{time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started - 1))}"'
            nde, where = await nondeterminism_errors(client, query + f' AND TaskQueue = "{q}"')
        finally:
            load.stop.set()
            if a_running:
                await a.__aexit__(None, None, None)
    return {
        "mode": mode, "turns": turns, "steps": steps, "rollout_s": rollout_s, "nde": nde, "nde_workflows": where[:5],
        "failed": len(load.failed), "failed_first": load.failed[:3], "old_sessions": len(old),
        "finished_on_a": int(finished_on_a), "drainage": drainage,
    }  # fmt: skip


async def main(args: argparse.Namespace) -> int:
    env = await start_dev_server(DRAINAGE_CONFIG)
    try:
        print(f"{args.sessions} sessions on build A, then {args.sessions} on B; a rollout of {args.rollout_tasks} "
              f"tasks x 4 on each; B made current after {args.before:g} s, A's sessions end {args.after:g} s later",
              flush=True)  # fmt: skip
        results = {}
        for mode in args.modes.split(","):
            r = results[mode] = await run_mode(env.client, mode, args)
            print(
                f"{mode:11s} {r['turns']:5d} turns, {r['steps']:4d} episode steps in the {r['rollout_s']:.0f} s "
                f"roll-out; non-determinism errors {r['nde']}, failed turns {r['failed']}; sessions open on A "
                f"that finished on it {r['finished_on_a']}/{r['old_sessions']}; A {r['drainage']}",
                flush=True,
            )
            for line in r["failed_first"] + [f"non-deterministic: {w}" for w in r["nde_workflows"]]:
                print(f"  {line}")
        r = results.get("versioned") or next(iter(results.values()))
        print(f"deploy: {r['turns']} turns, {r['steps']} episode steps during the roll-out, non-determinism errors "
              f"{r['nde']}, failed turns {r['failed']}, sessions on old build finished on it "
              f"{r['finished_on_a']}/{r['old_sessions']}")  # fmt: skip
    finally:
        await env.shutdown()
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("deploy", help="roll a new build of the workflow code out under chat and rollout load",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--sessions", type=int, default=16, help="sessions chatting on each build")
    p.add_argument("--before", type=float, default=8.0, help="seconds of load before the new build is made current")
    p.add_argument("--after", type=float, default=10.0, help="seconds the old build's sessions chat on after it")
    p.add_argument("--slots", type=int, default=16, help="policy pool slots (calls at once)")
    p.add_argument("--gen-ms", type=float, default=100.0, help="how long a generate or agent step holds a slot")
    p.add_argument("--rollout-tasks", type=int, default=4, help="tasks of each rollout (4 episodes each)")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated: versioned, unversioned")
    p.add_argument(
        "--turn-timeout-s", type=float, default=20.0, help="a turn not answered within this counts as failed"
    )


def bench_command(args: argparse.Namespace, settings=None) -> int:
    return asyncio.run(main(args))
