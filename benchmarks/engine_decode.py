"""The engine's decode loop in-process, against the bare Hugging Face forward it drives.

No HTTP and no scheduler thread: a DecodeBatch of N rows (40-token prompts, sampled at temperature 1, log-probs
on) decodes --tokens tokens; then the bare model takes the same number of decode steps with its own cache. Where
the two per-step times are close, the engine adds little and the model's own step is the limit (on a GPU: the
eager model's kernel launches, whatever the batch size). Each case runs --repeats times after a warm-up; every
run is printed (timings on a shared machine move between runs).

    .venv/bin/python benchmarks/engine_decode.py [--shape qwen3-1.7b | --model PATH] [--batches 1,16,64]
        [--plain-linears]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.qwen3_shapes import SHAPES, bench_model  # noqa: E402
from engine.model_runner import DecodeBatch, LoadedModel, WorkItem, load_model  # noqa: E402
from policy_client.wire import SamplingParams  # noqa: E402


def sync(lm: LoadedModel) -> None:
    if lm.device.type == "cuda":
        torch.cuda.synchronize()


def engine_step_ms(lm: LoadedModel, rows: int, tokens: int) -> float:
    params = SamplingParams(max_new_tokens=tokens, temperature=1.0, ignore_eos=True)
    prompts = [list(range(1000 + i, 1040 + i)) for i in range(rows)]
    items = [WorkItem(input_ids=ids, params=params, return_logprob=True) for ids in prompts]
    batch = DecodeBatch(lm, torch.Generator(device=lm.device).manual_seed(0))
    sync(lm)
    started, steps = time.perf_counter(), 0
    batch.add(items)
    while len(batch):
        batch.step()
        steps += 1
    sync(lm)
    return (time.perf_counter() - started) / steps * 1000


def bare_step_ms(lm: LoadedModel, rows: int, steps: int) -> float:
    ids = torch.randint(0, 1000, (rows, 40), device=lm.device)
    with torch.no_grad():
        out = lm.model(input_ids=ids, use_cache=True)
        cache, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        sync(lm)
        started = time.perf_counter()
        for _ in range(steps):
            out = lm.model(input_ids=nxt, past_key_values=cache, use_cache=True)
            nxt = out.logits[:, -1:].argmax(-1)
        sync(lm)
    return (time.perf_counter() - started) / steps * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--shape", choices=sorted(SHAPES), default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--plain-linears",
        action="store_true",
        help="on a CPU, PyTorch's default linear kernels (engine.cpu_packed_linears off)",
    )
    args = ap.parse_args()
    model = bench_model(args.model, args.shape, Path(tempfile.mkdtemp(prefix="engine-decode-")))
    lm = load_model(model, args.device, "auto", weight_version="0", cpu_packed_linears=not args.plain_linears)
    batches = [int(b) for b in args.batches.split(",")]
    print(f"model {model.name} on {lm.device} ({next(lm.model.parameters()).dtype}), {args.tokens} tokens per row")
    engine_step_ms(lm, max(batches), 8)  # warm-up: CUDA context, kernels, allocator
    bare_step_ms(lm, max(batches), 4)
    print(f"{'rows':>5} {'engine ms/step':>16} {'tokens/s':>10} {'bare forward ms/step':>22}")
    for rows in batches:
        for _ in range(args.repeats):
            engine = engine_step_ms(lm, rows, args.tokens)
            bare = bare_step_ms(lm, rows, args.tokens // 2)
            print(f"{rows:>5} {engine:>16.1f} {rows * 1000 / engine:>10.0f} {bare:>22.1f}")


if __name__ == "__main__":
    main()
