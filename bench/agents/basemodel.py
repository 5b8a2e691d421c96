"""The agent benchmark's base policy: a small Qwen3-architecture agent pretrained on generated agent episodes.

Built by `bench.pretraining` from generated trajectories of two settings, in turn: tool-call episodes
(`trajectories`: math with the `python` tool) and terminal episodes (`terminal_trajectories`: the counting
family). Each episode is one row, every step of it learned as the episode renders it (the system prompt, the
tools, the results read back), so the policy writes tool calls in the chat template's Hermes format, reads tool
results, answers in `\\boxed{}` or writes the answer file, with each setting's mistakes on purpose. A plain
Hugging Face checkpoint, cached by digest.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path

from bench import pretraining
from bench.agents import counting_tasks, terminal_trajectories, trajectories
from bench.personalization import basemodel as personal_base
from bench.pretraining import Recipe

FORMAT_VERSION = 4

SETTINGS = {"toolcall": trajectories, "terminal": terminal_trajectories}
"""The agent settings the corpus holds, with generated episodes."""
CYCLE = ("toolcall", "terminal", "terminal", "toolcall", "terminal", "personal")
"""The corpus's examples in turn: two tool-call episodes, three terminal ones (more words to copy, learned later),
then a personal chat (the personalization benchmark's, so that one policy can be trained on both streams at once:
`bench agents --mixed`)."""

DRILL_PHASE = 0
"""The first DRILL_PHASE examples are drills: the episode without the system prompt and tool list."""
DRILL_EVERY = 0
"""After the drill phase, all but every DRILL_EVERY-th example are still drills (0: none)."""


NUMBER_WEIGHT = 3.0
"""The loss weight of a learned all-digit token (`Corpus.number_weight`)."""

COPY_PHASE = 16_000
"""The first COPY_PHASE examples are copy drills, later every COPY_LATER-th: a short row that only asks to copy
numbers (into a program, a list, an answer). Copying the question's numbers into a program and the tool's printed
value into the answer is what good tool use needs and what a small model learns last; alone, in short rows, the
copying forms in a few minutes (measured: a copy task alone, 1,500 steps: 0/40 exact with three-digit number
tokens, 11/40 with single digits and the loss at 0.2), and the episodes that follow carry it over."""
COPY_LATER = 8


def _is_copy_drill(index: int) -> bool:
    n = index - pretraining.FIRST_INDEX
    return 0 <= n < COPY_PHASE or (n >= COPY_PHASE and n % COPY_LATER == 0)


def _copy_drill(index: int, seed: int) -> pretraining.Row:
    """Numbers into a program, a list or an answer; or the terminal tasks' words and paths into a list."""
    rng = random.Random(f"copy-drill:{seed}:{index}")
    digits = [rng.randrange(1, 7) for _ in range(rng.randrange(1, 5))]
    numbers = [str(rng.randrange(10 ** (d - 1) if d > 1 else 0, 10**d)) for d in digits]
    form = rng.randrange(4)
    if form == 0:
        ask, target = "What is " + " plus ".join(numbers) + "?", "print(" + " + ".join(numbers) + ")"
    elif form == 1:
        ask, target = "Copy: " + ", ".join(numbers), ", ".join(numbers)
    elif form == 2:
        ask, target = f"The result is {numbers[0]}.", f"\\boxed{{{numbers[0]}}}"
    else:
        words = [counting_tasks.copy_word(rng) for _ in range(rng.randrange(1, 4))]
        ask, target = "Copy: " + " ".join(words), " ".join(words)
    return pretraining.Row(messages=[{"role": "user", "content": ask}], target=target)


def _is_drill(index: int) -> bool:
    n = index - pretraining.FIRST_INDEX
    return 0 <= n < DRILL_PHASE or (n >= DRILL_PHASE and DRILL_EVERY > 0 and n % DRILL_EVERY != 0)


