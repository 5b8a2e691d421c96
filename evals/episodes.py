"""The `episodes-<setting>` sets: a general-agent setting's held-out tasks, run as episodes that publish no samples.

The environments own their generated families' held-out splits (`SPLITS`, by setting): `terminal`, the counting
family's held-out tasks (`count-0600` ... `count-0719`, envs.terminal.counting_tasks; the env pool serves them when
the family's folder is in `envs.terminal.task_dirs`), and `toolcall`, its held-out math problems (`math/2400` on, of
the short-number kinds, envs.toolcall.held_out; served when `envs.toolcall.math_count` reaches 3000). Each list is
fixed and its order interleaves the task kinds, so any prefix is balanced and every version is scored on the same
tasks. `eval.held_out_tasks.<setting>` replaces a built-in split, or gives one to a setting without (swe, gui, a
plugin's). The ids are only names here: whether the env pool serves them shows when the episodes open their tasks.
"""

from __future__ import annotations

from collections.abc import Callable

from envs.terminal import counting_tasks
from envs.toolcall import held_out as toolcall_split
from evals.base import EvalSetError
from openclaw_rl.settings import Settings

SPLITS: dict[str, Callable[[], list[str]]] = {
    "terminal": counting_tasks.held_out_task_ids,
    "toolcall": toolcall_split.task_ids,
}
"""Built-in held-out splits by setting: every task id, in the split's order."""


def held_out_task_ids(setting: str, settings: Settings) -> list[str]:
    """Every held-out task id of `setting`, in the split's order; EvalSetError when it has none."""
    own = settings.eval.held_out_tasks.get(setting)
    if own is not None:
        if not own:
            raise EvalSetError(f"eval.held_out_tasks.{setting} is empty")
        return list(own)
    split = SPLITS.get(setting)
    if split is None:
        raise EvalSetError(
            f"the {setting} setting has no held-out split: {' and '.join(SPLITS)} have one; "
            f"give {setting}'s held-out task ids in eval.held_out_tasks.{setting}"
        )
    return split()


def first_held_out(setting: str, count: int, settings: Settings) -> list[str]:
    return held_out_task_ids(setting, settings)[:count]


def configured(settings: Settings) -> list[str]:
    return list(settings.eval.episodes)
