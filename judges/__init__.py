"""Judges: turn (assistant output, next state) into PRM votes and hindsight hints."""

from judges.base import Judge, JudgeCallError, JudgeContext
from judges.factory import make_judge

__all__ = ["Judge", "JudgeCallError", "JudgeContext", "make_judge"]
