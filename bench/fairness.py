"""`openclaw-rl bench fairness`: does one user's flood (or a rollout) delay another user's chat turns?

What it runs: the Temporal dev server as `up` starts it (stack.services.DEV_SERVER_DYNAMIC_CONFIG, fairness on),
the real SessionWorkflow and RolloutWorkflow / TaskGroupWorkflow / EpisodeWorkflow on a workflow worker, and a
policy pool whose `generate` and `agent_step` each hold one of `--slots` slots for `--gen-ms` (the engine's batch
capacity, modelled: a real engine on this box's 2 cores would measure the CPU, not the queue). Fairness and
priority act where tasks wait, in the policy queue's backlog; this makes that backlog and nothing else.

Phases, each `--seconds` long: user B alone (`--b` sessions, one turn after another); B while user A floods with
ten times B's sessions; B beside a rollout whose episodes' steps go to the same policy queue. Modes:
  today  no ranks, no fairness keys (what main sends: every task rank 3, one key): first come, first served;
  off    ranks (chat 1 before episodes 3), `temporal.fairness.enabled = false`: one key for all users;
  on     ranks and a fairness key per user (the settings' default).
Prints B's p50/p99 turn latency for each, then the last line
`fairness: B p50 unloaded <x> ms, under flood <y> ms (<r>x), with rollout <z> ms` for the `on` mode.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from contextlib import AsyncExitStack
from datetime import datetime, timezone

from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import Priority, SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

import workflows.activity_calls as activity_calls
from bench.dev_server import start_dev_server
from contracts.chat import ChatSampling, GenerateInput, GenerateOutput, TurnType, tenant_of
from contracts.episodes import (
    AgentStepInput,
    AgentStepOutput,
    EnvOpened,
    EnvOpenInput,
    EnvRef,
    EnvStepInput,
    EnvStepResult,
    EpisodeConfig,
    Outcome,
    PublishStepsInput,
    PublishStepsResult,
    RolloutInput,
    StepVote,
    StepVoteInput,
)
from contracts.errors import ErrorType
from contracts.session import ArchiveTurnsInput, SessionConfig, SessionInput, TurnRequest
from control.sessions import session_priority
from openclaw_rl.search_attributes import SESSION_ID, USER_ID
from openclaw_rl.settings import Settings
from workflows.episode import EpisodeWorkflow
from workflows.rollout import RolloutWorkflow
from workflows.session import SessionWorkflow
from workflows.task_group import TaskGroupWorkflow

MODES = ("today", "off", "on")


class Pools:
    def __init__(self, gen_s: float, env_q: str, worker_q: str):
        self.gen_s, self.env_q, self.worker_q = gen_s, env_q, worker_q

    @activity.defn(name="generate")
    async def generate(self, inp: GenerateInput) -> GenerateOutput:
        await asyncio.sleep(self.gen_s)
        return GenerateOutput(content="ok", finish_reason="stop", prompt_tokens=10, completion_tokens=5)

    @activity.defn(name="agent_step")
    async def agent_step(self, inp: AgentStepInput) -> AgentStepOutput:
        await asyncio.sleep(self.gen_s)
        return AgentStepOutput(action="bash(ls)", tool_calls=1, finish_reason="stop", prompt_tokens=10,
                               completion_tokens=5)  # fmt: skip

    @activity.defn(name="archive_turns")
    async def archive_turns(self, inp: ArchiveTurnsInput) -> None:
        return None

    @activity.defn(name="env_open")
    async def env_open(self, inp: EnvOpenInput) -> EnvOpened:
        return EnvOpened(worker_queue=self.worker_q, instruction="task", tools=1)

    @activity.defn(name="env_step")
    async def env_step(self, inp: EnvStepInput) -> EnvStepResult:
        done = inp.step + 1 >= 8
        return EnvStepResult(done=done, done_reason="submitted" if done else "", observation="ok")

    @activity.defn(name="env_outcome")
    async def env_outcome(self, inp: EnvRef) -> Outcome:
        return Outcome(outcome=1.0)

    @activity.defn(name="env_close")
    async def env_close(self, inp: EnvRef) -> None:
        return None

    @activity.defn(name="step_vote")
    async def step_vote(self, inp: StepVoteInput) -> StepVote:
        return StepVote(score=1, raw="\\boxed{1}")

    @activity.defn(name="publish_step_samples")
    async def publish_step_samples(self, inp: PublishStepsInput) -> PublishStepsResult:
        return PublishStepsResult(published=len(inp.steps), duplicates=0, missing=0)


async def turn(client: Client, inp: SessionInput, n: int, priority: Priority | None) -> None:
    req = TurnRequest(turn_id=f"{inp.session_id}-{n}-{uuid.uuid4().hex[:6]}", turn_type=TurnType.MAIN,
                      sampling=ChatSampling(), stream=False, prompt_summary="hi", message_count=1,
                      received_at=datetime.now(timezone.utc))  # fmt: skip
    extra = {"priority": priority} if priority is not None else {}
    op = WithStartWorkflowOperation(
        SessionWorkflow.run, inp, id=f"session/{tenant_of(inp.user_id)}/{inp.session_id}",
        task_queue=inp.config.workflow_task_queue, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        search_attributes=TypedSearchAttributes([SearchAttributePair(USER_ID, tenant_of(inp.user_id)),
                                                 SearchAttributePair(SESSION_ID, inp.session_id)]),
        **extra,
    )  # fmt: skip
    for _ in range(200):
        try:
            await client.execute_update_with_start_workflow(SessionWorkflow.turn, req, start_workflow_operation=op)
            return
        except WorkflowUpdateFailedError as exc:
            if not (isinstance(exc.cause, ApplicationError) and exc.cause.type == ErrorType.SESSION_ROLLING):
                raise
            await asyncio.sleep(0.02)


async def chat(client: Client, user: str, sessions: int, until: float, q: str, priority, out: list[float] | None):
    async def one(s: int) -> None:
        config = SessionConfig(policy_task_queue=q + "-policy", workflow_task_queue=q, idle_timeout_s=600,
                               turns_per_run=200, generate_heartbeat_s=60, generate_timeout_s=600)  # fmt: skip
        inp = SessionInput(user_id=user, session_id=f"{user}-{s}-{uuid.uuid4().hex[:6]}", config=config)
        n = 0
        while time.monotonic() < until:
            t0 = time.monotonic()
            await turn(client, inp, n, priority)
            if out is not None:
                out.append((time.monotonic() - t0) * 1000)
            n += 1

    await asyncio.gather(*(one(s) for s in range(sessions)))


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


async def run_mode(client: Client, mode: str, args: argparse.Namespace) -> dict[str, list[float]]:
    q = f"fair-{mode}-{uuid.uuid4().hex[:6]}"
    env_q, worker_q = q + "-env", q + "-envw"
    pools = Pools(args.gen_ms / 1000, env_q, worker_q)
    settings = Settings(temporal={"fairness": {"enabled": mode == "on"}})
    ranks = activity_calls.rank_of
    if mode == "today":  # no rank on any command: the server's default for all, as main sends them
        activity_calls.rank_of = lambda workflow_type, started_with: None  # type: ignore[assignment]

    def prio(user: str) -> Priority | None:
        return None if mode == "today" else session_priority(settings, user)

    results: dict[str, list[float]] = {"unloaded": [], "flood": [], "rollout": []}
    async with AsyncExitStack() as stack:
        for w in (
            Worker(client, task_queue=q, workflows=[SessionWorkflow, RolloutWorkflow, TaskGroupWorkflow,
                   EpisodeWorkflow], activities=[pools.archive_turns, pools.step_vote, pools.publish_step_samples],
                   max_concurrent_workflow_tasks=50),
            Worker(client, task_queue=q + "-policy", activities=[pools.generate, pools.agent_step],
                   max_concurrent_activities=args.slots),
            Worker(client, task_queue=env_q, activities=[pools.env_open]),
            Worker(client, task_queue=worker_q, activities=[pools.env_step, pools.env_outcome, pools.env_close]),
        ):  # fmt: skip
            await stack.enter_async_context(w)
        try:
            until = time.monotonic() + args.seconds
            await chat(client, "user-b", args.b, until, q, prio("user-b"), results["unloaded"])
            until = time.monotonic() + args.seconds
            await asyncio.gather(
                chat(client, "user-b", args.b, until, q, prio("user-b"), results["flood"]),
                chat(client, "user-a", 10 * args.b, until, q, prio("user-a"), None),
            )
            cfg = EpisodeConfig(max_steps=8, prm_votes=1, policy_task_queue=q + "-policy", judge_task_queue=q,
                                env_task_queue=env_q, env_lost_after_s=60)  # fmt: skip
            rollout = RolloutInput(rollout_id=f"bench-{q}", setting="terminal",
                                   task_ids=[f"t{i}" for i in range(args.rollout_tasks)],
                                   samples_per_task=4, parallel=10 * args.b, config=cfg, publish=False)  # fmt: skip
            handle = await client.start_workflow(RolloutWorkflow.run, rollout, id=f"rollout/bench-{q}", task_queue=q)
            await asyncio.sleep(1.0)  # its episodes under way
            until = time.monotonic() + args.seconds
            await chat(client, "user-b", args.b, until, q, prio("user-b"), results["rollout"])
            await handle.terminate("benchmark phase over")
        finally:
            activity_calls.rank_of = ranks
    return results


async def main(args: argparse.Namespace) -> int:
    env = await start_dev_server()
    try:
        print(f"policy pool: {args.slots} slots, {args.gen_ms:.0f} ms a call; B: {args.b} sessions, A: "
              f"{10 * args.b}; {args.seconds:.0f} s a phase", flush=True)  # fmt: skip
        p50: dict[str, dict[str, float]] = {}
        for mode in args.modes.split(","):
            res = await run_mode(env.client, mode, args)
            p50[mode] = {k: statistics.median(v) if v else float("nan") for k, v in res.items()}
            for phase, v in res.items():
                print(f"{mode:5s} {phase:8s} B turns {len(v):4d}  p50 {pct(v, 0.5):7.0f} ms  "
                      f"p99 {pct(v, 0.99):7.0f} ms", flush=True)  # fmt: skip
        last = p50.get("on") or next(iter(p50.values()))
        print(f"fairness: B p50 unloaded {last['unloaded']:.0f} ms, under flood {last['flood']:.0f} ms "
              f"({last['flood'] / last['unloaded']:.2f}x), with rollout {last['rollout']:.0f} ms")  # fmt: skip
    finally:
        await env.shutdown()
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fairness", help="B's chat latency while A floods or a rollout runs (priority, fair shares)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--seconds", type=float, default=15.0, help="length of each phase")
    p.add_argument("--b", type=int, default=2, help="user B's concurrent sessions (A has ten times as many)")
    p.add_argument("--slots", type=int, default=4, help="policy pool slots (calls at once)")
    p.add_argument("--gen-ms", type=float, default=200.0, help="how long a generate or agent step holds a slot")
    p.add_argument("--rollout-tasks", type=int, default=20, help="tasks of the rollout (4 episodes each)")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated: today, off, on")


def bench_command(args: argparse.Namespace, settings=None) -> int:
    return asyncio.run(main(args))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="bench-fairness")
    add_parser(parser.add_subparsers(dest="bench_command", required=True))
    raise SystemExit(bench_command(parser.parse_args(["fairness"] + __import__("sys").argv[1:])))
