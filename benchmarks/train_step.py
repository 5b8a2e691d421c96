"""Trainer overhead: tokens/s of a trainer backend's train_step vs a plain PyTorch loop doing the same work.

Both take the same batch (--samples samples of --prompt + --response random tokens
on the tiny Qwen3 model, or --model PATH), run one forward/backward over it, the
same clipped-surrogate loss and an AdamW step with gradient clipping. The
difference is the trainer's own bookkeeping (micro-batching, masks, metrics).

    .venv/bin/python benchmarks/train_step.py [--backend torch|megatron] [--samples 16] [--prompt 256] \
[--response 64] [--rounds 5]

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
from trainers.base import TrainerConfig  # noqa: E402


def batch(n: int, prompt: int, response: int, vocab: int) -> list[TrainingSample]:
    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        ids = torch.randint(0, vocab, (prompt + response,), generator=g).tolist()
        out.append(
            TrainingSample(
                sample_id=f"b#{i}",
                source="bench",
                policy_version="0",
                temperature=1.0,
                reward=1.0,
                loss_mask=1,
                prompt_ids=ids[:prompt],
                response_ids=ids[prompt:],
                rollout_logprobs=[-10.0] * response,
                advantages=[1.0 if i % 2 else -1.0] * response,
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
            )
        )
    return out


def plain_step(model, opt, samples: list[TrainingSample], autocast) -> None:
    """The same work, written as directly as possible: one forward, response positions projected, the loss inline."""
    p = len(samples[0].prompt_ids)
    dev = next(model.parameters()).device
    ids = torch.tensor([s.prompt_ids + s.response_ids for s in samples], device=dev)
    with autocast:
        hidden = model.get_decoder()(input_ids=ids).last_hidden_state
        logits = model.get_output_embeddings()(hidden[:, p - 1 : -1])
    resp = ids[:, p:]
    lp = token_logprobs(logits.float(), resp, 1.0)
    old = torch.tensor([s.rollout_logprobs for s in samples], device=dev)
    adv = torch.tensor([s.advantages for s in samples], device=dev)
    ratio = torch.exp(lp - old)
    loss = torch.maximum(-ratio * adv, -ratio.clamp(0.8, 1.28) * adv).mean(-1).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def step_flops(config: dict, samples: int, prompt: int, response: int) -> float:
    """Model FLOPs of one train step (forward + backward = 3x forward): 2 per weight per token through the
    layers, the output projection for the response positions only (as both loops do), causal attention."""
    h, layers = config["hidden_size"], config["num_hidden_layers"]
    attn_width = config["num_attention_heads"] * head_dim(config)
    per_layer = parameter_count(config | {"vocab_size": 0}) - h
    width = prompt + response
    forward = samples * (
        2 * per_layer * width
        + 2 * config["vocab_size"] * h * response
        + layers * 2 * attn_width * width * width  # QK^T and AV, half of the square (causal), 2 FLOPs each
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
    args = ap.parse_args()
    model_path = bench_model(args.model, args.shape, Path(tempfile.mkdtemp(prefix="train-bench-")))
    cfg = TrainerConfig(micro_batch_tokens=10**9, device=args.device, precision=args.precision)
    trainer = backend_class(args.backend)(model_path, cfg)
    device = trainer.device
    config = json.loads((model_path / "config.json").read_text())
    samples = batch(args.samples, args.prompt, args.response, config["vocab_size"])
    tokens = args.samples * (args.prompt + args.response)
    times: dict[str, list[float]] = {"trainer": []}
    trainer.train_step(samples)  # warm-up
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
    print(
        f"{args.backend} backend on {device} ({precision}), {args.samples} samples x ({args.prompt} + "
        f"{args.response}) tokens, model {model_path.name} ({parameter_count(config) / 1e9:.2f}B parameters), "
        f"cpu cores: {os.cpu_count()}, torch threads: {torch.get_num_threads()}"
    )
    flops = step_flops(config, args.samples, args.prompt, args.response)
    print(f"trainer: {tokens / tr:8.0f} tokens/s  ({tr * 1000:.0f} ms/step, {flops / tr / 1e12:.1f} TFLOP/s)")
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        print(f"MFU: {flops / tr / 1e12 / args.peak_tflops * 100:.1f}% of {args.peak_tflops:.0f} TFLOP/s ({name})")
        both = " (the trainer's and the plain loop's models together)" if plain is not None else ""
        print(f"peak GPU memory{both}: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
    if plain is not None:
        pl = statistics.median(times["plain"])
        print(f"plain:   {tokens / pl:8.0f} tokens/s  ({pl * 1000:.0f} ms/step)")
        print(f"trainer overhead: {(tr / pl - 1) * 100:+.1f}% (target: under 5%)")


if __name__ == "__main__":
    main()
