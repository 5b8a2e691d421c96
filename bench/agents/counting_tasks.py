"""The agent benchmark's terminal task family: count something in the workspace, write the number to a file.

Three kinds, each answered by one shell command whose words come from the instruction:

- `grep`: how many lines of a log contain a word (`grep -c WORD PATH`); the workspace holds other logs too;
- `find`: how many files with an extension lie under a project's folder, subfolders included
  (`find DIR -name '*.EXT' | wc -l`); other projects' folders hold such files too;
- `lines`: how many lines a file has (`wc -l < PATH`).

The agent cannot count what it has not run a command over, so only a good command succeeds. Tasks are generated
from fixed seeds (the same folders on every machine) and written in the terminal setting's task layout with
Harbor's `tests/test.sh` checker (reward 1 when `/app/answer.txt` holds the number, else 0) and an oracle
`solution/solve.sh`. `count-0000` ... are the training tasks; from `HELD_OUT_FROM` on they are held out.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
from functools import cache
from pathlib import Path

from pydantic import BaseModel

TASKS = 720
HELD_OUT_FROM = 600
"""Tasks `count-0600` on are held out: scored, never trained on, their instructions never in pretraining."""
FAMILY_SEED = 20261125
ANSWER_FILE = "answer.txt"
FORMAT_VERSION = 2

KINDS = ("grep", "find", "lines")
LOG_NAMES = ("api", "web", "auth", "db", "worker", "billing", "search", "mail", "cron", "gateway", "cache", "queue")
WORDS = (
    "timeout", "refused", "retry", "denied", "expired", "dropped", "throttled", "corrupt",
    "rollback", "deadlock", "overflow", "unreachable", "stale", "panic", "quota", "mismatch",
)  # fmt: skip
"""Words counted in logs: none is part of another, or of the filler text."""
FILLER = (
    "request served", "cache warmed", "user login", "job queued", "health check ok", "config loaded",
    "session opened", "session closed", "payment posted", "report built", "index updated", "backup done",
)  # fmt: skip
LEVELS = ("INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG")
EXTS = ("csv", "txt", "json", "md", "py", "log", "png", "xml")
PROJECTS = ("alpha", "beta", "gamma", "delta", "atlas", "orion", "nova", "zephyr", "apollo", "vega", "lyra", "juno")
TABLES = ("sales", "users", "orders", "events", "prices", "stock", "visits", "scores", "clients", "items")


class CountTask(BaseModel):
    """One generated task: its instruction, its workspace's files, the number, the command that finds it."""

    task_id: str
    kind: str
    instruction: str
    files: dict[str, str]
    """Workspace path -> content."""
    answer: int
    command: str
    """The command that prints the answer (run in /app)."""
    slots: dict[str, str]
    """The words of the instruction the command copies (a path, a word, an extension)."""

    def command_with(self, **slots: str) -> str:
        """The command with some of its copied words replaced: what a miscopy runs."""
        return _command(self.kind, {**self.slots, **slots})


def _command(kind: str, s: dict[str, str]) -> str:
    if kind == "grep":
        return f"grep -c {s['word']} {s['path']}"
    if kind == "find":
        return f"find {s['dir']} -name '*.{s['ext']}' | wc -l"
    return f"wc -l < {s['path']}"


def _log(rng: random.Random, word: str, lines: int, rate: float) -> tuple[str, int]:
    out, hits = [], 0
    for i in range(lines):
        stamp = f"2026-03-{rng.randrange(1, 29):02d} {rng.randrange(24):02d}:{rng.randrange(60):02d}:{i % 60:02d}"
        text = rng.choice(FILLER)
        if rng.random() < rate:
            text, hits = f"{text} {word}" if rng.random() < 0.5 else f"{word} after {text}", hits + 1
        elif rng.random() < 0.3:  # other words, so that counting any error line is not the answer
            text = f"{text} {rng.choice([w for w in WORDS if w != word])}"
        out.append(f"{stamp} {rng.choice(LEVELS)} {text}")
    return "\n".join(out) + "\n", hits


def _grep_task(rng: random.Random, task_id: str) -> CountTask:
    day = rng.randrange(1, 29)
    names = [f"{n}-{day:02d}" for n in rng.sample(LOG_NAMES, rng.randrange(2, 5))]
    word = rng.choice(WORDS)
    files, answer = {}, 0
    for n, name in enumerate(names):
        content, hits = _log(rng, word, rng.randrange(30, 160), rng.uniform(0.05, 0.4))
        files[f"logs/{name}.log"] = content
        answer = hits if n == 0 else answer
    path = f"logs/{names[0]}.log"
    instruction = f"How many lines of {path} contain the word {word}? Write just the number to {ANSWER_FILE}."
    slots = {"word": word, "path": path}
    return CountTask(
        task_id=task_id, kind="grep", instruction=instruction, files=files, answer=answer,
        command=_command("grep", slots), slots=slots,
    )  # fmt: skip


def _find_task(rng: random.Random, task_id: str) -> CountTask:
    dirs = rng.sample(PROJECTS, rng.randrange(2, 4))
    ext = rng.choice(EXTS)
    files, answer = {}, 0
    for n, d in enumerate(dirs):
        subs = ["", *rng.sample(["old", "2025", "misc", "raw", "final"], rng.randrange(0, 3))]
        for i in range(rng.randrange(4, 30)):
            e = ext if rng.random() < 0.45 else rng.choice(EXTS)
            if rng.random() < 0.1:
                e = f"{ext}.bak"  # not a *.EXT file: the name ends in .bak
            sub = rng.choice(subs)
            path = f"{d}/{sub + '/' if sub else ''}{rng.choice(TABLES)}_{i:02d}.{e}"
            files[path] = f"{i}\n"
            answer += n == 0 and e == ext
    instruction = (
        f"How many files ending in .{ext} are there under {dirs[0]}/ (subfolders included)?"
        f" Write just the number to {ANSWER_FILE}."
    )
    slots = {"dir": dirs[0], "ext": ext}
    return CountTask(
        task_id=task_id, kind="find", instruction=instruction, files=files, answer=answer,
        command=_command("find", slots), slots=slots,
    )  # fmt: skip


