"""The agent benchmark's base policy: a small Qwen3-architecture agent pretrained on generated tool-call episodes.

Built by `bench.pretraining` from `trajectories` (every step of every generated episode is a row: the messages
the episode renders before the step, the tool definition, the step's text), so it writes tool calls in the
chat template's Hermes format, reads tool results and answers in `\\boxed{}` like the environment asks, with
the base behaviour's mistakes (`trajectories.BEHAVIOURS`). A plain Hugging Face checkpoint, cached by digest.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from bench import pretraining
from bench.agents import trajectories
from bench.pretraining import Recipe

FORMAT_VERSION = 3

DRILL_PHASE = 16_000
"""The first DRILL_PHASE examples (about 2,000 steps of 16 rows) are all drills: the episode without the system
prompt and tool list. Copying a number (into the program, from the tool's reply) is most of what there is to
learn there, in a sixth of the tokens: the copying circuit forms in them (measured: 0/35 exact programs at 1,000
drill steps, 13/35 at 2,000), and the rest of the run carries it over to the full prompt."""
DRILL_EVERY = 3
"""After the drill phase, all but every DRILL_EVERY-th example are still drills."""


def _is_drill(index: int) -> bool:
    n = index - pretraining.FIRST_INDEX
    return 0 <= n < DRILL_PHASE or (n >= DRILL_PHASE and n % DRILL_EVERY != 0)


def _rows(index: int, seed: int) -> list[pretraining.Row]:
    steps, tools, _ = trajectories.trajectory(index, seed)
    if _is_drill(index):
        return [pretraining.Row(messages=[m for m in ms if m["role"] != "system"], target=t) for ms, t in steps]
    return [pretraining.Row(messages=messages, target=text, tools=tools) for messages, text in steps]


def _tokenizer_texts(recipe: Recipe) -> Iterator[str]:
    for i in range(recipe.tokenizer_examples):
        steps, tools, _ = trajectories.trajectory(i, recipe.seed)
        messages, _text = steps[-1]
        if i == 0:
            yield json.dumps(tools[0])
        for m in messages:
            yield str(m.get("content") or "")
        for _, text in steps:
            yield text


CORPUS = pretraining.Corpus(
    name="agent-base",
    format_tag={
        "format": FORMAT_VERSION,
        "kinds": list(trajectories.KINDS),
        "max_steps": trajectories.MAX_STEPS,
        "drill_phase": DRILL_PHASE,
        "drill_every": DRILL_EVERY,
        "digit_runs": True,
    },
    rows=_rows,
    tokenizer_texts=_tokenizer_texts,
    digit_runs=True,  # a number copied as a few distinct multi-digit tokens, not a run of ambiguous single digits
)
MARKER = CORPUS.marker

DEFAULT = Recipe(seed=4321, hidden=128, layers=4, intermediate=384, tokenizer_examples=1500, steps=3200, lr=3e-3)
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
