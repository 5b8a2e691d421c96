"""Step-wise advantages against tables computed by hand."""

from __future__ import annotations

import math

import pytest

from rlmath.stepwise import group_advantages, step_reward


def test_step_reward_is_outcome_plus_mean_of_valid_votes():
    assert step_reward(1.0, [1, 1, -1]) == pytest.approx(1 + 1 / 3)
    assert step_reward(0.0, [-1, None, 0]) == -1.0  # 0 and None are not valid step votes
    assert step_reward(0.5, []) == 0.5
    assert step_reward(0.0, [None, None]) == 0.0


def test_unequal_lengths_singleton_and_constant_buckets_by_hand():
    # episode 0: 3 steps, episode 1: 2 steps, episode 2: 1 step
    rewards = [[2.0, 1.0, 0.5], [0.0, 1.0], [1.0]]
    got = {(a.episode, a.step): a for a in group_advantages(rewards)}
    # step 0: {2, 0, 1}: mean 1, population std sqrt(2/3)
    s = math.sqrt(2 / 3)
    assert got[(0, 0)].advantage == pytest.approx(1 / s)
    assert got[(1, 0)].advantage == pytest.approx(-1 / s)
    assert got[(2, 0)].advantage == pytest.approx(0.0)
    # step 1: {1, 1} is constant: dropped for both episodes
    assert (0, 1) not in got and (1, 1) not in got
    # step 2: only episode 0 reached it: a singleton keeps its raw reward
    assert got[(0, 2)].advantage == 0.5 and got[(0, 2)].reward == 0.5
    assert len(got) == 4


def test_two_samples_standardise_to_plus_and_minus_one():
    got = group_advantages([[3.0], [1.0]])
    assert [(a.episode, a.advantage) for a in got] == [(0, pytest.approx(1.0)), (1, pytest.approx(-1.0))]


def test_an_all_constant_group_yields_nothing_and_an_empty_group_too():
    assert group_advantages([[1.0, 0.0], [1.0, 0.0]]) == []
    assert group_advantages([]) == []
    assert group_advantages([[], []]) == []


def test_order_is_by_episode_then_step():
    got = group_advantages([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
    assert [(a.episode, a.step) for a in got] == sorted((a.episode, a.step) for a in got)
