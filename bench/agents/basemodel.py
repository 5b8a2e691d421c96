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
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from bench import pretraining
from bench.agents import terminal_trajectories, trajectories
from bench.personalization import basemodel as personal_base
from bench.pretraining import Recipe
from envs.terminal import counting_tasks

FORMAT_VERSION = 4

SETTINGS = {"toolcall": trajectories, "terminal": terminal_trajectories}
"""The agent settings the corpus holds, with generated episodes."""

NUMBER_WEIGHT = 3.0
"""The loss weight of a learned all-digit token (`Corpus.number_weight`)."""


@dataclass(frozen=True)
class Mix:
    """What a corpus holds, example by example."""

    cycle: tuple[str, ...] = ("toolcall", "terminal", "terminal", "toolcall", "terminal", "personal")
    """The sources in turn: the default has two tool-call episodes, three terminal ones (more to copy, learned
    later), then a personal chat (the personalization benchmark's, so that one policy can be trained on both
    streams at once: `bench agents --mixed`)."""
    copy_phase: int = 16_000
    """The first `copy_phase` examples are copy drills, later every `copy_later`-th: a short row that only asks to
    copy numbers (into a program, a list, an answer) or the terminal tasks' names. Copying the question's numbers
    into a program and the tool's printed value into the answer is what good tool use needs and what a small
    model learns last; alone, in short rows, the copying forms in a few minutes (measured: a copy task alone,
    1,500 steps: 0/40 exact with three-digit number tokens, 11/40 with single digits and the loss at 0.2), and the
    episodes that follow carry it over."""
    copy_later: int = 8

    def is_copy_drill(self, index: int) -> bool:
        n = index - pretraining.FIRST_INDEX
        return 0 <= n < self.copy_phase or (n >= self.copy_phase and n % self.copy_later == 0)

    def episode_of(self, index: int) -> tuple[str, int]:
        """Which source example `index` comes from (an agent setting, or personal), and its index there."""
        pos = index % len(self.cycle)
        source = self.cycle[pos]
        return source, (index // len(self.cycle)) * self.cycle.count(source) + self.cycle[:pos].count(source)


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


def _rows(mix: Mix, index: int, seed: int) -> list[pretraining.Row]:
    """A copy drill, a personal chat, or a whole episode in one row, every step learned (each as it was written
    after its own prompt)."""
    if mix.is_copy_drill(index):
        return [_copy_drill(index, seed)]
    source, n = mix.episode_of(index)
    if source == "personal":
        return personal_base.chat_rows(n, seed)
    steps, tools, _ = SETTINGS[source].trajectory(n, seed)
    messages, text = steps[-1]
    return [pretraining.Row(messages=messages, target=text, tools=tools, learn_history=True)]


def _shared_prefixes(tokenizer) -> list[list[int]]:
    """The system prompt and tool list that every full (not drill) episode of a setting opens with."""
    prefixes = []
    for module in SETTINGS.values():
        steps, tools, _ = module.trajectory(0, 0)
        text = tokenizer.apply_chat_template([steps[0][0][0]], tools=tools, tokenize=False)
        prefixes.append(tokenizer.encode(text, add_special_tokens=False))
    return prefixes


def _tokenizer_texts(mix: Mix, recipe: Recipe) -> Iterator[str]:
    for name, module in SETTINGS.items():  # the tool lists once each, whatever the mix
        yield from (json.dumps(t) for t in module.trajectory(0, recipe.seed)[1])
    for i in range(recipe.tokenizer_examples):
        source, n = mix.episode_of(i)
        if source == "personal":
            yield from personal_base.chat_texts(n, recipe.seed)
            continue
        steps, _, _ = SETTINGS[source].trajectory(n, recipe.seed)
        for m in steps[-1][0]:
            yield str(m.get("content") or "")
        for _, text in steps:
            yield text


def corpus(name: str, mix: Mix) -> pretraining.Corpus:
    return pretraining.Corpus(
        name=name,
        format_tag={
            "format": FORMAT_VERSION,
            "mix": asdict(mix),
            "personal_format": personal_base.FORMAT_VERSION,
            "counting_format": counting_tasks.FORMAT_VERSION,
            "kinds": list(trajectories.KINDS),
            "behaviours": [trajectories.BEHAVIOURS, terminal_trajectories.BEHAVIOURS],
            "max_steps": [trajectories.MAX_STEPS, terminal_trajectories.MAX_STEPS],
            "number_weight": NUMBER_WEIGHT,
        },
        rows=partial(_rows, mix),
        tokenizer_texts=partial(_tokenizer_texts, mix),
        shared_prefixes=_shared_prefixes,
        number_weight=NUMBER_WEIGHT,
    )


MIX = Mix()
CORPUS = corpus("agent-base", MIX)
FAST_CORPUS = corpus("agent-base-fast", Mix(cycle=("terminal",), copy_phase=4_000))
"""Terminal episodes only, a short copy phase: the test suite's learning check builds it in a few minutes."""
MARKER = CORPUS.marker

DEFAULT = Recipe(seed=4321, hidden=128, layers=4, intermediate=384, tokenizer_examples=1500, steps=2000, lr=3e-3)
FAST = Recipe(seed=4321, hidden=128, layers=4, intermediate=384, tokenizer_examples=400, steps=800, lr=3e-3)
QUICK = Recipe(seed=4321, steps=8, batch=4, tokenizer_examples=100, hidden=64, layers=2, intermediate=192)
"""A miniature build for tests: the same code path in seconds (its output is not a usable policy)."""


def corpus_indices(recipe: Recipe) -> list[int]:
    """Every example index a build of `recipe` reads: the tokenizer's sample, then the pretraining rows."""
    first = pretraining.FIRST_INDEX
    return [*range(recipe.tokenizer_examples), *range(first, first + recipe.steps * recipe.batch)]


@dataclass(frozen=True)
class Build:
    corpus: pretraining.Corpus
    recipe: Recipe


BUILDS = {"default": Build(CORPUS, DEFAULT), "fast": Build(FAST_CORPUS, FAST), "quick": Build(CORPUS, QUICK)}


def default_dir(models_dir: Path, build: Build = BUILDS["default"]) -> Path:
    return build.corpus.folder(models_dir, build.recipe)


def ensure_base_model(
    target: Path,
    build: Build = BUILDS["default"],
    progress: Callable[[int, int, float], None] | None = None,
    force: bool = False,
) -> Path:
    return pretraining.ensure_model(target, build.corpus, build.recipe, progress, force)


def build_info(path: Path) -> dict:
    """The marker of whichever build `path` holds."""
    for build in BUILDS.values():
        info = pretraining.build_info(path, build.corpus)
        if info:
            return info
    return {}
