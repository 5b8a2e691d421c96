"""The schedule's cadence (workflows.evaluation._skip): the newest version once versions crossed a multiple of N
since the last evaluated one, so a multiple published between two checks is never skipped for good."""

from __future__ import annotations

import pytest

from contracts.evaluation import EvalConfig, EvalInput, EvalPlan
from workflows.evaluation import _skip

SETS = ["personalization-student"]


def _scheduled(version: int, last: int | None, every: int = 10, **plan) -> str | None:
    inp = EvalInput(config=EvalConfig.model_construct(sets=SETS, every_versions=every))
    return _skip(inp, EvalPlan(version=version, sets=SETS, last_evaluated=last, **plan))


@pytest.mark.parametrize("version, last, evaluated", [
    (9, None, False), (10, None, True), (12, None, True),  # the first multiple, or the first check past it
    (13, 12, False), (19, 12, False), (21, 12, True),  # 20 came and went between two checks: 21 is evaluated
    (20, 10, True), (35, 10, True),  # two multiples crossed: the newest version, once
])  # fmt: skip
def test_the_newest_version_once_a_multiple_was_crossed(version, last, evaluated):
    why = _scheduled(version, last)
    assert (why is None) == evaluated, why


def test_asked_for_versions_and_per_user_training():
    asked = EvalInput(config=EvalConfig.model_construct(sets=SETS, every_versions=10), version=13)
    assert _skip(asked, EvalPlan(version=13, sets=SETS, last_evaluated=12)) is None  # `eval run --version 13`
    assert _scheduled(0, None) and "base model" in _scheduled(0, None)
    assert _scheduled(10, None, every=0) is None  # no cadence: the latest whenever asked
    why = _scheduled(20, 10, not_evaluable="training.adapters = per_user: ...")
    assert why.startswith("training.adapters = per_user")
    assert _skip(asked, EvalPlan(version=13, sets=[], last_evaluated=13)) == "version 13 was evaluated already"
