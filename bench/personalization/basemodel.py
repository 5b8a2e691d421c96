"""The benchmark's base policy: a small Qwen3-architecture model pretrained on CPU in minutes, cached.

Recipe (all from fixed seeds, so two builds give the same files):
1. A corpus of chats (`corpus`): a homework problem to solve or a student's work to grade, sometimes after an
   earlier exchange (a thanks, a correction with directives, a question asked again, moving on). The answer's
   style is the one the latest user message asks for (`styles.pick_style`), else drawn from the base mix
   (mostly AI-looking answers; mostly terse grading comments).
2. A byte-level BPE tokenizer of `VOCAB` entries trained on that corpus, with Qwen3's chat tokens
   (`<|im_start|>`, `<|im_end|>`, `<|endoftext|>`, think and tool tags) and the engine's ChatML template.
3. A Qwen3ForCausalLM (`model_config`) trained with AdamW on the answers' tokens (prompt tokens masked).
The result is a plain Hugging Face checkpoint (config, safetensors, tokenizer, chat template) that the engine,
the chat renderer and the trainers load like any other.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.personalization import styles
from bench.personalization.problems import make_grading_task, make_problem

FORMAT_VERSION = 1
MARKER = "openclaw-rl-personal-base.json"
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
ADDED = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")


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

    def digest(self) -> str:
        return hashlib.sha256(
            json.dumps(asdict(self) | {"format": FORMAT_VERSION}, sort_keys=True).encode()
        ).hexdigest()[:12]


DEFAULT = Recipe()
FAST = Recipe(hidden=96, layers=2, intermediate=256, tokenizer_examples=1000, steps=300)
"""A smaller policy built in 1-2 minutes for the test suite's learning check: it still follows style instructions
(measured in the README), with less pretraining behind it."""
QUICK = Recipe(steps=12, batch=8, tokenizer_examples=300, hidden=64, layers=2, intermediate=192)
"""A miniature build for tests: the same code path in seconds (its output is not a usable policy)."""
RECIPES = {"default": DEFAULT, "fast": FAST, "quick": QUICK}

# ---- corpus ----------------------------------------------------------------------------------------------------

COMPLAINTS = {
    "student": (
        "This looks like an AI wrote it.",
        "My teacher will know this is AI.",
        "That is way too formatted.",
        "Hmm, not like that.",
        "That reads like a robot.",
    ),
    "teacher": (
        "That comment is too short.",
        "This is too blunt for a student.",
        "Hmm, not like that.",
        "That feedback is not helpful.",
        "This sounds cold.",
    ),
}
THANKS = ("Thanks, that's perfect!", "Great, thank you.", "Perfect, thanks!", "Nice, that works.")
MOVE_ON = ("OK.", "Alright.", "Got it.", "OK, moving on.")
REDO = ("Can you redo it?", "Try it again please.", "Please rewrite it.", "")


def _task(setting: str, rng: random.Random, seed: int, counter: list[int]):
    counter[0] += 1
    if setting == "student":
        return make_problem(seed, counter[0], "train")
    return make_grading_task(seed, counter[0], "train")


def _directives(setting: str, rng: random.Random) -> list[styles.Directive]:
    pool = styles.DIRECTIVES[setting]
    while True:
        chosen = rng.sample(pool, rng.choice([1, 1, 2, 3]))
        if styles.consistent_styles(setting, chosen):
            return chosen


def _with_instruction(request: str, instruction: str, rng: random.Random) -> str:
    where = rng.random()
    if where < 0.3:
        return f"{instruction} {request}"
    if where < 0.5:
        return f"{request} {instruction}"
    return f"{request}\n\n{rng.choice(styles.INSTRUCTION_LABELS)}{instruction}"


def example(index: int, seed: int) -> list[dict]:
    """One pretraining chat; its last message is the assistant's answer to learn."""
    rng = random.Random(f"corpus:{seed}:{index}")
    setting = rng.choice(["student", "teacher"])
    counter = [index * 4]
    messages: list[dict] = []
    task = _task(setting, rng, seed, counter)
    request = styles.ask(setting, task, rng)
    active: list[styles.Directive] = []
    if rng.random() < 0.4:  # an earlier exchange
        prev_dirs = _directives(setting, rng) if rng.random() < 0.3 else []
        first = _with_instruction(request, styles.directive_text(prev_dirs, rng), rng) if prev_dirs else request
        style = styles.pick_style(setting, prev_dirs, rng)
        messages += [
            {"role": "user", "content": first},
            {"role": "assistant", "content": styles.write_answer(setting, task, style, rng)},
        ]
        kind = rng.random()
        if kind < 0.45:  # a correction: the same task again, as the directives say
            active = _directives(setting, rng)
            parts = [
                rng.choice(COMPLAINTS[setting]) if rng.random() < 0.8 else "",
                styles.directive_text(active, rng),
                rng.choice(REDO),
            ]
            messages.append({"role": "user", "content": " ".join(p for p in parts if p)})
        elif kind < 0.6:  # the same question again
            active = prev_dirs
            messages.append({"role": "user", "content": first})
        else:  # satisfied or moving on, then a new task (perhaps with its own instruction)
            task = _task(setting, rng, seed, counter)
            request = styles.ask(setting, task, rng)
            if rng.random() < 0.4:
                active = _directives(setting, rng)
                request = _with_instruction(request, styles.directive_text(active, rng), rng)
            lead = rng.choice(THANKS if rng.random() < 0.5 else MOVE_ON)
            messages.append({"role": "user", "content": f"{lead} {request}"})
    else:
        if rng.random() < 0.55:
            active = _directives(setting, rng)
            request = _with_instruction(request, styles.directive_text(active, rng), rng)
        messages.append({"role": "user", "content": request})
    style = styles.pick_style(setting, active, rng)
    messages.append({"role": "assistant", "content": styles.write_answer(setting, task, style, rng)})
    return messages


