"""The canary's arithmetic (evals/canary.py): what two verdicts make, and when the sequential test promotes, rolls
back or asks for more (the arm a turn takes: tests/store/test_canary_records.py)."""

from __future__ import annotations

from contracts.canary import Evidence
from contracts.progress import Verdicts
from evals import canary

WIN = Verdicts(new_first="new", old_first="new")
LOSS = Verdicts(new_first="old", old_first="old")
SPLIT = Verdicts(new_first="new", old_first="old")  # position bias: each order picked the answer shown first


def test_only_a_verdict_both_orders_agree_on_counts():
    e = canary.add(Evidence(), [WIN, LOSS, SPLIT, Verdicts(new_first="tie", old_first="tie")])
    assert e == Evidence(turns=4, wins=1, losses=1)


def test_wins_promote_losses_roll_back_and_an_even_run_stops_at_the_turn_limit():
    args = dict(worse=0.35, alpha=0.05, beta=0.10, max_turns=40)
    decide = lambda e: canary.decision(e, **args)[0]  # noqa: E731
    assert decide(canary.add(Evidence(), [WIN] * 4)) is None  # LLR 2.48 < ln(0.9/0.05) = 2.89
    assert decide(canary.add(Evidence(), [WIN] * 5)) == "promote"
    assert decide(canary.add(Evidence(), [LOSS] * 4)) == "roll back"  # LLR -2.48 <= ln(0.1/0.95) = -2.25
    assert decide(canary.add(Evidence(), [WIN, LOSS] * 10)) is None
    verdict, why = canary.decision(canary.add(Evidence(), [SPLIT] * 40), **args)
    assert verdict == "roll back" and "undecided after 40 turns" in why


def test_a_candidate_no_better_than_worse_is_promoted_at_most_alpha_of_the_time():
    import random

    rng = random.Random(7)
    promoted = 0
    for _ in range(2000):
        e = Evidence()
        while (verdict := canary.decision(e, 0.35, 0.05, 0.10, 40)[0]) is None:
            e = canary.add(e, [WIN if rng.random() < 0.35 else LOSS])
        promoted += verdict == "promote"
    assert promoted / 2000 <= 0.05
