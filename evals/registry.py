"""Evaluation sets by kind: a set is named `<kind>-<name>`, and its kind says how it loads.

| kind | a set | loads with |
| --- | --- | --- |
| `personalization` | `personalization-student`, `personalization-teacher` | evals.personalization.held_out |
| `user` | `user-<name>`: the JSONL file `eval.user_sets[name]` | evals.user_sets |
| `episodes` | `episodes-<setting>`: the setting's held-out tasks | evals.episodes (run as episodes) |

`KINDS` holds each kind's loader (None for `episodes`: its tasks run as episodes in the EvaluationWorkflow, not
as chats) and which of its sets the settings name; a new kind is one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contracts.evaluation import EPISODES_PREFIX
from evals import episodes, user_sets
from evals.base import EvalSet, EvalSetError
from evals.personalization import held_out as personalization
from openclaw_rl.settings import Settings


@dataclass(frozen=True)
class SetKind:
    load: Callable[[str, str, Settings], EvalSet] | None
    """(the set's whole name, the name after `<kind>-`, settings) -> its cases; None: run as episodes."""
    configured: Callable[[Settings], list[str]]
    """The names after `<kind>-` that `settings.eval` asks for, in order."""


KINDS: dict[str, SetKind] = {
    "personalization": SetKind(personalization.load, personalization.configured),
    "user": SetKind(user_sets.load, user_sets.configured),
    EPISODES_PREFIX.removesuffix("-"): SetKind(None, episodes.configured),
}
"""Every kind, in the order its sets are evaluated."""


def set_name(kind: str, name: str) -> str:
    return f"{kind}-{name}"


def configured_sets(settings: Settings) -> list[str]:
    """The sets `settings.eval` names, in the order they are evaluated."""
    return [set_name(kind, name) for kind, k in KINDS.items() for name in k.configured(settings)]


def load_set(name: str, settings: Settings) -> EvalSet:
    """A set answered by the policy as chats; EvalSetError for an unknown name or bad data."""
    kind, sep, rest = name.partition("-")
    k = KINDS.get(kind)
    if not sep or k is None or k.load is None:
        raise EvalSetError(
            f"unknown evaluation set {name!r}: personalization-student, personalization-teacher, user-<name> or "
            "episodes-<setting>"
        )
    return k.load(name, rest, settings)
