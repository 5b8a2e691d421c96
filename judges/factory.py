"""The judge factory: a registry keyed by the settings' judge `type`."""

from __future__ import annotations

from judges.base import Judge
from judges.heuristic import HeuristicJudge
from judges.llm import LlmJudge
from openclaw_rl.settings import HeuristicJudgeSettings, LlmJudgeSettings, Settings


def make_judge(settings: Settings) -> Judge:
    cfg = settings.judge()
    if isinstance(cfg, HeuristicJudgeSettings):
        return HeuristicJudge()
    if isinstance(cfg, LlmJudgeSettings):
        return LlmJudge(cfg, settings)
    raise ValueError(f"unknown judge type {cfg!r}")
