"""Trainer overhead: tokens/s of a trainer backend's train_step vs a plain PyTorch loop doing the same work.

Both take the same batch (--samples samples of --prompt + --response random tokens
on the tiny Qwen3 model, or --model PATH), run one forward/backward over it, the
same clipped-surrogate loss and an AdamW step with gradient clipping. The
difference is the trainer's own bookkeeping (micro-batching, masks, metrics).

    .venv/bin/python benchmarks/train_step.py [--backend torch|megatron] [--samples 16] [--prompt 256] \
[--response 64] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contracts.learning import JudgeSummary
from openclaw_rl.samples import SampleMeta, TrainingSample  # noqa: E402
from rlmath.logprobs import token_logprobs  # noqa: E402
from trainers import backend_class  # noqa: E402
from trainers.base import TrainerConfig  # noqa: E402


def batch(n: int, prompt: int, response: int, vocab: int) -> list[TrainingSample]:
    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        ids = torch.randint(0, vocab, (prompt + response,), generator=g).tolist()
        meta = SampleMeta(
            sample_id=f"b#{i}",
            source="bench",
            method="binary",
            user_id="u",
            session_id="s",
            turn_id=str(i),
            turn_index=i,
            policy_version="0",
            temperature=1.0,
            reward=1.0,
            loss_mask=1,
            use_teacher=False,
            reason="bench",
            judge=JudgeSummary(judge="none"),
        )
        out.append(
            TrainingSample(
                meta=meta,
                prompt_ids=ids[:prompt],
                response_ids=ids[prompt:],
                rollout_logprobs=[-10.0] * response,
                advantages=[1.0 if i % 2 else -1.0] * response,
            )
        )
    return out


def plain_step(model, opt, samples: list[TrainingSample]) -> None:
    """The same work, written as directly as possible: one forward, response positions projected, the loss inline."""
    p = len(samples[0].prompt_ids)
    ids = torch.tensor([s.prompt_ids + s.response_ids for s in samples])
    hidden = model.get_decoder()(input_ids=ids).last_hidden_state
    logits = model.get_output_embeddings()(hidden[:, p - 1 : -1])
    resp = ids[:, p:]
    lp = token_logprobs(logits, resp, 1.0)
    old = torch.tensor([s.rollout_logprobs for s in samples])
    adv = torch.tensor([s.advantages for s in samples])
    ratio = torch.exp(lp - old)
    loss = torch.maximum(-ratio * adv, -ratio.clamp(0.8, 1.28) * adv).mean(-1).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--backend", choices=["torch", "megatron"], default="torch")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--response", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    model_path = args.model
    if model_path is None:
        from engine.tiny_qwen3 import ensure_tiny_model

        model_path = ensure_tiny_model(Path(tempfile.mkdtemp(prefix="train-bench-")) / "tiny-qwen3")
    trainer = backend_class(args.backend)(model_path, TrainerConfig(micro_batch_tokens=10**9))
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).train()
    samples = batch(args.samples, args.prompt, args.response, plain.config.vocab_size)
    opt = torch.optim.AdamW(plain.parameters(), lr=1e-5, weight_decay=0.1, betas=(0.9, 0.98))
    tokens = args.samples * (args.prompt + args.response)
    trainer.train_step(samples)
    plain_step(plain, opt, samples)  # warm-up
    times = {"trainer": [], "plain": []}
    for _ in range(args.rounds):  # interleaved, so drift in machine speed hits both alike
        t = time.perf_counter()
        trainer.train_step(samples)
        times["trainer"].append(time.perf_counter() - t)
        t = time.perf_counter()
        plain_step(plain, opt, samples)
        times["plain"].append(time.perf_counter() - t)
    tr, pl = statistics.median(times["trainer"]), statistics.median(times["plain"])
    print(
        f"{args.backend} backend, {args.samples} samples x ({args.prompt} + {args.response}) tokens, "
        f"model {model_path.name}, cpu cores: {os.cpu_count()}, torch threads: {torch.get_num_threads()}"
    )
    print(f"trainer: {tokens / tr:8.0f} tokens/s  ({tr * 1000:.0f} ms/step)")
    print(f"plain:   {tokens / pl:8.0f} tokens/s  ({pl * 1000:.0f} ms/step)")
    print(f"trainer overhead: {(tr / pl - 1) * 100:+.1f}% (target: under 5%)")


if __name__ == "__main__":
    main()
