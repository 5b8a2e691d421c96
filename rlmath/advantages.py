"""Token-level advantages of the personal agent (paper section 4.2-4.3).

Plain Python, rounded to float32 after every operation as torch's float32 tensors were: the same bits as before, and
the judge pool, which publishes the samples, starts without importing torch (about a CPU-second a start)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence


def _f32(values: Sequence[float]) -> list[float]:
    return array("f", values).tolist()


def opd_advantages(teacher_lp: Sequence[float], old_lp: Sequence[float]) -> list[float]:
    """A_t = log pi_teacher(a_t | s_enhanced) - log pi_old(a_t | s_t), per response token."""
    if len(teacher_lp) != len(old_lp):
        raise ValueError(f"teacher and rollout log-probs differ in length: {len(teacher_lp)} vs {len(old_lp)}")
    return _f32([t - o for t, o in zip(_f32(teacher_lp), _f32(old_lp), strict=True)])


def combined_advantages(
    reward: float,
    teacher_lp: Sequence[float] | None,
    old_lp: Sequence[float],
    w_binary: float = 1.0,
    w_opd: float = 1.0,
) -> list[float]:
    """A_t = w_binary * r + w_opd * (teacher_lp - old_lp); no teacher -> the OPD term is 0. One value per token."""
    (rl,) = _f32([w_binary * reward])
    if teacher_lp is None:
        return [rl] * len(old_lp)
    (w,) = _f32([w_opd])
    return _f32([rl + x for x in _f32([w * d for d in opd_advantages(teacher_lp, old_lp)])])
