"""General-agent rollout throughput: env steps/s and episodes/s with 1, 2 and 4 env worker processes, and the
orchestration overhead per step against a plain in-process loop over the same environment and policy.

The policy is the scripted SGLang-wire server (tests/scripted_policy.py) answering after --policy-ms, as a remote
GPU would; every env step runs `sleep --env-wait-s` in the real bubblewrap sandbox, as a remote sandbox would. So
neither the 2 cores nor a model is the limit: what is measured is the system's own cost, and how adding env
workers (each holding --envs-per-worker environments) adds throughput.

Overhead per step: in the workflow, the time from one `agent_step` being scheduled to the next (read from the
episodes' histories); in the plain loop, from one policy call to the next, with the same rendering, policy
server, sandbox and environment. Both run one episode at a time.

    .venv/bin/python benchmarks/rollout_throughput.py [--episodes 16] [--steps 8] [--envs-per-worker 2] \
[--env-wait-s 1.0] [--policy-ms 50] [--workers 1 2 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.client import Client  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402

from activities.agent_step import parse_action  # noqa: E402
from contracts.episodes import EpisodeConfig, EpisodeInput, EpisodeResult  # noqa: E402
from engine.tiny_qwen3 import ensure_tiny_model  # noqa: E402
from envs.sandbox import SandboxPool  # noqa: E402
from envs.terminal.source import TerminalTasks  # noqa: E402
from openclaw_rl.settings import SandboxLimits  # noqa: E402
from policy_client import PolicyClient  # noqa: E402
from policy_client.chat import renderer_for  # noqa: E402
from policy_client.wire import SamplingParams  # noqa: E402
from tests.helpers import CLI, REPO, RunningStack, stack_env  # noqa: E402
from tests.scripted_policy import ScriptedPolicy, tool_call  # noqa: E402

TASK = "bench-wait"


def write_task(root: Path) -> Path:
    """A terminal task whose every step waits: the agent runs a slow command, then submits."""
    task = root / TASK
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text("Benchmark task: run the waiting command each step, then submit.\n")
    (task / "task.toml").write_text('[metadata]\ntitle = "benchmark: waiting steps"\ncategory = "benchmark"\n')
    (task / "tests" / "test_outputs.py").write_text("def test_ran():\n    assert True\n")
    return root


def answer_for(steps: int, wait_s: float):
    def answer(prompt: str) -> str:
        done = prompt.count("<|im_start|>assistant") - 1
        return (
            tool_call("bash", command=f"sleep {wait_s}; echo step {done}") if done < steps - 1 else tool_call("submit")
        )

    return answer


def config(args: argparse.Namespace) -> EpisodeConfig:
    return EpisodeConfig(max_steps=args.steps + 2, prm_votes=1, temperature=1.0, max_tokens=64)


async def run_episodes(client: Client, args: argparse.Namespace, n: int, at_once: bool) -> tuple[float, list[str]]:
    ids = [f"episode/bench-{uuid.uuid4().hex[:8]}" for _ in range(n)]

    async def one(wf_id: str) -> EpisodeResult:
        return await client.execute_workflow(
            "EpisodeWorkflow",
            EpisodeInput(setting="terminal", task_id=TASK, config=config(args)),
            id=wf_id,
            task_queue="openclaw-rl-workflow",
            result_type=EpisodeResult,
        )

    started = time.perf_counter()
    if at_once:
        results = await asyncio.gather(*(one(i) for i in ids))
    else:
        results = [await one(i) for i in ids]
    took = time.perf_counter() - started
    assert all(len(r.steps) == args.steps for r in results), [len(r.steps) for r in results]
    return took, ids


async def workflow_step_cycles(client: Client, ids: list[str]) -> list[float]:
    cycles = []
    for wf_id in ids:
        history = await client.get_workflow_handle(wf_id).fetch_history()
        times = [
            e.event_time.ToDatetime().timestamp()
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
            and e.activity_task_scheduled_event_attributes.activity_type.name == "agent_step"
        ]
        cycles += [b - a for a, b in zip(times, times[1:])]
    return cycles


async def plain_loop_cycles(args: argparse.Namespace, policy_url: str, model: Path, tasks: Path, n: int) -> list[float]:
    """The same episode without Temporal: render, call the policy server, step the environment, in one process."""
    renderer = renderer_for(str(model))
    pool = SandboxPool(Path(f"/tmp/oc-bench-loop-{uuid.uuid4().hex[:6]}"), SandboxLimits())
    source = TerminalTasks([tasks], max_steps=args.steps + 2)
    cycles = []
    async with PolicyClient([policy_url]) as policy:
        for _ in range(n):
            env = source.make(TASK, pool)
            messages = await asyncio.to_thread(env.reset)
            tools = env.tools()
            last = None
            for t in range(args.steps):
                now = time.perf_counter()
                if last is not None:
                    cycles.append(now - last)
                last = now
                ids = renderer.render(messages, tools)
                gen = await policy.generate(ids, SamplingParams(temperature=1.0, max_new_tokens=64))
                action, message = parse_action(renderer.decode(gen.output_ids), f"s{t}")
                obs = await asyncio.to_thread(env.step, action)
                messages.append(message)
                messages += [
                    {"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in obs.tool_results
                ]
                if obs.done:
                    break
            await asyncio.to_thread(env.outcome)
            await asyncio.to_thread(env.close)
    return cycles


def extra_env_workers(stack: RunningStack, n: int) -> list[subprocess.Popen]:
    procs = [
        subprocess.Popen(
            CLI + ["worker", "--pool", "env"],
            env=stack.env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]
    time.sleep(4.0)  # polling
    return procs


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--envs-per-worker", type=int, default=2)
    ap.add_argument("--env-wait-s", type=float, default=1.0)
    ap.add_argument("--policy-ms", type=float, default=50.0)
    ap.add_argument("--overhead-episodes", type=int, default=6)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="oc-rollout-bench-"))
    model = ensure_tiny_model(work / "tiny-qwen3")
    tasks = write_task(work / "tasks")
    with ScriptedPolicy(model, answer_for(args.steps, args.env_wait_s), delay_s=args.policy_ms / 1000) as policy:
        env = stack_env(work / "data", model_path=model)
        env.update(
            OPENCLAW_RL_POLICY__SERVER_URLS=json.dumps([policy.url]),
            OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',
            OPENCLAW_RL_TRAINING__AUTO_START="false",
            OPENCLAW_RL_ENVS__SANDBOX__ROOT=f"/tmp/oc-bench-{uuid.uuid4().hex[:6]}",
            OPENCLAW_RL_ENVS__TERMINAL__TASK_DIRS=json.dumps([str(tasks)]),
            OPENCLAW_RL_ENVS__ENVS_PER_WORKER=str(args.envs_per_worker),
        )
        stack = RunningStack(env).start()
        extra: list[subprocess.Popen] = []
        try:
            client = await Client.connect(stack.temporal, data_converter=pydantic_data_converter)
            await run_episodes(client, args, 2, at_once=False)  # warm-up
            _, seq_ids = await run_episodes(client, args, args.overhead_episodes, at_once=False)
            wf_cycles = await workflow_step_cycles(client, seq_ids)
            loop_cycles = await plain_loop_cycles(args, policy.url, model, tasks, args.overhead_episodes)
            rows = []
            for w in sorted(args.workers):
                extra += extra_env_workers(stack, w - 1 - len(extra))
                took, _ = await run_episodes(client, args, args.episodes, at_once=True)
                rows.append((w, args.episodes * args.steps / took, args.episodes / took, took))
        finally:
            for p in extra:
                p.terminate()
            for p in extra:
                p.wait(timeout=30)
            stack.stop()

    print(
        f"rollout throughput: {args.episodes} episodes x {args.steps} steps, env step waits {args.env_wait_s}s, "
        f"policy answers in {args.policy_ms:.0f}ms, {args.envs_per_worker} environments per env worker, "
        f"1 PRM vote per step (heuristic), cpu cores: {os.cpu_count()}"
    )
    base = rows[0][1]
    print(f"{'env workers':>11} {'steps/s':>9} {'episodes/s':>11} {'wall s':>8} {'speed-up':>9}")
    for w, sps, eps, took in rows:
        print(f"{w:>11} {sps:>9.2f} {eps:>11.3f} {took:>8.1f} {sps / base:>8.2f}x")
    wf, lp = statistics.median(wf_cycles), statistics.median(loop_cycles)
    print(
        f"per-step cycle, one episode at a time: workflow p50 {wf * 1000:.1f} ms (p90 "
        f"{statistics.quantiles(wf_cycles, n=10)[-1] * 1000:.1f}), plain loop p50 {lp * 1000:.1f} ms (p90 "
        f"{statistics.quantiles(loop_cycles, n=10)[-1] * 1000:.1f}); "
        f"orchestration overhead p50 {(wf - lp) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