def _lines_task(rng: random.Random, task_id: str) -> CountTask:
    month = rng.randrange(1, 13)
    tables = [f"data/{t}_{month:02d}.csv" for t in rng.sample(TABLES, rng.randrange(2, 4))]
    files, answer = {}, 0
    for n, t in enumerate(tables):
        rows = rng.randrange(8, 240)
        files[t] = "".join(f"{i},{rng.randrange(1, 999)},{rng.choice(LOG_NAMES)}\n" for i in range(rows))
        answer = rows if n == 0 else answer
    path = tables[0]
    instruction = f"How many lines does {path} have? Write just the number to {ANSWER_FILE}."
    slots = {"path": path}
    return CountTask(
        task_id=task_id, kind="lines", instruction=instruction, files=files, answer=answer,
        command=_command("lines", slots), slots=slots,
    )  # fmt: skip


MAKERS = {"grep": _grep_task, "find": _find_task, "lines": _lines_task}


def copy_word(rng: random.Random) -> str:
    """A word or path of the family's vocabulary, as its instructions use them (for the corpus's copy drills)."""
    form = rng.randrange(5)
    if form == 0:
        return rng.choice(WORDS)
    if form == 1:
        return f"logs/{rng.choice(LOG_NAMES)}-{rng.randrange(1, 29):02d}.log"
    if form == 2:
        return rng.choice(PROJECTS)
    if form == 3:
        return f"data/{rng.choice(TABLES)}_{rng.randrange(1, 13):02d}.csv"
    return "." + rng.choice(EXTS)


def make(rng: random.Random, kind: str, task_id: str) -> CountTask:
    return MAKERS[kind](rng, task_id)


def task_id(index: int) -> str:
    return f"count-{index:04d}"


def task(index: int) -> CountTask:
    """The family's task `index` (kinds in turn, so any range of indices is balanced). A training task never has a
    held-out task's instruction: held out means an instruction RL never saw, not only other files behind it."""
    rng = random.Random(f"count-task:{FAMILY_SEED}:{index}")
    while True:
        t = make(rng, KINDS[index % len(KINDS)], task_id(index))
        if index >= HELD_OUT_FROM or t.instruction not in held_out_instructions():
            return t


def training_ids() -> list[str]:
    return [task_id(i) for i in range(HELD_OUT_FROM)]


def held_out() -> list[CountTask]:
    return [task(i) for i in range(HELD_OUT_FROM, TASKS)]


@cache
def held_out_instructions() -> frozenset[str]:
    return frozenset(t.instruction for t in held_out())


def corpus_task(index: int, seed: int) -> CountTask:
    """A pretraining task, drawn with the corpus's own seed; one with a held-out task's instruction is drawn again."""
    rng = random.Random(f"count-corpus:{seed}:{index}")
    while True:
        t = make(rng, KINDS[index % len(KINDS)], f"corpus-{index}")
        if t.instruction not in held_out_instructions():
            return t


# ---- the task folders --------------------------------------------------------------------------------------------

TEST_SH = """#!/bin/bash
# Harbor's verifier convention: the reward (1 or 0) goes to /logs/verifier/reward.txt.
mkdir -p /logs/verifier
got=$(tr -d '[:space:]' < /app/{answer_file} 2>/dev/null)
if [ "$got" = "{answer}" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
echo "expected {answer}, found '$got'"
"""


def digest() -> str:
    """Names the generated folder: changes whenever the family does."""
    tag = {"format": FORMAT_VERSION, "tasks": TASKS, "seed": FAMILY_SEED, "kinds": KINDS, "words": WORDS}
    return hashlib.sha256(json.dumps(tag, sort_keys=True).encode()).hexdigest()[:12]


def write_task(t: CountTask, root: Path) -> None:
    folder = root / t.task_id
    for rel, content in t.files.items():
        path = folder / "environment" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    (folder / "instruction.md").write_text(t.instruction + "\n")
    (folder / "task.toml").write_text(
        f'[metadata]\ntitle = "{t.instruction.split("?")[0]}?"\ncategory = "counting"\ndifficulty = "easy"\n\n'
        '[verifier]\ntimeout_s = 20\nchecker = "test.sh"\n'
    )
    (folder / "tests").mkdir()
    (folder / "tests" / "test.sh").write_text(TEST_SH.format(answer_file=ANSWER_FILE, answer=t.answer))
    (folder / "solution").mkdir()
    (folder / "solution" / "solve.sh").write_text(f"#!/bin/bash\n{t.command} > {ANSWER_FILE}\n")


def ensure_tasks(parent: Path) -> Path:
    """The family's task folders under `parent/counting-<digest>` (written once, atomically; reused after)."""
    target = Path(parent) / f"counting-{digest()}"
    if (target / ".complete").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".counting-", dir=target.parent))
    try:
        for i in range(TASKS):
            write_task(task(i), staging)
        (staging / ".complete").write_text(digest() + "\n")
        for d, _, _ in os.walk(staging):  # the sandbox's uid copies the workspace files: readable by all
            os.chmod(d, 0o755)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target
