"""Token-level advantages of the personal agent (paper section 4.2-4.3)."""

from __future__ import annotations

import torch


def opd_advantages(teacher_lp: torch.Tensor, old_lp: torch.Tensor) -> torch.Tensor:
    """A_t = log pi_teacher(a_t | s_enhanced) - log pi_old(a_t | s_t), per response token. Shapes [T]."""
    if teacher_lp.shape != old_lp.shape:
        raise ValueError(
            f"teacher and rollout log-probs differ in length: {tuple(teacher_lp.shape)} vs {tuple(old_lp.shape)}"
        )
    return teacher_lp - old_lp


def combined_advantages(
    reward: float, teacher_lp: torch.Tensor | None, old_lp: torch.Tensor, w_binary: float = 1.0, w_opd: float = 1.0
) -> torch.Tensor:
    """A_t = w_binary * r + w_opd * (teacher_lp - old_lp); no teacher -> the OPD term is 0. Shape [T]."""
    rl = torch.full_like(old_lp, w_binary * reward)
    if teacher_lp is None:
        return rl
    return rl + w_opd * opd_advantages(teacher_lp, old_lp)
