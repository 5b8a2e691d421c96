"""The benchmark's base policy: a small Qwen3-architecture model pretrained on CPU in minutes, cached.

Recipe (all from fixed seeds, so two builds give the same files):
1. A corpus of chats (`corpus`): a homework problem to solve or a student's work to grade, sometimes after an
   earlier exchange (a thanks, a correction with directives, a question asked again, moving on). The answer's
   style is the one the latest user message asks for (`styles.pick_style`), else drawn from the base mix
   (mostly AI-looking answers; mostly terse grading comments).
2. `bench.pretraining` builds the tokenizer and the model from it: a byte-level BPE with Qwen3's chat tokens and
   the engine's ChatML template, a Qwen3ForCausalLM trained on the answers' tokens, a plain Hugging Face
   checkpoint that the engine, the chat renderer and the trainers load like any other.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

from bench import pretraining
from bench.pretraining import Recipe
from evals.personalization import styles
from evals.personalization.problems import make_grading_task, make_problem

FORMAT_VERSION = 1

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


# ---- the build -----------------------------------------------------------------------------------------------


def chat_rows(index: int, seed: int) -> list[pretraining.Row]:
    """Example `index`: the chat so far, and the answer to learn (also part of the agent base's corpus)."""
    chat = example(index, seed)
    return [pretraining.Row(messages=chat[:-1], target=chat[-1]["content"])]


def chat_texts(index: int, seed: int) -> Iterator[str]:
    for m in example(index, seed):
        yield m["content"]


def _tokenizer_texts(recipe: Recipe) -> Iterator[str]:
    for i in range(recipe.tokenizer_examples):
        yield from chat_texts(i, recipe.seed)


CORPUS = pretraining.Corpus(
    name="personal-base", format_tag={"format": FORMAT_VERSION}, rows=chat_rows, tokenizer_texts=_tokenizer_texts
)
MARKER = CORPUS.marker


def default_dir(models_dir: Path, recipe: Recipe = DEFAULT) -> Path:
    return CORPUS.folder(models_dir, recipe)


def ensure_base_model(
    target: Path,
    recipe: Recipe = DEFAULT,
    progress: Callable[[int, int, float], None] | None = None,
    force: bool = False,
) -> Path:
    """Build the base policy into `target` unless a finished build of the same recipe is there."""
    return pretraining.ensure_model(target, CORPUS, recipe, progress, force)


def build_info(path: Path) -> dict:
    return pretraining.build_info(path, CORPUS)
