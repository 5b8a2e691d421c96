"""Means, standard errors and the paired gain between two evaluated versions of the policy.

The unit of the paired comparison is the held-out problem: each problem's mean score over its sampled first answers
in one version against the same problem's in another. Problems differ in how easy their preferred style is, so
pairing removes that spread from the noise; samples of one problem are not independent draws of the whole
evaluation, so they are averaged before the problems are compared.
"""

from __future__ import annotations

import math
import statistics

from pydantic import BaseModel


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error, ignoring NaN (a scorer's missing score); NaN when nothing is left."""
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return float("nan"), float("nan")
    m = statistics.fmean(vals)
    se = statistics.stdev(vals) / math.sqrt(len(vals)) if len(vals) > 1 else 0.0
    return m, se


class PairedGain(BaseModel):
    """How much `after` scores above `before` on the same problems."""

    gain: float
    """Mean over problems of (after - before), each side a problem's mean score over its samples."""
    se: float
    """Standard error of `gain` (the problems' differences' spread / sqrt(problems))."""
    z: float
    """gain / se: how many standard errors of evaluation noise the gain is (inf: no spread and a gain)."""
    problems: int
    """Problems compared (those scored in both versions)."""


def paired_gain(before: list[float], after: list[float]) -> PairedGain:
    """The gain from `before` to `after`, per-problem means given in the same problem order."""
    if len(before) != len(after):
        raise ValueError(f"paired problems differ in number: {len(before)} before, {len(after)} after")
    diffs = [a - b for b, a in zip(before, after) if not (math.isnan(a) or math.isnan(b))]
    if len(diffs) < 2:
        raise ValueError(f"a paired gain needs at least 2 problems scored in both versions, got {len(diffs)}")
    gain, se = mean_se(diffs)
    if se > 0:
        z = gain / se
    else:
        z = 0.0 if gain == 0 else math.copysign(math.inf, gain)
    return PairedGain(gain=round(gain, 4), se=round(se, 4), z=round(z, 2), problems=len(diffs))


def gain_text(g: dict) -> str:
    """A paired gain as the tables print it: `+0.25 ± 0.05 (z +5.0)`."""
    return f"{g['gain']:+.2f} ± {g['se']:.2f} (z {g['z']:+.1f})"


def score_cell(run: dict, version: int) -> str:
    """A version's mean ± s.e. from a run's `versions`, or n/a when it was not scored."""
    e = run.get("versions", {}).get(str(version))
    return "n/a" if not e else f"{e['mean']:.2f} ± {e['se']:.2f}"
