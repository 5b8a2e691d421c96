"""The held-out tasks of a general-agent setting, for its `episodes-<setting>` evaluation set.

Built-in splits are the agents benchmark's (bench.agents): `terminal`, its counting family's held-out tasks
(`count-0600` ... `count-0719`; the env pool serves them when the family's folder is in `envs.terminal.task_dirs`),
and `toolcall`, its held-out math problems (`math/2400` on, of the kinds it trains; served when
`envs.toolcall.math_count` reaches 3000). Each list is fixed and its order interleaves the task kinds, so any prefix
is balanced and every version is scored on the same tasks. `eval.held_out_tasks.<setting>` replaces a built-in
split, or gives one to a setting without (swe, gui, a plugin's). The ids are only names here: whether the env pool
serves them shows when the episodes open their tasks.
"""

from __future__ import annotations

from activities.eval_user_sets import EvalSetError
from openclaw_rl.settings import Settings


def held_out_task_ids(setting: str, settings: Settings) -> list[str]:
    """Every held-out task id of `setting`, in the split's order; EvalSetError when it has none."""
    own = settings.eval.held_out_tasks.get(setting)
    if own is not None:
        if not own:
            raise EvalSetError(f"eval.held_out_tasks.{setting} is empty")
        return list(own)
    if setting == "terminal":
        from bench.agents import counting_tasks

        return [counting_tasks.task_id(i) for i in range(counting_tasks.HELD_OUT_FROM, counting_tasks.TASKS)]
    if setting == "toolcall":
        from bench.agents import trajectories

        return [p.task_id for p in trajectories.held_out()]
    raise EvalSetError(
        f"the {setting} setting has no held-out split: terminal and toolcall have one; "
        f"give {setting}'s held-out task ids in eval.held_out_tasks.{setting}"
    )


def first_held_out(setting: str, count: int, settings: Settings) -> list[str]:
    return held_out_task_ids(setting, settings)[:count]
