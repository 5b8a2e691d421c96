"""Weight sync: how long a new policy version takes to reach a serving engine, without disk and from disk.

Starts a real engine (--shape: a random model of a Qwen3 size, else the tiny one; on CUDA when there is one), holds
the same weights as a trainer does (fp32, on --trainer-device), then per version:
  - distributed (training.weight_sync.mode=distributed): WeightBroadcaster sets up the group once, pauses
    generation in place, broadcasts the tensors in buckets, continues, checks the version served; --inflight
    requests are generating during each update and must all finish (none aborted);
  - disk: the same weights saved as safetensors (timed: what a disk publication writes), then
    /update_weights_from_disk (timed with the requests in flight; the file is fresh in the page cache).
Prints seconds per version and the rate in GB/s of the bytes sent (tied weights once).

    .venv/bin/python benchmarks/weight_sync.py [--shape qwen3-1.7b] [--backend auto|gloo|nccl] [--versions 3]
        [--megatron-job TP]

--megatron-job TP: the distributed path sends from a megatron torchrun job of TP ranks, as the trainer pool does with
training.backend=megatron (the job's rank 0 gathers the model and broadcasts it; nothing passes through this process).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.qwen3_shapes import SHAPES, bench_model, start_engine  # noqa: E402
from openclaw_rl.device import pick_device  # noqa: E402
from openclaw_rl.settings import WeightSyncSettings  # noqa: E402
from policy_client.weight_sync import WeightSyncClient  # noqa: E402
from trainers.weight_sync import WeightBroadcaster, distinct  # noqa: E402

DISK_ROWS = ("disk write", "disk load", "disk total")


async def generate(http: httpx.AsyncClient, i: int, tokens: int) -> dict:
    body = {"text": f"in flight {i}", "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}}
    r = await http.post("/generate", json=body)
    r.raise_for_status()
    return r.json()


async def running(http: httpx.AsyncClient) -> int:
    info = (await http.get("/get_server_info")).json()
    return sum(t["running"] for t in info["tenants"])


async def with_requests_in_flight(http: httpx.AsyncClient, n: int, tokens: int, update) -> tuple[float, list[dict]]:
    """Run `update()` while `n` requests generate; its duration and their answers."""
    flying = [asyncio.create_task(generate(http, i, tokens)) for i in range(n)]
    deadline = time.monotonic() + 120
    while n and await running(http) < n:
        if time.monotonic() > deadline:
            raise RuntimeError("the in-flight requests never started")
        await asyncio.sleep(0.01)
    started = time.perf_counter()
    await update()
    took = time.perf_counter() - started
    return took, await asyncio.gather(*flying)


async def bench(url: str, model: Path, work: Path, args: argparse.Namespace) -> None:
    from transformers import AutoModelForCausalLM

    device = pick_device(args.trainer_device)
    trainer_model = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).to(device)
    state = {k: v.detach() for k, v in trainer_model.state_dict().items()}
    sent_bytes = sum(t.numel() * t.element_size() for _, t in distinct(state))
    cfg = WeightSyncSettings(
        mode="distributed",
        backend=args.backend,
        bucket_mb=args.bucket_mb,
        timeout_s=300,
        wire_dtype=args.wire_dtype,
    )
    # a trainer on CUDA trains in bf16 (training.precision auto): what auto's wire dtype follows
    client = WeightSyncClient([url], timeout_s=600)
    job = None
    if args.megatron_job:  # the weights live in a torchrun job's ranks; its rank 0 gathers and sends them
        from openclaw_rl.settings import MegatronSettings
        from trainers.megatron_job_client import MegatronJobTrainer
        from trainers.trainer_config import TrainerConfig

        layout = MegatronSettings(tensor_parallel=args.megatron_job, nproc_per_node=args.megatron_job)
        job = MegatronJobTrainer.for_layout(layout)(model, TrainerConfig(device=args.trainer_device))
        rank0 = job.weight_rank_zero()
        sender = WeightBroadcaster(cfg, client, rank0.device, bf16_on_cuda=job.bf16_on_cuda, rank0=rank0)
        device = rank0.device
    else:
        sender = WeightBroadcaster(cfg, client, device, bf16_on_cuda=device.type == "cuda")
    sent = None if job is not None else state
    wire = sender.wire_dtype or torch.float32
    # the disk copy is the trainer's fp32 weights
    path_bytes = {"distributed": sent_bytes * wire.itemsize // 4} | dict.fromkeys(DISK_ROWS, sent_bytes)
    async with httpx.AsyncClient(base_url=url, timeout=600) as http:
        info = (await http.get("/get_server_info")).json()
        print(
            f"engine on {info['device']} ({info.get('dtype', '?')}); trainer weights on {device} (fp32"
            f"{f', a tensor-parallel {args.megatron_job} megatron job: its rank 0 sends' if job else ''}), sent as "
            f"{str(wire).removeprefix('torch.')}; backend {sender.backend}; "
            f"{path_bytes['distributed'] / 1e9:.2f} GB per version (disk: {sent_bytes / 1e9:.2f} GB), "
            f"buckets of {args.bucket_mb:.0f} MiB"
        )
        t = time.perf_counter()
        await sender.ensure_group()
        print(f"group set up once: {time.perf_counter() - t:.2f} s")
        rows: dict[str, list[float]] = {"distributed": []} | {row: [] for row in DISK_ROWS}
        answers: list[dict] = []
        for v in range(args.versions):
            took, done = await with_requests_in_flight(
                http, args.inflight, args.tokens, lambda v=v: sender.publish(sent, f"d{v}")
            )
            rows["distributed"].append(took)
            answers += done
        await sender.close()
        if job is not None:
            job.close()
        for v in range(args.versions):  # what a disk publication does: write the version, then each server loads it
            folder = work / "checkpoints" / f"disk-version-{v}"  # under the data dir: where the engine loads from
            t = time.perf_counter()
            await asyncio.to_thread(trainer_model.save_pretrained, folder, safe_serialization=True)
            rows["disk write"].append(time.perf_counter() - t)

            async def from_disk(folder=folder, v=v) -> None:
                r = await http.post(
                    "/update_weights_from_disk", json={"model_path": str(folder), "weight_version": f"k{v}"}
                )
                r.raise_for_status()

            took, done = await with_requests_in_flight(http, args.inflight, args.tokens, from_disk)
            rows["disk load"].append(took)
            rows["disk total"].append(rows["disk write"][-1] + took)
            answers += done
        served = (await http.get("/get_weight_version")).json()["weight_version"]
    finished = sum(a["meta_info"]["finish_reason"]["type"] == "length" for a in answers)
    print(f"{'path':>12} {'s / version (median)':>22} {'GB/s':>6}   runs")
    for path, times in rows.items():
        med = statistics.median(times)
        rate = path_bytes[path] / med / 1e9
        print(f"{path:>12} {med:>22.2f} {rate:>6.2f}   {', '.join(f'{x:.2f}' for x in times)}")
    print(
        f"in-flight requests: {finished} of {len(answers)} finished whole (none aborted); "
        f"serving {served} after the last update"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--shape", choices=sorted(SHAPES), default=None)
    ap.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    ap.add_argument("--trainer-device", default="auto")
    ap.add_argument("--bucket-mb", type=float, default=256.0)
    ap.add_argument("--wire-dtype", choices=["auto", "float32", "bfloat16"], default="auto")
    ap.add_argument("--versions", type=int, default=3)
    ap.add_argument("--inflight", type=int, default=8, help="requests generating during each update")
    ap.add_argument("--tokens", type=int, default=256, help="tokens each in-flight request generates")
    ap.add_argument(
        "--megatron-job",
        type=int,
        default=0,
        metavar="TP",
        help="send from a megatron torchrun job of TP tensor-parallel ranks (its rank 0 is the group's rank 0)",
    )
    ap.add_argument("--engine-log", type=Path, default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="weight-sync-bench-"))
    model = bench_model(args.model, args.shape, work)
    proc, url = start_engine(model, work, args.engine_log, timeout_s=600)
    try:
        asyncio.run(bench(url, model, work, args))
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
