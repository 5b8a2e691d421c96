"""The tool-call setting's held-out split: generated math problems that are scored, never trained on.

The environment serves `math/0` ... `math/<MATH_COUNT - 1>` when `envs.toolcall.math_count` reaches `MATH_COUNT`;
problems from `HELD_OUT_FROM` on are held out (never trained on, never in a pretraining corpus). The split keeps the
problems of `KINDS`, the kinds whose numbers are short (at most six digits in the question, five in the answer:
a small policy copies a number of one or two tokens reliably enough to learn from), the kinds interleaved, so any
prefix is balanced and every version is scored on the same problems. The scheduled evaluation (`episodes-toolcall`)
and the agents benchmark read the same list.
"""

from __future__ import annotations

from envs.toolcall.math_tasks import MathProblem, generate

MATH_COUNT = 3000
"""Math problems the environment serves for the split (`math/0` ... `math/2999`)."""
HELD_OUT_FROM = 2400
"""Problems from this index on are held out: scored, never trained on, never in the pretraining corpus."""
KINDS = ("digit_sum_power", "digit_sum_factorial", "digit_count", "nth_prime", "prime_count", "collatz")
"""The kinds of the split, in its interleaving order."""


def held_out() -> list[MathProblem]:
    """The held-out problems of `KINDS`, the kinds interleaved (any prefix is balanced)."""
    by_kind: dict[str, list[MathProblem]] = {k: [] for k in KINDS}
    for p in generate(MATH_COUNT)[HELD_OUT_FROM:]:
        if p.kind in by_kind:
            by_kind[p.kind].append(p)
    rounds = max(len(v) for v in by_kind.values())
    return [v[i] for i in range(rounds) for v in by_kind.values() if i < len(v)]


def task_ids() -> list[str]:
    """Every held-out task id, in the split's order."""
    return [p.task_id for p in held_out()]