# ---- tokenizer -------------------------------------------------------------------------------------------------


def build_tokenizer(recipe: Recipe, template: str) -> str:
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
    texts = []
    for i in range(recipe.tokenizer_examples):
        for m in example(i, recipe.seed):
            texts.append(m["content"])
    texts.append(template)
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED])
    return tok.to_str()


def _tokenizer_config(tokenizer_json: str, template: str) -> dict:
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
        "model_max_length": DEFAULT.max_positions,
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


def _encode(tokenizer, messages: list[dict], eos: int) -> tuple[list[int], int]:
    prompt = tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
    p_ids = tokenizer.encode(prompt, add_special_tokens=False)
    a_ids = tokenizer.encode(messages[-1]["content"], add_special_tokens=False) + [eos]
    return p_ids + a_ids, len(p_ids)


def pretrain(model, tokenizer, recipe: Recipe, eos: int, pad: int, progress: Callable[[int, int, float], None]):
    import torch

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.98), weight_decay=0.01)
    index = 10_000_000  # pretraining chats are numbered apart from the tokenizer's sample
    loss_ema = float("nan")
    pending: list[tuple[list[int], int]] = []
    for step in range(recipe.steps):
        lr = recipe.lr * min(1.0, (step + 1) / recipe.warmup)
        lr *= 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / max(1, recipe.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        if not pending:  # four batches at a time, sorted by length: less padding, the same chats in the same order
            for _ in range(4 * recipe.batch):
                pending.append(_encode(tokenizer, example(index, recipe.seed), eos))
                index += 1
            pending.sort(key=lambda r: len(r[0]))
            chunks = [pending[i : i + recipe.batch] for i in range(0, len(pending), recipe.batch)]
            random.Random(f"order:{recipe.seed}:{step}").shuffle(chunks)
            pending = [r for c in chunks for r in c]
        rows, pending = pending[: recipe.batch], pending[recipe.batch :]
        width = max(len(ids) for ids, _ in rows)
        inp = torch.full((len(rows), width), pad, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, (ids, start) in enumerate(rows):
            inp[r, : len(ids)] = torch.tensor(ids)
            labels[r, start : len(ids)] = torch.tensor(ids[start:])
            mask[r, : len(ids)] = 1
        out = model(input_ids=inp, attention_mask=mask, labels=labels)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        v = float(out.loss.detach())
        loss_ema = v if math.isnan(loss_ema) else 0.95 * loss_ema + 0.05 * v
        progress(step + 1, recipe.steps, loss_ema)
    model.eval()
    return loss_ema


def default_dir(models_dir: Path, recipe: Recipe = DEFAULT) -> Path:
    return Path(models_dir) / f"personal-base-{recipe.digest()}"


def ensure_base_model(
    target: Path,
    recipe: Recipe = DEFAULT,
    progress: Callable[[int, int, float], None] | None = None,
    force: bool = False,
) -> Path:
    """Build the base policy into `target` unless a finished build of the same recipe is there.

    Built in a temporary sibling folder and renamed into place, so an interrupted build is never trusted.
    """
    target = Path(target)
    marker = target / MARKER
    if not force and marker.is_file():
        try:
            if json.loads(marker.read_text()).get("digest") == recipe.digest():
                return target
        except ValueError:
            pass
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".personal-base-", dir=target.parent))
    started = time.monotonic()
    threads = torch.get_num_threads()
    rng_state = torch.random.get_rng_state()
    try:
        torch.set_num_threads(recipe.threads)
        template = (Path(__file__).resolve().parents[2] / "engine" / "chat_template.jinja").read_text()
        tok_json = build_tokenizer(recipe, template)
        (staging / "tokenizer.json").write_text(tok_json)
        (staging / "tokenizer_config.json").write_text(json.dumps(_tokenizer_config(tok_json, template), indent=2))
        (staging / "chat_template.jinja").write_text(template)
        tokenizer = AutoTokenizer.from_pretrained(staging)
        eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
        pad = tokenizer.convert_tokens_to_ids("<|endoftext|>")
        torch.manual_seed(recipe.seed)
        model = Qwen3ForCausalLM(Qwen3Config(**model_config(recipe, eos, pad)))
        final_loss = pretrain(model, tokenizer, recipe, eos, pad, progress or (lambda *_: None))
        model.generation_config.eos_token_id = [eos, pad]
        model.generation_config.pad_token_id = pad
        model.save_pretrained(staging, safe_serialization=True)
        info = {
            "format": FORMAT_VERSION,
            "digest": recipe.digest(),
            "recipe": asdict(recipe),
            "parameters": sum(p.numel() for p in model.parameters()),
            "final_loss": round(final_loss, 4),
            "build_s": round(time.monotonic() - started, 1),
        }
        (staging / MARKER).write_text(json.dumps(info, indent=2))
        staging.chmod(0o755)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        torch.set_num_threads(threads)
        torch.random.set_rng_state(rng_state)
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def build_info(path: Path) -> dict:
    try:
        return json.loads((Path(path) / MARKER).read_text())
    except (OSError, ValueError):
        return {}
