"""Procedurally generated GSM8K-like word problems and grading tasks, reproducible from a seed.

A problem is a short story with two or three arithmetic steps; each step keeps its description, its expression
and its value, so every answer style can be written from it. A grading task is a problem plus a student's worked
answer, right or with one wrong step. Problems avoid words the heuristic judge reads as feedback (thanks,
perfect, wrong, never, ...), so a user's message is read for what the user says, not for the story in it.

Splits never overlap: pretraining draws from `split="train"`, the simulated users from `"users"`, the table's
held-out problems from `"eval"` (a separate seed space, checked by the tests on their texts).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

NAMES = (
    "Sara", "Tom", "Maya", "Leo", "Nina", "Omar", "Ava", "Ben", "Lily", "Sam", "Zoe", "Max", "Ivy", "Raj", "Ella",
    "Jack", "Mia", "Noah", "Ruby", "Finn", "Lena", "Kai", "Anna", "Eli",
)  # fmt: skip
SPLIT_OFFSET = {"train": 0, "users": 1_000_000, "eval": 2_000_000}


@dataclass(frozen=True)
class Step:
    description: str
    """What the step finds, as a phrase: `the cost of the notebooks`."""
    expression: str
    """`4 * 3`"""
    value: int


@dataclass(frozen=True)
class Problem:
    uid: str
    text: str
    steps: tuple[Step, ...]
    unit: str = ""
    """How the answer reads: `$`, `apples`, ..."""

    @property
    def answer(self) -> int:
        return self.steps[-1].value

    def answer_text(self, value: int | None = None) -> str:
        v = self.answer if value is None else value
        return f"${v}" if self.unit == "$" else f"{v} {self.unit}".strip()


@dataclass(frozen=True)
class GradingTask:
    uid: str
    problem: Problem
    student_steps: tuple[Step, ...]
    """The student's work: the problem's steps, or with one step computed wrongly (later steps follow from it)."""
    student_correct: bool
    wrong_step: int = -1

    @property
    def student_answer(self) -> int:
        return self.student_steps[-1].value

    def student_work(self) -> str:
        lines = [f"{s.expression} = {s.value}" for s in self.student_steps]
        return ", ".join(lines) + f". Answer: {self.problem.answer_text(self.student_answer)}"


@dataclass
class _Ctx:
    rng: random.Random
    name: str = field(init=False)
    he: str = field(init=False)
    his: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.rng.choice(NAMES)
        female = self.name in {
            "Sara",
            "Maya",
            "Nina",
            "Ava",
            "Lily",
            "Zoe",
            "Ivy",
            "Ella",
            "Mia",
            "Ruby",
            "Lena",
            "Anna",
        }
        self.he, self.his = ("she", "her") if female else ("he", "his")

    def n(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


def _shopping(c: _Ctx) -> tuple[str, list[Step], str]:
    item = c.rng.choice(["notebooks", "pens", "stickers", "apples", "comic books", "candles"])
    a, b, extra = c.n(2, 9), c.n(2, 12), c.n(3, 20)
    other = c.rng.choice(["a bag", "a lunch box", "a scarf", "a cap"])
    total = a * b + extra
    paid = ((total // 10) + c.n(1, 5)) * 10
    text = (
        f"{c.name} buys {a} {item} for ${b} each and {other} for ${extra}. {c.he.capitalize()} pays with ${paid}. "
        f"How much change does {c.he} get?"
    )
    steps = [
        Step(f"the cost of the {item}", f"{a} * {b}", a * b),
        Step("the total cost", f"{a * b} + {extra}", total),
        Step("the change", f"{paid} - {total}", paid - total),
    ]
    return text, steps, "$"


def _wages(c: _Ctx) -> tuple[str, list[Step], str]:
    a, b, d = c.n(8, 25), c.n(2, 8), c.n(2, 6)
    job = c.rng.choice(["at a cafe", "at the library", "walking dogs", "at a bike shop", "tutoring"])
    text = (
        f"{c.name} earns ${a} per hour {job}. {c.he.capitalize()} spends {b} hours a day there for {d} days. "
        f"How much money does {c.he} earn in total?"
    )
    steps = [
        Step("the pay for one day", f"{a} * {b}", a * b),
        Step("the pay for all days", f"{a * b} * {d}", a * b * d),
    ]
    return text, steps, "$"


def _bakery(c: _Ctx) -> tuple[str, list[Step], str]:
    thing = c.rng.choice(["loaves", "muffins", "cookies", "pies", "rolls"])
    a, b, d = c.n(5, 30), c.n(5, 30), c.n(2, 6)
    made = (a + b) * d
    sold = c.n(made // 3, made - 1)
    text = (
        f"A bakery makes {a} {thing} each morning and {b} {thing} each afternoon. After {d} days it has sold "
        f"{sold} {thing}. How many {thing} are left?"
    )
    steps = [
        Step(f"the {thing} made each day", f"{a} + {b}", a + b),
        Step(f"the {thing} made in {d} days", f"{a + b} * {d}", made),
        Step(f"the {thing} left", f"{made} - {sold}", made - sold),
    ]
    return text, steps, thing


def _reading(c: _Ctx) -> tuple[str, list[Step], str]:
    a = c.n(10, 60)
    k = c.rng.choice([2, 3])
    word = {2: "twice", 3: "three times"}[k]
    total = a + a * k + c.n(10, 200)
    text = (
        f"{c.name} reads {a} pages on Monday and {word} as many pages on Tuesday. The book has {total} pages. "
        f"How many pages are left to read?"
    )
    steps = [
        Step("the pages read on Tuesday", f"{a} * {k}", a * k),
        Step("the pages read so far", f"{a} + {a * k}", a + a * k),
        Step("the pages left", f"{total} - {a + a * k}", total - a - a * k),
    ]
    return text, steps, "pages"


def _orchard(c: _Ctx) -> tuple[str, list[Step], str]:
    fruit = c.rng.choice(["apples", "pears", "plums", "lemons", "peaches"])
    a, b, d = c.n(3, 12), c.n(4, 15), c.n(5, 30)
    text = (
        f"A farm has {a} rows of trees with {b} trees in each row. Each tree gives {d} {fruit}. "
        f"How many {fruit} does the farm get?"
    )
    steps = [Step("the number of trees", f"{a} * {b}", a * b), Step(f"the {fruit}", f"{a * b} * {d}", a * b * d)]
    return text, steps, fruit


def _savings(c: _Ctx) -> tuple[str, list[Step], str]:
    goal_item = c.rng.choice(["a bike", "a jacket", "a game", "a guitar", "a tent"])
    saved, per, times = c.n(5, 40), c.n(3, 12), c.n(2, 8)
    price = saved + per * times + c.n(5, 60)
    chore = c.rng.choice(["mowing a lawn", "babysitting", "washing a car", "raking leaves"])
    text = (
        f"{c.name} wants {goal_item} that costs ${price}. {c.he.capitalize()} has ${saved} saved and earns ${per} "
        f"each time {c.he} finishes {chore}. After {times} jobs, how much more money does {c.he} need?"
    )
    steps = [
        Step("the money earned from jobs", f"{per} * {times}", per * times),
        Step("the money so far", f"{saved} + {per * times}", saved + per * times),
        Step("the money still needed", f"{price} - {saved + per * times}", price - saved - per * times),
    ]
    return text, steps, "$"


def _trip(c: _Ctx) -> tuple[str, list[Step], str]:
    speed, hours, left = c.n(30, 70), c.n(2, 6), c.n(10, 90)
    vehicle = c.rng.choice(["car", "bus", "train", "van"])
    text = (
        f"A {vehicle} drives at {speed} miles per hour for {hours} hours and then {left} more miles. "
        f"How many miles does it drive in total?"
    )
    steps = [
        Step("the miles in the first part", f"{speed} * {hours}", speed * hours),
        Step("the total miles", f"{speed * hours} + {left}", speed * hours + left),
    ]
    return text, steps, "miles"


def _classroom(c: _Ctx) -> tuple[str, list[Step], str]:
    groups, per, absent = c.n(3, 9), c.n(3, 8), c.n(1, 5)
    thing = c.rng.choice(["crayons", "markers", "cards", "beads"])
    each = c.n(2, 6)
    students = groups * per - absent
    text = (
        f"A class has {groups} tables with {per} students at each table. {absent} students are away today. "
        f"The teacher gives {each} {thing} to every student who is there. How many {thing} does she give out?"
    )
    steps = [
        Step("the students in the class", f"{groups} * {per}", groups * per),
        Step("the students who are there", f"{groups * per} - {absent}", students),
        Step(f"the {thing} given out", f"{students} * {each}", students * each),
    ]
    return text, steps, thing


KINDS = (_shopping, _wages, _bakery, _reading, _orchard, _savings, _trip, _classroom)


HELD_OUT_SEED = 0
HELD_OUT_MAX = 100
"""The held-out problems are the eval split's first HELD_OUT_MAX of HELD_OUT_SEED; other splits never produce them."""
_held_out: set[str] = set()


