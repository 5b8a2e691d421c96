"""The peer a user would otherwise run on a CPU: Hugging Face `generate`, with static batching.

The same prompts as the chat-latency benchmark, the same greedy tokens and stop tokens, in this process (no
server, no queue): one request at a time, or every session's turn of one round left-padded into one batch (a
request waits for its whole batch, as with any static-batching server). Latency is per request.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch


class HfPeer:
    def __init__(self, model: Path, tokens: int, stop_ids: list[int]):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.tokens, self.stop_ids = tokens, stop_ids
        self.pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else stop_ids[0]

    @torch.inference_mode()
    def generate(self, prompts: list[list[int]]) -> tuple[float, list[list[int]]]:
        """Seconds for one batched greedy `generate` of `prompts`, and each one's new tokens."""
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[self.pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        t = time.perf_counter()
        out = self.model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=self.tokens,
            do_sample=False,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad,
        )
        took = time.perf_counter() - t
        new = out[:, width:].tolist()
        return took, [[t for t in row if t != self.pad] for row in new]
