"""What a failover of the store costs: the master SIGKILLed under a sustained load of sample publications, with
`redis.min_replicas_acked` 0 (no WAIT: replication asynchronous) and 1 (WAIT for one replica).

A replicated store on this machine (stack.store_replication: master, one replica, three sentinels, loopback) and one
`Store` reached through its Sentinel URL; --publishers tasks publish samples (publish_once, retried on the store being
unavailable as the activity is) for --before-s seconds, then the master is killed; the publishers go on through the
failover; the old master comes back (the sentinels make it a replica) and the run ends once --after publications
have been acknowledged after the promotion. On one machine the replica is never behind (loopback): each --lag-ms
other than 0 stalls the replicas (SIGSTOP) that long before the kill, as a replica behind by that much (a slow link or
disk) when the master's host is lost. Reported per lag and setting:
  - failover s: from the kill until the sentinels name a replica the master;
  - resumed s: from the kill until the first publication acknowledged after it (with WAIT it needs a replica of the
    new master: with --replicas 1, the old master back as one);
  - acknowledged: publications that returned; lost: of those, the ones the new master does not hold;
  - latency p50 / p99 of a publication before the kill (steady state, every publisher busy).

    .venv/bin/python benchmarks/store_failover.py [--publishers 32] [--before-s 5] [--lag-ms 0,500] [--replicas 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contracts.learning import JudgeSummary  # noqa: E402
from stack.store_replication import ReplicatedStore  # noqa: E402
from store import keys  # noqa: E402
from store.client import Store, StoreAddress  # noqa: E402
from store.errors import StoreUnavailable  # noqa: E402
from store.samples import PersonalTurn, ReplicaAcks, TrainingSample  # noqa: E402

PASSWORD = "bench-password"


@dataclass
class Result:
    replica_lag_ms: int
    min_replicas_acked: int
    failover_s: float
    resumed_s: float
    acknowledged: int
    acknowledged_before_kill: int
    lost: int
    doubled: int
    p50_ms: float
    p99_ms: float


def make_sample(sample_id: str, prompt_tokens: int, response_tokens: int) -> TrainingSample:
    return TrainingSample(
        sample_id=sample_id,
        source="personal",
        policy_version="1",
        temperature=1.0,
        reward=1.0,
        loss_mask=1,
        prompt_ids=list(range(prompt_tokens)),
        response_ids=list(range(response_tokens)),
        rollout_logprobs=[-0.5] * response_tokens,
        advantages=[1.0] * response_tokens,
        provenance=PersonalTurn(
            method="binary",
            user_id="u",
            session_id="s",
            turn_id=sample_id,
            turn_index=0,
            use_teacher=False,
            reason="bench",
            judge=JudgeSummary(judge="bench"),
        ),
    )


async def scenario(root: Path, acks: int, lag_ms: int, args: argparse.Namespace) -> Result:
    with ReplicatedStore(root, password=PASSWORD, replicas=args.replicas) as rs:
        replicas = [n.name for n in rs.nodes.values() if n.kind == "replica"]
        old_master = rs.nodes["master"].port
        address = StoreAddress(rs.url, 3600, ReplicaAcks(replicas=acks, timeout_ms=args.ack_timeout_ms))
        acknowledged: list[str] = []
        latencies: list[float] = []
        state: dict[str, float | None] = {"killed": None, "promoted": None, "resumed": None}
        after_promotion = 0
        stop = asyncio.Event()

        async def publisher(store: Store, w: int) -> None:
            nonlocal after_promotion
            n = 0
            while not stop.is_set():
                sample_id = f"w{w}-{n}"
                sample = make_sample(sample_id, args.prompt_tokens, args.response_tokens)
                started, first_try = time.perf_counter(), True
                while True:
                    try:
                        await store.samples.publish_once(sample_id, "personal", sample)
                        break
                    except StoreUnavailable:
                        first_try = False
                        await asyncio.sleep(0.05)
                done = time.perf_counter()
                acknowledged.append(sample_id)
                if state["killed"] is None and first_try:
                    latencies.append(done - started)
                if state["killed"] is not None and state["resumed"] is None and started > state["killed"]:
                    state["resumed"] = time.monotonic()
                if state["promoted"] is not None:
                    after_promotion += 1
                n += 1

        async with Store.connect(address) as store:
            tasks = [asyncio.create_task(publisher(store, w)) for w in range(args.publishers)]
            await asyncio.sleep(args.before_s)
            if lag_ms:
                for name in replicas:
                    rs.pause(name)
                await asyncio.sleep(lag_ms / 1000)
            before = len(acknowledged)
            rs.kill("master")
            state["killed"] = time.monotonic()
            if lag_ms:
                for name in replicas:
                    rs.resume(name)
            while (new_port := await asyncio.to_thread(rs.master_port)) in (old_master, None):
                await asyncio.sleep(0.05)
            state["promoted"] = time.monotonic()
            await asyncio.to_thread(rs.restart, "master")
            while after_promotion < args.after:
                await asyncio.sleep(0.1)
            stop.set()
            await asyncio.gather(*tasks)

        new_master = rs.node_client(rs.node_at(new_port).name)
        try:
            held = Counter(f[b"id"].decode() for _, f in new_master.xrange(keys.sample_stream("personal")))
        finally:
            new_master.close()
    latencies.sort()
    return Result(
        replica_lag_ms=lag_ms,
        min_replicas_acked=acks,
        failover_s=round(state["promoted"] - state["killed"], 2),
        resumed_s=round(state["resumed"] - state["killed"], 2),
        acknowledged=len(acknowledged),
        acknowledged_before_kill=before,
        lost=sum(1 for s in acknowledged if held[s] == 0),
        doubled=sum(1 for c in held.values() if c > 1),
        p50_ms=round(statistics.median(latencies) * 1000, 2),
        p99_ms=round(latencies[int(0.99 * (len(latencies) - 1))] * 1000, 2),
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--publishers", type=int, default=32, help="concurrent publishing tasks")
    parser.add_argument("--before-s", type=float, default=5.0, help="steady load before the kill")
    parser.add_argument("--after", type=int, default=500, help="publications acknowledged after the promotion")
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    parser.add_argument("--response-tokens", type=int, default=256)
    parser.add_argument("--ack-timeout-ms", type=int, default=1000)
    parser.add_argument("--lag-ms", default="0,500", help="comma-separated replica lags at the kill (0: none)")
    parser.add_argument("--replicas", type=int, default=1, help="replicas of the master")
    parser.add_argument("--rounds", type=int, default=1, help="kills per lag and setting")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="store-failover-") as tmp:
        for r in range(args.rounds):
            for lag_ms in (int(v) for v in args.lag_ms.split(",")):
                for acks in (0, 1):
                    result = await scenario(Path(tmp) / f"round-{r}-lag-{lag_ms}-acks-{acks}", acks, lag_ms, args)
                    results.append(result)
                    print(json.dumps(asdict(result)), flush=True)
    print()
    print(f"{args.replicas} replica(s), {args.publishers} publishers")
    print("replica lag ms  min_replicas_acked  failover s  resumed s  acknowledged  lost  doubled  p50 ms  p99 ms")
    for x in results:
        print(
            f"{x.replica_lag_ms:>14}  {x.min_replicas_acked:>18}  {x.failover_s:>10}  {x.resumed_s:>9}  "
            f"{x.acknowledged:>12}  {x.lost:>4}  {x.doubled:>7}  {x.p50_ms:>6}  {x.p99_ms:>6}"
        )


if __name__ == "__main__":
    asyncio.run(main())
