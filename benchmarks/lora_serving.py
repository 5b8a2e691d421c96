"""Many LoRA adapters on one base model in the engine (engine.lora_adapters), in-process (no HTTP, no scheduler).

(a) --adapters adapters (default 100, rank --rank on every projection, PEFT's file layout) loaded into one
    registry: bytes per adapter (its A and B tensors) and the process's memory growth (RSS on a CPU, allocated
    device memory on CUDA).
(b) A DecodeBatch of --rows rows (40-token prompts, greedy, log-probs on) decoding --tokens tokens each, for:
    every row its own adapter, every row the same adapter, and the base model; per LoRA kernel (group, gather).
    Throughput: rows x tokens / wall time of the decode steps (prefill excluded, reported apart), best of
    --repeats after a warm-up. All cases run eagerly (no CUDA graphs: rows with adapters always decode eagerly).

    .venv/bin/python benchmarks/lora_serving.py [--device cpu|cuda] [--shape qwen3-1.7b | --model PATH]
        [--adapters 100] [--rows 16] [--tokens 32] [--rank 16] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.qwen3_shapes import SHAPES, bench_model  # noqa: E402
from engine.decode import DecodeBatch  # noqa: E402
from engine.lora_adapters import KERNELS, PEFT_PREFIX, LoraRegistry, _linears, read_adapter  # noqa: E402
from engine.weights import LoadedModel, load_model  # noqa: E402
from engine.work import WorkItem  # noqa: E402
from policy_client.wire import SamplingParams  # noqa: E402

PROMPT = 40


def write_adapter(model: torch.nn.Module, folder: Path, rank: int, seed: int) -> None:
    """A random adapter in PEFT's layout (what peft's save_pretrained writes) on every projection of `model`."""
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, linear in _linears(model).items():
        tensors[f"{PEFT_PREFIX}{name}.lora_A.weight"] = torch.randn(rank, linear.in_features, generator=gen) * 0.02
        tensors[f"{PEFT_PREFIX}{name}.lora_B.weight"] = torch.randn(linear.out_features, rank, generator=gen) * 0.02
    folder.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()}, str(folder / "adapter_model.safetensors")
    )
    config = {"peft_type": "LORA", "r": rank, "lora_alpha": 2 * rank, "bias": "none", "target_modules": []}
    (folder / "adapter_config.json").write_text(json.dumps(config))


def memory_now(lm: LoadedModel) -> int:
    if lm.device.type == "cuda":
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated()
    return 0


def sync(lm: LoadedModel) -> None:
    if lm.device.type == "cuda":
        torch.cuda.synchronize()


def decode_rate(lm: LoadedModel, adapters: list, tokens: int, kernel: str, seed: int) -> tuple[float, float]:
    """(decode tokens/s, prefill seconds) of one batch with these per-row adapters."""
    gen = torch.Generator().manual_seed(seed)
    items = [
        WorkItem(
            input_ids=torch.randint(1000, 50000, (PROMPT,), generator=gen).tolist(),
            params=SamplingParams(max_new_tokens=tokens, temperature=0.0, ignore_eos=True),
            return_logprob=True,
            lora=a,
        )
        for a in adapters
    ]
    batch = DecodeBatch(lm, torch.Generator(device=lm.device).manual_seed(0), lora_kernel=kernel)
    sync(lm)
    t0 = time.perf_counter()
    batch.add(items)
    sync(lm)
    t1 = time.perf_counter()
    steps = 0
    while len(batch):
        batch.step()
        steps += 1
    sync(lm)
    t2 = time.perf_counter()
    return len(items) * tokens / (t2 - t1), t1 - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--shape", choices=sorted(SHAPES), default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--adapters", type=int, default=100)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--kernels", default=",".join(KERNELS))
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="lora-bench-"))
    model = bench_model(args.model, args.shape, work)
    lm = load_model(model, args.device, "auto", weight_version="0")
    print(
        f"model {model.name} on {lm.device} ({next(lm.model.parameters()).dtype}), torch threads "
        f"{torch.get_num_threads()}, rank {args.rank} on {len(_linears(lm.model))} projections"
    )

    # (a) adapters resident
    t0 = time.perf_counter()
    for i in range(args.adapters):
        write_adapter(lm.model, work / "adapters" / f"a{i}", args.rank, seed=i)
    written = time.perf_counter() - t0
    reg = LoraRegistry(max(128, args.adapters))
    before = memory_now(lm)
    t0 = time.perf_counter()
    for i in range(args.adapters):
        reg.add(read_adapter(work / "adapters" / f"a{i}", f"a{i}", i + 1, lm.model))
    loaded = time.perf_counter() - t0
    grown = memory_now(lm) - before
    per = reg.nbytes() / args.adapters
    growth = (
        f"device memory grew {grown / 2**20:,.1f} MiB"
        if lm.device.type == "cuda"
        else "process memory not measured on a CPU (the allocator reuses pages freed while writing them)"
    )
    print(
        f"(a) {args.adapters} adapters resident: {per:,.0f} bytes per adapter (A and B tensors), "
        f"{reg.nbytes() / 2**20:,.1f} MiB in all; {growth}; load {loaded / args.adapters * 1000:.1f} ms per adapter "
        f"(written in {written:.1f}s)"
    )

    # (b) decoding rows of different adapters, of one adapter, of the base
    held = reg.acquire([f"a{i}" for i in range(args.rows)])
    cases = {
        f"{args.rows} different adapters": held,
        f"{args.rows} rows of one adapter": [held[0]] * args.rows,
        f"{args.rows} rows of the base": [None] * args.rows,
    }
    rates: dict[tuple[str, str], float] = {}
    for kernel in args.kernels.split(","):
        decode_rate(lm, cases[f"{args.rows} different adapters"], 4, kernel, seed=99)  # warm-up
        for case, adapters in cases.items():
            if case.endswith("base") and kernel != args.kernels.split(",")[0]:
                continue  # no adapter: the kernel does not matter
            runs = [decode_rate(lm, adapters, args.tokens, kernel, seed=r) for r in range(args.repeats)]
            rates[kernel, case] = max(r for r, _ in runs)
            print(
                f"(b) {kernel:6s} {case:28s} {rates[kernel, case]:9.1f} tok/s decode "
                f"(runs: {', '.join(f'{r:.1f}' for r, _ in runs)}; prefill {min(p for _, p in runs) * 1000:.0f} ms)"
            )
    base = next(v for (k, c), v in rates.items() if c.endswith("base"))
    for kernel in args.kernels.split(","):
        diff, one = rates[kernel, f"{args.rows} different adapters"], rates[kernel, f"{args.rows} rows of one adapter"]
        print(
            f"    {kernel}: {args.rows} different / {args.rows} of one = {diff / one:.2f} (target >= 0.70); "
            f"different / base = {diff / base:.2f}; one / base = {one / base:.2f}"
        )
    reg.release(held)


if __name__ == "__main__":
    main()
