"""The terminal setting's generated counting family: count something in the workspace, write the number to a file.

Three kinds, each answered by one shell command whose words come from the instruction:

- `grep`: how many lines of a day's log mention a user id (`grep -c ID PATH`); the workspace holds other days' logs;
- `find`: how many .csv files lie under a batch folder, subfolders included (`find DIR -name '*.csv' | wc -l`);
  other batches hold such files too, and `.csv.bak` files that are not;
- `lines`: how many lines an export has (`wc -l < PATH`); other exports lie beside it.

The agent cannot count what it has not run a command over, so only a good command succeeds. Tasks are generated
from fixed seeds (the same folders on every machine) and written in the terminal setting's task layout with
Harbor's `tests/test.sh` checker (reward 1 when `/app/answer.txt` holds the number, else 0) and an oracle
`solution/solve.sh`. `count-0000` ... are the training tasks; from `HELD_OUT_FROM` on they are held out
(`held_out_task_ids`: the `episodes-terminal` evaluation set's split, and the agents benchmark's).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from functools import cache
from pathlib import Path

from pydantic import BaseModel

from openclaw_rl.checkpoints import staged_dir

TASKS = 720
HELD_OUT_FROM = 600
"""Tasks `count-0600` on are held out: scored, never trained on, their instructions never in pretraining."""
FAMILY_SEED = 20261125
ANSWER_FILE = "answer.txt"
FORMAT_VERSION = 3

KINDS = ("grep", "find", "lines")
ACTIONS = (
    "request served", "cache warmed", "login", "job queued", "health check ok", "config loaded",
    "session opened", "session closed", "payment posted", "report built", "index updated", "backup done",
)  # fmt: skip
LEVELS = ("INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG")
OTHER_EXTS = ("json", "txt", "log", "md", "xml")
"""What a task names varies only in numbers (a log's date, a user id, a batch, an export): the base policy, a
1M-parameter model, copies digits reliably and whole words of a large vocabulary not at all (measured with the
word-naming version of this family: the right command shape, another word of the same kind every time)."""


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


def _uid(rng: random.Random) -> str:
    while True:
        uid = str(rng.randrange(1000, 10000))
        if uid != "2026":  # every line's date holds 2026: a user id must not be found inside it
            return uid


def _log(rng: random.Random, day: int, uid: str, lines: int, rate: float) -> tuple[str, int]:
    others = [_uid(rng) for _ in range(rng.randrange(3, 9))]
    others = [o for o in others if o != uid] or ["4242" if uid != "4242" else "4343"]
    out, hits = [], 0
    for i in range(lines):
        hit = rng.random() < rate
        hits += hit
        stamp = f"2026-03-{day:02d} {rng.randrange(24):02d}:{rng.randrange(60):02d}:{i % 60:02d}"
        out.append(f"{stamp} {rng.choice(LEVELS)} user={uid if hit else rng.choice(others)} {rng.choice(ACTIONS)}")
    return "\n".join(out) + "\n", hits


def _grep_task(rng: random.Random, task_id: str) -> CountTask:
    days = rng.sample(range(1, 29), rng.randrange(2, 5))
    uid = _uid(rng)
    files, answer = {}, 0
    for n, day in enumerate(days):
        content, hits = _log(rng, day, uid, rng.randrange(30, 160), rng.uniform(0.05, 0.4))
        files[f"logs/2026-03-{day:02d}.log"] = content
        answer = hits if n == 0 else answer
    path = f"logs/2026-03-{days[0]:02d}.log"
    instruction = f"How many lines of {path} mention user {uid}? Write just the number to {ANSWER_FILE}."
    slots = {"word": uid, "path": path}
    return CountTask(
        task_id=task_id, kind="grep", instruction=instruction, files=files, answer=answer,
        command=_command("grep", slots), slots=slots,
    )  # fmt: skip


def _find_task(rng: random.Random, task_id: str) -> CountTask:
    dirs = [f"batch-{b}" for b in rng.sample(range(100, 1000), rng.randrange(2, 4))]
    files, answer = {}, 0
    for n, d in enumerate(dirs):
        subs = ["", *rng.sample(["old", "raw", "final", "tmp"], rng.randrange(0, 3))]
        for i in range(rng.randrange(4, 30)):
            ext = "csv" if rng.random() < 0.45 else rng.choice(OTHER_EXTS)
            if rng.random() < 0.1:
                ext = "csv.bak"  # not a *.csv file: the name ends in .bak
            sub = rng.choice(subs)
            files[f"{d}/{sub + '/' if sub else ''}part-{i:02d}.{ext}"] = f"{i}\n"
            answer += n == 0 and ext == "csv"
    instruction = (
        f"How many .csv files are there under {dirs[0]}/ (subfolders included)? Write just the number to {ANSWER_FILE}."
    )
    slots = {"dir": dirs[0], "ext": "csv"}
    return CountTask(
        task_id=task_id, kind="find", instruction=instruction, files=files, answer=answer,
        command=_command("find", slots), slots=slots,
    )  # fmt: skip


def _lines_task(rng: random.Random, task_id: str) -> CountTask:
    exports = [f"data/export-{e}.csv" for e in rng.sample(range(1000, 10000), rng.randrange(2, 4))]
    files, answer = {}, 0
    for n, path in enumerate(exports):
        rows = rng.randrange(8, 240)
        files[path] = "".join(f"{i},{rng.randrange(1, 999)},{rng.choice(ACTIONS)}\n" for i in range(rows))
        answer = rows if n == 0 else answer
    path = exports[0]
    instruction = f"How many lines does {path} have? Write just the number to {ANSWER_FILE}."
    slots = {"path": path}
    return CountTask(
        task_id=task_id, kind="lines", instruction=instruction, files=files, answer=answer,
        command=_command("lines", slots), slots=slots,
    )  # fmt: skip


MAKERS = {"grep": _grep_task, "find": _find_task, "lines": _lines_task}


def copy_word(rng: random.Random) -> str:
    """A name as the family's instructions write them (for the corpus's copy drills)."""
    form = rng.randrange(4)
    if form == 0:
        return _uid(rng)
    if form == 1:
        return f"logs/2026-03-{rng.randrange(1, 29):02d}.log"
    if form == 2:
        return f"batch-{rng.randrange(100, 1000)}"
    return f"data/export-{rng.randrange(1000, 10000)}.csv"


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


def held_out_task_ids() -> list[str]:
    """The held-out split's task ids, in order (kinds in turn: any prefix is balanced)."""
    return [task_id(i) for i in range(HELD_OUT_FROM, TASKS)]


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
    tag = {"format": FORMAT_VERSION, "tasks": TASKS, "seed": FAMILY_SEED, "kinds": KINDS, "actions": ACTIONS}
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
    with staged_dir(target, prefix=".counting-") as staging:
        for i in range(TASKS):
            write_task(task(i), staging)
        (staging / ".complete").write_text(digest() + "\n")
        for d, _, _ in os.walk(staging):  # the sandbox's uid copies the workspace files: readable by all
            os.chmod(d, 0o755)
    return target
