"""The arithmetic of a canary (contracts.canary): when the pairwise verdicts are evidence enough to promote a candidate
or roll it back. No I/O: activities.canary and workflows.canary do that (store.canaries picks each turn's arm).

Each judged turn gives the candidate's answer against the incumbent's to the same prompt, judged in both orders
(contracts.progress.Verdicts: "new" is the candidate). A turn the candidate won both ways is a win, lost both ways a
loss; anything else (a split: position bias, or a tie) says nothing. Wald's sequential probability ratio test on the
decisive turns: H0, the candidate wins a share `worse` of them; H1, a share `1 - worse`. It promotes once the
likelihood ratio passes (1 - beta) / alpha and rolls back once it falls under beta / (1 - alpha); so a candidate no
better than `worse` is promoted with probability at most `alpha`. A candidate undecided after `max_turns` judged
turns is rolled back: the incumbent stays unless the evidence says otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from contracts.canary import Evidence
from contracts.progress import Verdicts


def outcome(v: Verdicts) -> str:
    """`win`, `loss` or `even` for the candidate on one turn judged both ways."""
    if v.new_first == v.old_first == "new":
        return "win"
    if v.new_first == v.old_first == "old":
        return "loss"
    return "even"


def add(evidence: Evidence, verdicts: Iterable[Verdicts]) -> Evidence:
    counts = evidence.model_copy()
    for v in verdicts:
        o = outcome(v)
        counts.turns += 1
        counts.wins += o == "win"
        counts.losses += o == "loss"
    return counts


def log_likelihood_ratio(e: Evidence, worse: float) -> float:
    better = 1.0 - worse
    return e.wins * math.log(better / worse) + e.losses * math.log(worse / better)


def decision(e: Evidence, worse: float, alpha: float, beta: float, max_turns: int) -> tuple[str | None, str]:
    """(`promote`, `roll back` or None to judge more turns; why, in words)."""
    llr = log_likelihood_ratio(e, worse)
    said = f"{e.wins} wins, {e.losses} losses, {e.turns - e.wins - e.losses} even in {e.turns} turns (LLR {llr:+.2f})"
    upper, lower = math.log((1 - beta) / alpha), math.log(beta / (1 - alpha))
    if llr >= upper:
        return "promote", f"promoted: {said} >= {upper:.2f}"
    if llr <= lower:
        return "roll back", f"rolled back: {said} <= {lower:.2f}"
    if e.turns >= max_turns:
        return "roll back", f"rolled back, undecided after {max_turns} turns: {said}"
    return None, f"judging: {said}"
