"""The benchmark's paired gain, against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest

from bench.stats import mean_se, paired_gain


def test_paired_gain_by_hand():
    # differences 0.25, 0.5, 0.75: mean 0.5, sd 0.25, s.e. 0.25 / sqrt(3) = 0.1443, z = 3.46
    g = paired_gain([0.0, 0.25, 0.0], [0.25, 0.75, 0.75])
    assert (g.gain, g.se, g.z, g.problems) == (0.5, 0.1443, 3.46, 3)
    # the same spread between problems in both versions cancels: only the differences count
    assert paired_gain([0.0, 1.0], [0.25, 1.0]).gain == 0.125


def test_paired_gain_edges():
    assert paired_gain([0.5, 0.5], [0.5, 0.5]).z == 0.0
    assert paired_gain([0.0, 0.25], [0.5, 0.75]).z == math.inf  # a gain with no spread
    assert paired_gain([0.0, math.nan, 0.5], [0.5, 1.0, 1.0]).problems == 2  # a missing score drops its problem
    with pytest.raises(ValueError, match="differ in number"):
        paired_gain([0.0, 0.5], [0.5])
    with pytest.raises(ValueError, match="at least 2 problems"):
        paired_gain([0.0], [0.5])
    assert mean_se([1.0, math.nan, 0.0]) == (0.5, 0.5)
