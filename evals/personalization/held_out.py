"""The `personalization-<setting>` sets: the eval split's held-out problems (`eval_problems` / `eval_grading_tasks`,
which no training data draws from), each asked in a one-message chat the way `styles.ask` writes it, scored by
`RuleScorer` (0-1 in quarters). The same problems, asked the same way, as the personalization benchmark's table, so
the scheduled numbers stay comparable with it.
"""

from __future__ import annotations

import random

from evals.base import EvalCase, EvalSet, EvalSetError
from evals.personalization import styles
from evals.personalization.problems import HELD_OUT_SEED, eval_grading_tasks, eval_problems
from evals.personalization.scorer import RuleScorer
from openclaw_rl.settings import Settings

SETTINGS = ("student", "teacher")


def load(name: str, setting: str, settings: Settings) -> EvalSet:
    if setting not in SETTINGS:
        raise EvalSetError(f"unknown personalization setting in {name!r}: student or teacher")
    n = settings.eval.personalization_problems
    tasks = eval_problems(HELD_OUT_SEED, n) if setting == "student" else eval_grading_tasks(HELD_OUT_SEED, n)
    scorer = RuleScorer()
    cases = []
    for i, task in enumerate(tasks):
        # Asked as the benchmark asks its held-out problems (its runner's first answers): one-message chats.
        request = styles.ask(setting, task, random.Random(f"eval-ask:{i}"))
        cases.append(
            EvalCase([{"role": "user", "content": request}], lambda a, t=task: scorer.score(setting, t, a).value)
        )
    return EvalSet(name, "score", cases)


def configured(settings: Settings) -> list[str]:
    return list(settings.eval.personalization)
