"""MiniWoB++ tasks as the `miniwob` package ships them (HTML under `miniwob/html/miniwob/`, opened as file:// URLs).

A task id is the MiniWoB++ name, optionally with the task's own seed:
`click-button` (seed 0) or `click-button/17`. The seed goes to the page's
`Math.seedrandom` before the task generates its problem, so an id names one
problem instance, the same on every worker (a task group's episodes share it).
"""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from envs.base import UnknownTask

_SEED = re.compile(r"0|[1-9][0-9]{0,9}")

TESTED = (
    "click-button",
    "click-link",
    "click-checkboxes",
    "enter-text",
    "focus-text",
    "click-dialog",
    "click-tab",
    "enter-password",
    "login-user",
    "choose-list",
    "use-autocomplete",
)
"""Tasks whose oracle and wrong action sequences are tested (envs/gui/oracle.py); every other task runs too."""


class GuiTask(BaseModel):
    name: str
    seed: int
    html: Path

    @property
    def task_id(self) -> str:
        return self.name if self.seed == 0 else f"{self.name}/{self.seed}"

    @property
    def url(self) -> str:
        return self.html.as_uri()


@lru_cache(maxsize=1)
def html_dir() -> Path:
    """The package's task pages, found without importing it (its __init__ registers gymnasium environments)."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the gui setting needs the `miniwob` package (pip install miniwob)")
    return Path(list(spec.submodule_search_locations)[0]) / "html" / "miniwob"


@lru_cache(maxsize=1)
def task_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in html_dir().glob("*.html")))


def parse_task_id(task_id: str) -> GuiTask:
    name, _, seed = task_id.partition("/")
    if name not in task_names() or (seed and not _SEED.fullmatch(seed)) or (_ and not seed):
        raise UnknownTask(task_id)
    return GuiTask(name=name, seed=int(seed or 0), html=html_dir() / f"{name}.html")
