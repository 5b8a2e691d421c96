"""Judges: turn (assistant output, next state) into PRM votes and hindsight hints."""

from judges.base import Judge, JudgeContext, make_judge

__all__ = ["Judge", "JudgeContext", "make_judge"]