def _draw(seed: int, index: int, split: str, attempt: int) -> Problem:
    rng = random.Random(f"problem:{split}:{seed}:{index}" + (f":{attempt}" if attempt else ""))
    kind = KINDS[rng.randrange(len(KINDS))]
    text, steps, unit = kind(_Ctx(rng))
    return Problem(uid=f"{split}-{seed}-{index}", text=text, steps=tuple(steps), unit=unit)


def make_problem(seed: int, index: int, split: str = "train") -> Problem:
    if split == "eval":
        return _draw(seed, index, split, 0)
    if not _held_out:
        _held_out.update(_draw(HELD_OUT_SEED, i, "eval", 0).text for i in range(HELD_OUT_MAX))
    attempt = 0
    while (p := _draw(seed, index, split, attempt)).text in _held_out:
        attempt += 1
    return p


def make_grading_task(seed: int, index: int, split: str = "train") -> GradingTask:
    problem = make_problem(seed, index, split)
    rng = random.Random(f"grading:{split}:{seed}:{index}")
    correct = rng.random() < 0.6
    if correct:
        return GradingTask(uid=problem.uid, problem=problem, student_steps=problem.steps, student_correct=True)
    wrong = rng.randrange(len(problem.steps))
    delta = rng.choice([-10, -2, -1, 1, 2, 10])
    steps: list[Step] = []
    for i, s in enumerate(problem.steps):
        if i < wrong:
            steps.append(s)
        elif i == wrong:
            steps.append(Step(s.description, s.expression, max(0, s.value + delta)))
        else:  # later steps carry the error forward
            prev = problem.steps[i - 1].value
            got = steps[-1].value
            expr = s.expression.replace(str(prev), str(got), 1)
            steps.append(Step(s.description, expr, _eval(expr)))
    return GradingTask(problem.uid, problem, tuple(steps), student_correct=False, wrong_step=wrong)


def _eval(expr: str) -> int:
    a, op, b = expr.split()
    x, y = int(a), int(b)
    return {"+": x + y, "-": x - y, "*": x * y}[op]


def eval_problems(seed: int, n: int = 36) -> list[Problem]:
    """The held-out problems of the table: the first `n` of the eval split (like the paper's first 36 of GSM8K)."""
    return [make_problem(seed, i, "eval") for i in range(n)]


def eval_grading_tasks(seed: int, n: int = 36) -> list[GradingTask]:
    return [make_grading_task(seed, i, "eval") for i in range(n)]
