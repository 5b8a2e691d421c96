"""Store (Redis) commands per general-agent episode step, at an early step and a late one.

Runs one terminal episode's activities as the pools run them (`env_open`, then per step `agent_step`,
`env_step` and `step_vote`) outside Temporal (temporalio.testing.ActivityEnvironment), against a real valkey
server, the real sandbox and environment, and the scripted SGLang-wire policy (every step a `bash` call, so the
episode never ends by itself). Counts the commands valkey executed for each activity from `INFO commandstats`
(MULTI/EXEC and EVALSHA count as commands; what a Lua script runs inside is not counted), and prints them for the
steps asked for.

    .venv/bin/python benchmarks/episode_store_calls.py [--steps 30] [--report 1 30]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.testing import ActivityEnvironment  # noqa: E402

from activities.agent_step import AgentActivities  # noqa: E402
from activities.env_step import EnvActivities  # noqa: E402
from activities.step_learning import StepLearningActivities  # noqa: E402
from contracts.episodes import AgentStepInput, EnvOpenInput, EnvRef, EnvStepInput, StepVoteInput  # noqa: E402
from engine.tiny_qwen3 import ensure_tiny_model  # noqa: E402
from openclaw_rl.settings import Settings  # noqa: E402
from store.client import Store  # noqa: E402
from tests.helpers import running_valkey  # noqa: E402
from tests.scripted_policy import ScriptedPolicy, tool_call  # noqa: E402

TASK = "files-dedupe"
EPISODE = "episode/bench-store-calls"
CONNECTION_SETUP = ("info", "hello", "client|setinfo")
"""Not the activities' own: this benchmark's counter reads, and what a client sends once when it connects."""


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    out = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    for name in CONNECTION_SETUP:
        out.pop(name, None)
    return out


async def run(args: argparse.Namespace, data: Path, port: int, model: Path) -> dict[int, dict[str, dict[str, int]]]:
    with ScriptedPolicy(model, lambda prompt: tool_call("bash", command="ls")) as policy:
        settings = Settings(
            data_dir=data,
            redis={"url": f"redis://127.0.0.1:{port}/0"},
            policy={"server_urls": [policy.url], "tokenizer_path": str(model), "context_length": 1_000_000},
            learning={"judge": {"type": "heuristic"}},
        )
        counter = Store.from_settings(settings)
        commands = counter.server.command_calls
        env, agent, judge = (
            EnvActivities(settings, "bench-env"),
            AgentActivities(settings),
            StepLearningActivities(settings),
        )
        act = ActivityEnvironment()
        key = f"oc:ep:{EPISODE}:a1"
        await act.run(env.env_open, EnvOpenInput(attempt_key=key, setting="terminal", task_id=TASK))
        seen: dict[int, dict[str, dict[str, int]]] = {}
        try:
            for t in range(args.steps):
                per: dict[str, dict[str, int]] = {}
                before = await commands()
                await act.run(
                    agent.agent_step,
                    AgentStepInput(
                        attempt_key=key, step=t, step_id=f"{EPISODE}:a1:s{t}", temperature=1.0, max_tokens=64
                    ),
                )
                per["agent_step"], before = delta(before, await commands()), await commands()
                await act.run(env.env_step, EnvStepInput(attempt_key=key, step=t))
                per["env_step"], before = delta(before, await commands()), await commands()
                await act.run(judge.step_vote, StepVoteInput(attempt_key=key, setting="terminal", step=t, vote=0))
                per["step_vote"] = delta(before, await commands())
                if t + 1 in args.report:
                    seen[t + 1] = per
        finally:
            await act.run(env.env_close, EnvRef(attempt_key=key))
            await env.aclose()
            await agent.aclose()
            await judge.aclose()
            await counter.aclose()
        return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--report", type=int, nargs="+", default=[1, 30], help="steps to print (1-based)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="store-calls-") as tmp:
        data = Path(tmp)
        model = ensure_tiny_model(data / "models" / "tiny-qwen3")
        with running_valkey(data) as port:
            seen = asyncio.run(run(args, data, port, model))
    print(f"store commands per step of a {TASK} terminal episode (valkey INFO commandstats)")
    for step, per in sorted(seen.items()):
        for name, cmds in per.items():
            detail = ", ".join(f"{k} {v}" for k, v in sorted(cmds.items()))
            print(f"  step {step:>3}  {name:<11} {sum(cmds.values()):>4} commands  ({detail})")


if __name__ == "__main__":
    main()
