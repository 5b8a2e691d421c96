"""The trainer against a plain PyTorch loop: tokens/s of a trainer backend's train_step and of the loop a user
would write, on the same batch, in the same run.

Both take the same batch (--samples samples of --prompt + --response random tokens, --vary spreading their lengths,
on the tiny Qwen3 model, --shape a random model of a Qwen3 size, or --model PATH), run one forward/backward over it,
the same clipped-surrogate loss and an AdamW step with gradient clipping. The plain loop pads the batch to its
longest sample, projects under autocast and steps PyTorch's default AdamW; the trainer packs the samples without
padding, computes log-probs from fp32 logits a chunk at a time and steps a fused AdamW.

    .venv/bin/python benchmarks/train_step.py [--backend torch|megatron] [--samples 16] [--prompt 256] \
[--response 64] [--vary 0.5] [--rounds 5] [--checkpointing] [--no-pack]

On a GPU (--device cuda, --shape qwen3-1.7b: a random model of that size) it also prints model TFLOP/s, MFU
against --peak-tflops and the peak GPU memory; the trainers' precision there is bf16 mixed precision (auto).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.qwen3_shapes import SHAPES, bench_model, head_dim, parameter_count  # noqa: E402
from contracts.learning import JudgeSummary  # noqa: E402
from rlmath.logprobs import token_logprobs  # noqa: E402
from store.samples import PersonalTurn, TrainingSample  # noqa: E402
from trainers import backend_class  # noqa: E402
from trainers.trainer_config import TrainerConfig  # noqa: E402


def lengths(n: int, prompt: int, response: int, vary: float) -> list[tuple[int, int]]:
    """(prompt, response) per sample: all the same, or with `vary` > 0 spread evenly over [1 - vary, 1 + vary]
    times each (real batches: short and long answers together), the same total on average."""
    if vary <= 0 or n == 1:
        return [(prompt, response)] * n
    scale = [1 - vary + 2 * vary * i / (n - 1) for i in range(n)]
    return [(max(1, round(prompt * a)), max(1, round(response * b))) for a, b in zip(scale, reversed(scale))]


def sample(
    i: int, prompt: list[int], response: list[int], rollout_logprobs: list[float], advantages: list[float], **core
) -> TrainingSample:
    """A personal-turn training sample of these tokens (`core`: other SampleCore fields, e.g. policy_version)."""
    return TrainingSample(
        sample_id=f"b#{i}",
        source="bench",
        policy_version=str(core.pop("policy_version", "0")),
        temperature=core.pop("temperature", 1.0),
        reward=core.pop("reward", 1.0),
        loss_mask=1,
        prompt_ids=prompt,
        response_ids=response,
        rollout_logprobs=rollout_logprobs,
        advantages=advantages,
        provenance=PersonalTurn(
            method="binary",
            user_id="u",
            session_id="s",
            turn_id=str(i),
            turn_index=i,
            use_teacher=False,
            reason="bench",
            judge=JudgeSummary(judge="none"),
        ),
        **core,
    )


def batch(n: int, prompt: int, response: int, vocab: int, vary: float = 0.0) -> list[TrainingSample]:
    g = torch.Generator().manual_seed(0)
    out = []
    for i, (prompt, response) in enumerate(lengths(n, prompt, response, vary)):
        ids = torch.randint(0, vocab, (prompt + response,), generator=g).tolist()
        adv = 1.0 if i % 2 else -1.0
        out.append(sample(i, ids[:prompt], ids[prompt:], [-10.0] * response, [adv] * response))
    return out


def plain_step(model, opt, samples: list[TrainingSample], autocast) -> None:
    """The same work, written as directly as a user would: the batch right-padded to its longest sample, one
    forward, response positions projected (under autocast, as such a loop does), the loss inline."""
    dev = next(model.parameters()).device
    seqs = [s.prompt_ids + s.response_ids for s in samples]
    width = max(len(x) for x in seqs)
    ids = torch.tensor([x + [0] * (width - len(x)) for x in seqs], device=dev)
    attn = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in seqs], device=dev)
    rows = torch.tensor([i for i, s in enumerate(samples) for _ in s.response_ids], device=dev)
    cols = torch.tensor([len(s.prompt_ids) - 1 + j for s in samples for j in range(len(s.response_ids))], device=dev)
    padded = any(len(x) != width for x in seqs)
    with autocast:
        hidden = model.get_decoder()(input_ids=ids, attention_mask=attn if padded else None).last_hidden_state
        logits = model.get_output_embeddings()(hidden[rows, cols])
    lp = token_logprobs(logits.float(), ids[rows, cols + 1], 1.0)
    old = torch.tensor([x for s in samples for x in s.rollout_logprobs], device=dev)
    adv = torch.tensor([x for s in samples for x in s.advantages], device=dev)
    ratio = torch.exp(lp - old)
    per_token = torch.maximum(-ratio * adv, -ratio.clamp(0.8, 1.28) * adv)
    loss = torch.zeros(len(samples), device=dev).index_add(0, rows, per_token)
    loss = (loss / torch.tensor([len(s.response_ids) for s in samples], device=dev)).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def step_flops(config: dict, shapes: list[tuple[int, int]]) -> float:
    """Model FLOPs of one train step (forward + backward = 3x forward) over samples of (prompt, response) tokens:
    2 per weight per token through the layers, the output projection for the response positions only (as both
    loops do), causal attention within each sample. Padding is not counted: it is work, not model FLOPs."""
    h, layers = config["hidden_size"], config["num_hidden_layers"]
    attn_width = config["num_attention_heads"] * head_dim(config)
    per_layer = parameter_count(config | {"vocab_size": 0}) - h
    forward = sum(
        2 * per_layer * (p + r)
        + 2 * config["vocab_size"] * h * r
        + layers * 2 * attn_width * (p + r) * (p + r)  # QK^T and AV, half of the square (causal), 2 FLOPs each
        for p, r in shapes
    )
    return 3 * forward


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--shape", choices=sorted(SHAPES), default=None, help="a random model of a Qwen3 size")
    ap.add_argument("--backend", choices=["torch", "megatron"], default="torch")
    ap.add_argument("--device", default="auto", help="auto (CUDA when there is one), cpu, cuda")
    ap.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="the device's dense bf16 peak, for MFU (H100)")
    ap.add_argument("--no-plain", action="store_true", help="skip the plain loop (big models: memory for one)")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--response", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--vary",
        type=float,
        default=0.0,
        help="spread of sample lengths: 0.5 gives 0.5x to 1.5x of --prompt/--response",
    )
    ap.add_argument("--checkpointing", action="store_true", help="the trainer with activation checkpointing")
    ap.add_argument("--no-pack", action="store_true", help="the trainer without packing (rows padded)")
    ap.add_argument(
        "--compile",
        choices=["auto", "on", "off"],
        default="auto",
        help="the trainer's torch.compile'd layers (auto: the trainer's default, on CUDA only)",
    )
    ap.add_argument("--check", action="store_true", help="first compare packed and padded log-probs on this batch")
    ap.add_argument("--profile", type=int, default=0, help="then profile one trainer step: the N costliest ops")
    args = ap.parse_args()
    model_path = bench_model(args.model, args.shape, Path(tempfile.mkdtemp(prefix="train-bench-")))
    cfg = TrainerConfig(
        micro_batch_tokens=10**9,
        device=args.device,
        precision=args.precision,
        activation_checkpointing=args.checkpointing,
        pack_samples=not args.no_pack,
        compile={"auto": None, "on": True, "off": False}[args.compile],
    )
    trainer = backend_class(args.backend)(model_path, cfg)
    device = trainer.device
    config = json.loads((model_path / "config.json").read_text())
    samples = batch(args.samples, args.prompt, args.response, config["vocab_size"], args.vary)
    shapes = [(len(x.prompt_ids), len(x.response_ids)) for x in samples]
    tokens = sum(p + r for p, r in shapes)
    times: dict[str, list[float]] = {"trainer": []}
    if args.check:
        check_packing(trainer, model_path, cfg, samples)
    t = time.perf_counter()
    trainer.train_step(samples)  # warm-up (with --compile: the compilation)
    if getattr(trainer, "compiled", False):
        print(f"first step (compiling): {time.perf_counter() - t:.1f} s")
    plain = None
    if not args.no_plain:
        from transformers import AutoModelForCausalLM

        plain = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).to(device).train()
        opt = torch.optim.AdamW(plain.parameters(), lr=1e-5, weight_decay=0.1, betas=(0.9, 0.98))
        plain_step(plain, opt, samples, trainer.autocast())
        times["plain"] = []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for _ in range(args.rounds):  # interleaved, so drift in machine speed hits both alike
        synchronize(device)
        t = time.perf_counter()
        trainer.train_step(samples)
        synchronize(device)
        times["trainer"].append(time.perf_counter() - t)
        if plain is not None:
            t = time.perf_counter()
            plain_step(plain, opt, samples, trainer.autocast())
            synchronize(device)
            times["plain"].append(time.perf_counter() - t)
    tr = statistics.median(times["trainer"])
    precision = args.precision if args.precision != "auto" else ("bf16" if device.type == "cuda" else "fp32")
    spread = f", lengths x{1 - args.vary:.2f}..x{1 + args.vary:.2f}" if args.vary > 0 else ""
    options = [
        o
        for o, on in (
            ("checkpointing", args.checkpointing),
            ("unpacked", args.no_pack),
            ("compiled", getattr(trainer, "compiled", False)),
        )
        if on
    ]
    print(
        f"{args.backend} backend on {device} ({precision}{', ' + ', '.join(options) if options else ''}), "
        f"{args.samples} samples x ({args.prompt} + {args.response}) tokens{spread}, {tokens} tokens in all, "
        f"model {model_path.name} ({parameter_count(config) / 1e9:.2f}B parameters), "
        f"cpu cores: {os.cpu_count()}, torch threads: {torch.get_num_threads()}"
    )
    flops = step_flops(config, shapes)
    print(f"trainer: {tokens / tr:8.0f} tokens/s  ({tr * 1000:.0f} ms/step, {flops / tr / 1e12:.1f} TFLOP/s)")
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        print(f"MFU: {flops / tr / 1e12 / args.peak_tflops * 100:.1f}% of {args.peak_tflops:.0f} TFLOP/s ({name})")
        both = " (the trainer's and the plain loop's models together)" if plain is not None else ""
        print(f"peak GPU memory{both}: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
    if plain is not None:
        pl = statistics.median(times["plain"])
        print(f"plain:   {tokens / pl:8.0f} tokens/s  ({pl * 1000:.0f} ms/step, {flops / pl / 1e12:.1f} TFLOP/s)")
        print(f"trainer vs plain loop: {pl / tr:.2f}x the tokens/s")
    from trainers import packing

    print(f"varlen attention: usable {packing._VARLEN['ok']}, calls that took it {packing.varlen_calls()}")
    if args.profile:
        profile_step(trainer, samples, args.profile)


def check_packing(trainer, model_path: Path, cfg: TrainerConfig, samples: list[TrainingSample]) -> None:
    """The same batch's log-probs packed and padded (they must agree to the precision's rounding)."""
    from dataclasses import replace

    from trainers import packing

    other = type(trainer)(model_path, replace(cfg, pack_samples=not cfg.pack_samples))
    with torch.no_grad():
        a, b = trainer.logprobs(trainer.model, samples), other.logprobs(other.model, samples)
    mask = torch.zeros_like(a, dtype=torch.bool)
    for i, s in enumerate(samples):
        mask[i, : len(s.response_ids)] = True
    diff = (a - b).abs()[mask]
    print(
        f"check: packed vs padded log-probs, max |diff| {float(diff.max()):.2e}, mean {float(diff.mean()):.2e} "
        f"over {int(mask.sum())} tokens; varlen attention: {packing._VARLEN['ok']}"
    )
    del other
    if trainer.device.type == "cuda":
        torch.cuda.empty_cache()


def profile_step(trainer, samples: list[TrainingSample], rows: int) -> None:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if trainer.device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        trainer.train_step(samples)
        synchronize(trainer.device)
    key = "self_cuda_time_total" if trainer.device.type == "cuda" else "self_cpu_time_total"
    try:
        print(prof.key_averages().table(sort_by=key, row_limit=rows, max_name_column_width=60))
    except (AttributeError, KeyError, RuntimeError):
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=rows, max_name_column_width=60))


if __name__ == "__main__":
    main()
