"""Small Qwen3-architecture policies pretrained on CPU in minutes from a generated corpus, cached by recipe digest.

Shared by the benchmarks' base policies (personalization, agents): each brings a corpus of rows (the prompt
messages, their tools, the assistant text to learn) and the texts its tokenizer is trained on; this module builds
the byte-level BPE tokenizer with Qwen3's chat tokens and the engine's ChatML template, trains a
Qwen3ForCausalLM with AdamW on the answers' tokens (prompt tokens masked), and saves a plain Hugging Face
checkpoint (config, safetensors, tokenizer, chat template) that the engine, the renderer and the trainers load
like any other. Everything comes from fixed seeds, so two builds give the same files.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from openclaw_rl.checkpoints import staged_dir

FIRST_INDEX = 10_000_000
"""Pretraining examples are numbered from here, apart from the tokenizer's sample (numbered from 0)."""
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
ADDED = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
TEMPLATE = Path(__file__).resolve().parents[1] / "engine" / "chat_template.jinja"


@dataclass(frozen=True)
class Recipe:
    seed: int = 1234
    vocab: int = 1024
    hidden: int = 128
    layers: int = 3
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 384
    max_positions: int = 2048
    tokenizer_examples: int = 3000
    steps: int = 450
    batch: int = 16
    lr: float = 3e-3
    warmup: int = 30
    threads: int = 1
    """One thread: the same floating-point sums on every machine (and 2 threads gained nothing on 2 shared cores)."""

    def digest(self, format_tag: dict[str, Any]) -> str:
        return hashlib.sha256(json.dumps(asdict(self) | format_tag, sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Row:
    """One thing to learn: the assistant's `target` text after `messages` (rendered with `tools`).

    `learn_history`: the assistant messages inside `messages` are learned too, each as the template renders it
    after the messages before it: one row per episode instead of one per step (the prompt's prefix, the long
    part, goes through the model once). Exact only where that rendering is what the policy wrote, which the
    corpus must hold (`encode` checks the token prefixes and raises when they differ)."""

    messages: list[dict]
    target: str
    tools: list[dict] | None = None
    learn_history: bool = False


@dataclass(frozen=True)
class Corpus:
    """What a base policy is made of: `rows(index, seed)` (one example's rows) and the tokenizer's texts."""

    name: str
    """Names the checkpoint folder and its marker file (`openclaw-rl-<name>.json`)."""
    format_tag: dict[str, Any]
    """Part of the recipe digest: change it when the corpus changes, so cached builds are not reused."""
    rows: Callable[[int, int], list[Row]]
    tokenizer_texts: Callable[[Recipe], Iterable[str]]
    shared_prefixes: Callable[[Any], list[list[int]]] | None = None
    """The token ids that many rows open with (given the tokenizer): run once per batch (`batch_loss`)."""
    number_weight: float = 1.0
    """How much a learned token made only of digits weighs in the loss against any other (the mean stays a mean).
    Copying a number is a few tokens of an episode's fifty, but all that decides its outcome."""

    @property
    def marker(self) -> str:
        return f"openclaw-rl-{self.name}.json"

    def digest(self, recipe: Recipe) -> str:
        return recipe.digest(self.format_tag)

    def folder(self, models_dir: Path, recipe: Recipe) -> Path:
        """Where a build of `recipe` is cached: `<models dir>/<name>-<digest>`."""
        return Path(models_dir) / f"{self.name}-{self.digest(recipe)}"


# ---- tokenizer -------------------------------------------------------------------------------------------------


def build_tokenizer(recipe: Recipe, texts: Iterable[str], template: str) -> str:
    """A byte-level BPE trained on `texts`, every digit its own token (as Qwen's tokenizer cuts numbers)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=recipe.vocab - len(ADDED),
        special_tokens=list(SPECIAL),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([*texts, template], trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED])
    return tok.to_str()


def tokenizer_config(tokenizer_json: str, template: str, max_positions: int) -> dict:
    vocab = json.loads(tokenizer_json)
    added = {
        str(t["id"]): {
            "content": t["content"],
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": t["special"],
        }
        for t in vocab["added_tokens"]
    }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "model_max_length": max_positions,
        "clean_up_tokenization_spaces": False,
        "chat_template": template,
    }


def model_config(recipe: Recipe, eos: int, pad: int) -> dict:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": recipe.vocab,
        "hidden_size": recipe.hidden,
        "intermediate_size": recipe.intermediate,
        "num_hidden_layers": recipe.layers,
        "num_attention_heads": recipe.heads,
        "num_key_value_heads": recipe.kv_heads,
        "head_dim": recipe.hidden // recipe.heads,
        "hidden_act": "silu",
        "max_position_embeddings": recipe.max_positions,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": pad,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "torch_dtype": "float32",
    }


# ---- pretraining -----------------------------------------------------------------------------------------------


def _prompt_ids(tokenizer, messages: list[dict], tools: list[dict] | None) -> list[int]:
    prompt = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(prompt, add_special_tokens=False)


def encode(tokenizer, row: Row, eos: int) -> tuple[list[int], list[tuple[int, int]]]:
    """The row's token ids and the spans to learn (the prompt as the policy's renderer writes it)."""
    p_ids = _prompt_ids(tokenizer, row.messages, row.tools)
    ids = p_ids + tokenizer.encode(row.target, add_special_tokens=False) + [eos]
    spans = [(len(p_ids), len(ids))]
    if row.learn_history:
        for i, m in enumerate(row.messages):
            if m["role"] != "assistant":
                continue
            before = _prompt_ids(tokenizer, row.messages[:i], row.tools)
            if ids[: len(before)] != before or eos not in ids[len(before) :]:
                raise ValueError(f"assistant message {i} is not rendered after its own prompt: learn it in its own row")
            spans.append((len(before), ids.index(eos, len(before)) + 1))
    return ids, sorted(spans)


def pretrain(
    model, tokenizer, corpus: Corpus, recipe: Recipe, eos: int, pad: int, progress: Callable[[int, int, float], None]
) -> float:
    import torch

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.98), weight_decay=0.01)
    index = FIRST_INDEX
    loss_ema = float("nan")
    prefixes = corpus.shared_prefixes(tokenizer) if corpus.shared_prefixes else []
    weights = token_weights(tokenizer, corpus.number_weight, model.config.vocab_size)
    plain = not prefixes and weights is None
    pending: list[tuple[list[int], list[tuple[int, int]]]] = []
    for step in range(recipe.steps):
        lr = recipe.lr * min(1.0, (step + 1) / recipe.warmup)
        lr *= 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / max(1, recipe.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        if not pending:  # four batches at a time, sorted by length: less padding, the same rows in the same order
            while len(pending) < 4 * recipe.batch:
                pending += [encode(tokenizer, row, eos) for row in corpus.rows(index, recipe.seed)]
                index += 1
            pending.sort(key=lambda r: len(r[0]))
            chunks = [pending[i : i + recipe.batch] for i in range(0, len(pending), recipe.batch)]
            random.Random(f"order:{recipe.seed}:{step}").shuffle(chunks)
            pending = [r for c in chunks for r in c]
        rows, pending = pending[: recipe.batch], pending[recipe.batch :]
        loss = _padded_loss(model, rows, pad) if plain else batch_loss(model, rows, pad, prefixes, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        v = float(loss.detach())
        loss_ema = v if math.isnan(loss_ema) else 0.95 * loss_ema + 0.05 * v
        progress(step + 1, recipe.steps, loss_ema)
    model.eval()
    return loss_ema


Encoded = tuple[list[int], list[tuple[int, int]]]


def _padded_loss(model, rows: list[Encoded], pad: int):
    """The mean loss over the rows' learned tokens, every row run whole (right-padded to the longest)."""
    import torch

    width = max(len(ids) for ids, _ in rows)
    inp = torch.full((len(rows), width), pad, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, (ids, spans) in enumerate(rows):
        inp[r, : len(ids)] = torch.tensor(ids)
        for start, end in spans:
            labels[r, start:end] = torch.tensor(ids[start:end])
        mask[r, : len(ids)] = 1
    return model(input_ids=inp, attention_mask=mask, labels=labels).loss


def token_weights(tokenizer, number_weight: float, vocab_size: int):
    """Per token id its weight in the loss (`Corpus.number_weight` for the all-digit tokens), or None: all 1."""
    if number_weight == 1.0:
        return None
    import torch

    weights = torch.ones(vocab_size)
    for token, i in tokenizer.get_vocab().items():
        if token.isdigit():
            weights[i] = number_weight
    return weights


def batch_loss(model, rows: list[Encoded], pad: int, prefixes: list[list[int]], weights=None):
    """The same mean loss as `_padded_loss`, with a prefix that rows share run once instead of once per row.

    Agent episodes open with the same long system prompt and tool list; rows that start with one of `prefixes`
    (and learn nothing inside it) are run as one pass over the prefix, its keys and values repeated for each
    row, then the rows' own tokens over them. Gradients flow through the shared pass, so the step is the one
    the whole rows would give (tested to float tolerance), for a fraction of the compute."""
    import torch
    import torch.nn.functional as F

    groups: dict[int, list[Encoded]] = {}
    for ids, spans in rows:
        k = next(
            (i for i, p in enumerate(prefixes) if len(ids) > len(p) and spans[0][0] > len(p) and ids[: len(p)] == p),
            -1,
        )
        groups.setdefault(k, []).append((ids, spans))
    total, count = None, 0.0
    for k, group in sorted(groups.items()):
        plen = len(prefixes[k]) if k >= 0 else 0
        cache = None
        if plen:
            cache = model(input_ids=torch.tensor([prefixes[k]]), use_cache=True).past_key_values
            cache.batch_repeat_interleave(len(group))
        width = max(len(ids) - plen for ids, _ in group)
        inp = torch.full((len(group), width), pad, dtype=torch.long)
        labels = torch.full((len(group), width), -100, dtype=torch.long)
        mask = torch.zeros((len(group), plen + width), dtype=torch.long)
        mask[:, :plen] = 1
        for r, (ids, spans) in enumerate(group):
            inp[r, : len(ids) - plen] = torch.tensor(ids[plen:])
            for start, end in spans:
                labels[r, start - plen : end - plen] = torch.tensor(ids[start:end])
            mask[r, plen : len(ids)] = 1
        positions = torch.arange(plen, plen + width).unsqueeze(0).expand(len(group), -1)
        logits = model(input_ids=inp, attention_mask=mask, cache=cache, position_ids=positions).logits
        target = labels[:, 1:].reshape(-1)
        losses = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), target, reduction="none")
        learned = target != -100
        w = learned.float() if weights is None else weights[target.clamp(min=0)] * learned
        part = (losses * w).sum()
        total = part if total is None else total + part
        count += float(w.sum())
    return total / max(1.0, count)


