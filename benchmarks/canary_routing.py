"""What canary routing adds to a chat turn (eval.canary): the generate activity's own choice of arm, timed.

Runs `GenerateActivities._canary_arm` (the user's candidate looked up in the store, the turn's arm dealt by a store
script, the turn's opt-out checked) and the log of the turn once answered, as generate does, against a real valkey,
for `--turns` turns of one user: with no candidate pending (one store read) and with one pending (two reads and two
scripts). Prints p50 and
p99 per turn in milliseconds; the target is <= 2 ms p50 (issue 44). The rest of a turn is unchanged by canaries.

    .venv/bin/python benchmarks/canary_routing.py [--turns 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


async def timed(gen, tenant: str, turns: int, tag: str) -> list[float]:
    """Per turn: the arm chosen (the candidate read, the opt-out checked), then the turn logged, as generate does."""
    from contracts.chat import ChatSampling, GenerateInput

    out = []
    for i in range(turns):
        inp = GenerateInput(turn_id=f"{tag}-turn-{i}", sampling=ChatSampling(max_tokens=64), tenant=tenant)
        t = time.perf_counter()
        _, logged = await gen._canary_arm(inp, None)
        if logged is not None:
            await gen.store.canaries.log_turn(tenant, *logged)
        out.append((time.perf_counter() - t) * 1000)
    return out


def line(name: str, ms: list[float]) -> str:
    s = sorted(ms)
    return f"{name:<26} p50 {statistics.median(s):.3f} ms  p99 {s[int(0.99 * (len(s) - 1))]:.3f} ms  ({len(s)} turns)"


async def main_async(args: argparse.Namespace, port: int, folder: Path) -> None:
    from engine.tiny_qwen3 import ensure_tiny_model

    os.environ.update(
        OPENCLAW_RL_DATA_DIR=str(folder / "data"),
        OPENCLAW_RL_ENGINE__MODEL_PATH=str(ensure_tiny_model(folder / "tiny-qwen3")),  # the tokenizer turns render with
        OPENCLAW_RL_REDIS__URL=f"redis://127.0.0.1:{port}/0",
        OPENCLAW_RL_TRAINING__ADAPTERS="per_user",
        OPENCLAW_RL_TRAINING__LORA__ENABLED="true",
        OPENCLAW_RL_EVAL__CANARY__ENABLED="true",
        OPENCLAW_RL_LEARNING__JUDGE='{"type": "llm", "url": "http://judge.invalid:30000"}',
    )
    from activities.generate import GenerateActivities
    from openclaw_rl.settings import load_settings
    from store.adapters import AdapterRef

    gen = GenerateActivities(load_settings())
    tenant = "u-bench-canary"
    await timed(gen, tenant, 50, "warm")
    idle = await timed(gen, tenant, args.turns, "idle")
    await gen.store.canaries.propose(tenant, AdapterRef(name=f"{tenant}-v1", path="/adapters/v1", version=1))
    pending = await timed(gen, tenant, args.turns, "pending")
    await gen.store.aclose()
    await gen.policy.aclose()
    print(line("no candidate pending", idle))
    print(line("a candidate pending", pending))
    p50 = statistics.median(pending)
    print(f"canary routing: +{p50:.3f} ms p50 per turn with a candidate pending (target <= 2 ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    from tests.helpers import running_valkey

    with tempfile.TemporaryDirectory() as tmp, running_valkey(Path(tmp)) as port:
        asyncio.run(main_async(args, port, Path(tmp)))


if __name__ == "__main__":
    main()
