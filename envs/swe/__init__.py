"""The SWE general-agent setting: fix an issue in a small repository, one shell command per step (mini-swe-agent)."""

from envs.swe.env import SweEnv, TaskSetupFailed
from envs.swe.source import BUILTIN_INSTANCES, SweTasks
from envs.swe.task import MalformedInstance, SweInstance, load_instances

__all__ = [
    "BUILTIN_INSTANCES",
    "MalformedInstance",
    "SweEnv",
    "SweInstance",
    "SweTasks",
    "TaskSetupFailed",
    "load_instances",
]