# ---- the checkpoint --------------------------------------------------------------------------------------------


def ensure_model(
    target: Path,
    corpus: Corpus,
    recipe: Recipe,
    progress: Callable[[int, int, float], None] | None = None,
    force: bool = False,
) -> Path:
    """Build the policy into `target` unless a finished build of the same corpus and recipe is there.

    Built in a temporary sibling folder and renamed into place, so an interrupted build is never trusted.
    """
    target = Path(target)
    marker = target / corpus.marker
    if not force and marker.is_file():
        try:
            if json.loads(marker.read_text()).get("digest") == corpus.digest(recipe):
                return target
        except ValueError:
            pass
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    threads = torch.get_num_threads()
    rng_state = torch.random.get_rng_state()
    try:
        with staged_dir(target, prefix=f".{corpus.name}-") as staging:
            torch.set_num_threads(recipe.threads)
            template = TEMPLATE.read_text()
            tok_json = build_tokenizer(recipe, corpus.tokenizer_texts(recipe), template)
            (staging / "tokenizer.json").write_text(tok_json)
            config = tokenizer_config(tok_json, template, recipe.max_positions)
            (staging / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
            (staging / "chat_template.jinja").write_text(template)
            tokenizer = AutoTokenizer.from_pretrained(staging)
            eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
            pad = tokenizer.convert_tokens_to_ids("<|endoftext|>")
            torch.manual_seed(recipe.seed)
            model = Qwen3ForCausalLM(Qwen3Config(**model_config(recipe, eos, pad)))
            final_loss = pretrain(model, tokenizer, corpus, recipe, eos, pad, progress or (lambda *_: None))
            model.generation_config.eos_token_id = [eos, pad]
            model.generation_config.pad_token_id = pad
            model.save_pretrained(staging, safe_serialization=True)
            info = {
                **corpus.format_tag,
                "digest": corpus.digest(recipe),
                "recipe": asdict(recipe),
                "parameters": sum(p.numel() for p in model.parameters()),
                "final_loss": round(final_loss, 4),
                "build_s": round(time.monotonic() - started, 1),
            }
            (staging / corpus.marker).write_text(json.dumps(info, indent=2))
    finally:
        torch.set_num_threads(threads)
        torch.random.set_rng_state(rng_state)
    return target


def build_info(path: Path, corpus: Corpus) -> dict:
    try:
        return json.loads((Path(path) / corpus.marker).read_text())
    except (OSError, ValueError):
        return {}
