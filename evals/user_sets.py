"""A user's own evaluation set: a JSONL file, one item a line, validated before anything is generated.

    {"messages": [{"role": "user", "content": "What is 7 * 6?"}], "expected": "42", "match": "contains"}

`messages`: the chat so far (system, user and assistant turns), ending with the user's; the policy answers it.
`expected`: what the answer must hold. `match`: `exact` (the whole answer, trimmed), `contains` (default) or
`regex` (Python `re.search`). `ignore_case` (default true) applies to all three. `id` names the item (default: its
line number). Blank lines and lines starting with `#` are skipped. A bad line stops the set with its line number
and what is wrong (EvalSetError), so a typo never silently shrinks the set. The set `user-<name>` is the file
`eval.user_sets[name]`, scored by `accuracy` (the share of answers that match).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evals.base import EvalCase, EvalSet, EvalSetError
from openclaw_rl.settings import Settings

_THINK = re.compile(r"<think>.*?</think>", re.S)


class EvalMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str


class EvalItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages: list[EvalMessage] = Field(min_length=1)
    expected: str = Field(min_length=1)
    match: Literal["exact", "contains", "regex"] = "contains"
    ignore_case: bool = True
    id: str | None = None

    @field_validator("messages")
    @classmethod
    def _ends_with_the_user(cls, messages: list[EvalMessage]) -> list[EvalMessage]:
        if messages[-1].role != "user":
            raise ValueError("the last message must be the user's (the policy answers it)")
        return messages

    @model_validator(mode="after")
    def _regex_compiles(self) -> EvalItem:
        if self.match == "regex":
            try:
                re.compile(self.expected)
            except re.error as exc:
                raise ValueError(f"expected is not a valid regular expression: {exc}") from exc
        return self

    def matches(self, answer: str) -> bool:
        """Whether the answer (its `<think>` part left out) holds what is expected."""
        text = _THINK.sub("", answer).strip()
        flags = re.I if self.ignore_case else 0
        if self.match == "regex":
            return re.search(self.expected, text, flags) is not None
        want, got = (
            (self.expected.strip(), text) if not self.ignore_case else (self.expected.strip().lower(), text.lower())
        )
        return got == want if self.match == "exact" else want in got


def load_user_set(path: Path) -> list[EvalItem]:
    path = Path(path).expanduser()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalSetError(f"{path}: cannot be read: {exc}") from exc
    items: list[EvalItem] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            item = EvalItem.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise EvalSetError(f"{path} line {number}: not a JSON object: {exc.msg} (column {exc.colno})") from exc
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'line'}: {e['msg']}"
                for e in exc.errors(include_url=False, include_input=False)
            )
            raise EvalSetError(f"{path} line {number}: {problems}") from exc
        items.append(item if item.id else item.model_copy(update={"id": f"line-{number}"}))
    if not items:
        raise EvalSetError(f"{path}: no items (one JSON object a line)")
    return items


def load(name: str, user_set: str, settings: Settings) -> EvalSet:
    path = settings.eval.user_sets.get(user_set)
    if path is None:
        raise EvalSetError(f"no user set {name!r}: eval.user_sets names {sorted(settings.eval.user_sets) or 'none'}")
    items = load_user_set(path)
    cases = [EvalCase([m.model_dump() for m in it.messages], lambda a, it=it: float(it.matches(a))) for it in items]
    return EvalSet(name, "accuracy", cases)


def configured(settings: Settings) -> list[str]:
    return list(settings.eval.user_sets)
