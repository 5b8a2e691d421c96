"""Evaluation sets by name: each a list of cases (a chat to answer, and how to score its answer) and the metric.

`personalization-<setting>`: the personalization benchmark's held-out problems (`eval_problems` /
`eval_grading_tasks`, the eval split no training data draws from) asked the way its simulated users ask, scored by
its `RuleScorer` (0-1 in quarters). `user-<name>`: the JSONL file `eval.user_sets[name]` (activities.eval_user_sets).
The benchmark's problem, style and scorer modules are plain Python (no stack, no I/O), so serving the same held-out
problems here keeps the scheduled numbers comparable with the benchmark's table.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from activities.eval_user_sets import EvalSetError, load_user_set
from contracts.evaluation import PERSONALIZATION_PREFIX, USER_PREFIX
from openclaw_rl.settings import Settings

PERSONALIZATION_SEED = 0
"""The benchmark's EVAL_SEED (bench.personalization.runner): the same held-out problems for every run."""


@dataclass(frozen=True)
class EvalCase:
    messages: list[dict[str, str]]
    score: Callable[[str], float]
    """The answer's score, 0-1."""


@dataclass(frozen=True)
class EvalSet:
    name: str
    metric: str
    """What the mean of the cases' scores is called: `score` or `accuracy`."""
    cases: list[EvalCase]


def load_set(name: str, settings: Settings) -> EvalSet:
    if name.startswith(PERSONALIZATION_PREFIX):
        return _personalization(name, name.removeprefix(PERSONALIZATION_PREFIX), settings.eval.personalization_problems)
    if name.startswith(USER_PREFIX):
        path = settings.eval.user_sets.get(name.removeprefix(USER_PREFIX))
        if path is None:
            raise EvalSetError(
                f"no user set {name!r}: eval.user_sets names {sorted(settings.eval.user_sets) or 'none'}"
            )
        items = load_user_set(path)
        cases = [EvalCase([m.model_dump() for m in it.messages], lambda a, it=it: float(it.matches(a))) for it in items]
        return EvalSet(name, "accuracy", cases)
    raise EvalSetError(
        f"unknown evaluation set {name!r}: personalization-student, personalization-teacher, user-<name> or "
        "episodes-<setting>"
    )


def _personalization(name: str, setting: str, n: int) -> EvalSet:
    from bench.personalization import styles
    from bench.personalization.problems import eval_grading_tasks, eval_problems
    from bench.personalization.scorer import RuleScorer

    if setting not in ("student", "teacher"):
        raise EvalSetError(f"unknown personalization setting in {name!r}: student or teacher")
    tasks = (
        eval_problems(PERSONALIZATION_SEED, n) if setting == "student" else eval_grading_tasks(PERSONALIZATION_SEED, n)
    )
    scorer = RuleScorer()
    cases = []
    for i, task in enumerate(tasks):
        # Asked as the benchmark asks its held-out problems (runner.first_answers): one-message chats.
        request = styles.ask(setting, task, random.Random(f"eval-ask:{i}"))
        cases.append(
            EvalCase([{"role": "user", "content": request}], lambda a, t=task: scorer.score(setting, t, a).value)
        )
    return EvalSet(name, "score", cases)