def episode_of(index: int) -> tuple[str, int]:
    """Which source corpus example `index` comes from (an agent setting, or personal), and its index there."""
    pos = index % len(CYCLE)
    source = CYCLE[pos]
    return source, (index // len(CYCLE)) * CYCLE.count(source) + CYCLE[:pos].count(source)


def _episode(index: int, seed: int):
    setting, n = episode_of(index)
    return SETTINGS[setting].trajectory(n, seed)


def corpus_indices(recipe: Recipe) -> list[int]:
    """Every example index a build of `recipe` reads: the tokenizer's sample, then the pretraining rows."""
    first = pretraining.FIRST_INDEX
    return [*range(recipe.tokenizer_examples), *range(first, first + recipe.steps * recipe.batch)]


def _rows(index: int, seed: int) -> list[pretraining.Row]:
    """The whole episode in one row, every step learned (each as it was written after its own prompt)."""
    if _is_copy_drill(index):
        return [_copy_drill(index, seed)]
    source, n = episode_of(index)
    if source == "personal":
        return personal_base.chat_rows(n, seed)
    steps, tools, _ = _episode(index, seed)
    messages, text = steps[-1]
    if _is_drill(index):
        messages = [m for m in messages if m["role"] != "system"]
        return [pretraining.Row(messages=messages, target=text, learn_history=True)]
    return [pretraining.Row(messages=messages, target=text, tools=tools, learn_history=True)]


def _shared_prefixes(tokenizer) -> list[list[int]]:
    """The system prompt and tool list that every full (not drill) episode of a setting opens with."""
    prefixes = []
    for module in SETTINGS.values():
        steps, tools, _ = module.trajectory(0, 0)
        text = tokenizer.apply_chat_template([steps[0][0][0]], tools=tools, tokenize=False)
        prefixes.append(tokenizer.encode(text, add_special_tokens=False))
    return prefixes


def _tokenizer_texts(recipe: Recipe) -> Iterator[str]:
    for i in range(recipe.tokenizer_examples):
        source, n = episode_of(i)
        if source == "personal":
            yield from personal_base.chat_texts(n, recipe.seed)
            continue
        steps, tools, _ = _episode(i, recipe.seed)
        messages, _text = steps[-1]
        if i < len(SETTINGS):
            yield from (json.dumps(t) for t in tools)
        for m in messages:
            yield str(m.get("content") or "")
        for _, text in steps:
            yield text


CORPUS = pretraining.Corpus(
    name="agent-base",
    format_tag={
        "format": FORMAT_VERSION,
        "cycle": list(CYCLE),
        "personal_format": personal_base.FORMAT_VERSION,
        "kinds": list(trajectories.KINDS),
        "behaviours": [trajectories.BEHAVIOURS, terminal_trajectories.BEHAVIOURS],
        "max_steps": [trajectories.MAX_STEPS, terminal_trajectories.MAX_STEPS],
        "drill_phase": DRILL_PHASE,
        "drill_every": DRILL_EVERY,
        "numbers": "digits",
        "number_weight": NUMBER_WEIGHT,
        "copy_drills": [COPY_PHASE, COPY_LATER],
    },
    rows=_rows,
    tokenizer_texts=_tokenizer_texts,
    shared_prefixes=_shared_prefixes,
    number_weight=NUMBER_WEIGHT,
)
MARKER = CORPUS.marker

DEFAULT = Recipe(seed=4321, hidden=128, layers=4, intermediate=384, tokenizer_examples=1500, steps=2000, lr=3e-3)
QUICK = Recipe(seed=4321, steps=8, batch=4, tokenizer_examples=100, hidden=64, layers=2, intermediate=192)
"""A miniature build for tests: the same code path in seconds (its output is not a usable policy)."""


def default_dir(models_dir: Path, recipe: Recipe = DEFAULT) -> Path:
    return CORPUS.folder(models_dir, recipe)


def ensure_base_model(
    target: Path,
    recipe: Recipe = DEFAULT,
    progress: Callable[[int, int, float], None] | None = None,
    force: bool = False,
) -> Path:
    return pretraining.ensure_model(target, CORPUS, recipe, progress, force)


def build_info(path: Path) -> dict:
    return pretraining.build_info(path, CORPUS)
