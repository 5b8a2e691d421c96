"""The GUI agent's tools (OpenAI function definitions) and their arguments, checked before anything touches the page.

Elements are named by the ids of the latest page listing (`[3] button "Submit"`);
a model that writes `"[3]"` or `"3"` for `3` is understood.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_ELEMENT = {"type": "integer", "description": "the element's id from the page listing, e.g. 3 for [3]"}

DEFINITIONS = [
    _fn("click", "Click an element of the page.", {"element": _ELEMENT}, ["element"]),
    _fn(
        "type",
        "Replace the text of an input field (or text area) with `text`: it is focused, cleared and typed into.",
        {"element": _ELEMENT, "text": {"type": "string"}},
        ["element", "text"],
    ),
    _fn(
        "key",
        "Press a key or combination on the focused element: Enter, Tab, Backspace, Escape, ArrowDown, ctrl+a, ...",
        {"key": {"type": "string"}},
        ["key"],
    ),
    _fn(
        "scroll",
        "Scroll the page, or the element given, by about a third of the view.",
        {"direction": {"type": "string", "enum": ["up", "down", "left", "right"]}, "element": _ELEMENT},
        ["direction"],
    ),
    _fn("done", "Say the task is finished (only if the page has not ended it already).", {}, []),
]
NAMES = tuple(d["function"]["name"] for d in DEFINITIONS)

_ID = re.compile(r"\s*\[?\s*(\d{1,6})\s*\]?\s*")


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _ElementArgs(_Args):
    element: int

    @field_validator("element", mode="before")
    @classmethod
    def _element(cls, v: Any) -> Any:
        if isinstance(v, str) and (m := _ID.fullmatch(v)):
            return int(m.group(1))
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError("must be an element id (an integer from the page listing)")
        return v


class ClickArgs(_ElementArgs):
    pass


class TypeArgs(_ElementArgs):
    text: str


class KeyArgs(_Args):
    key: str


class ScrollArgs(_Args):
    direction: Literal["up", "down", "left", "right"]
    element: int | None = None

    @field_validator("element", mode="before")
    @classmethod
    def _element(cls, v: Any) -> Any:
        return None if v is None else _ElementArgs._element(v)


class DoneArgs(_Args):
    model_config = ConfigDict(extra="ignore")  # done takes nothing; stray arguments are harmless


_MODELS: dict[str, type[_Args]] = {
    "click": ClickArgs,
    "type": TypeArgs,
    "key": KeyArgs,
    "scroll": ScrollArgs,
    "done": DoneArgs,
}


class BadCall(ValueError):
    """A call the agent can fix: unknown tool or bad arguments (reported to it as an error result)."""


def parse(name: str, arguments: dict[str, Any]) -> _Args:
    model = _MODELS.get(name)
    if model is None:
        raise BadCall(f"unknown tool {name!r}; the tools are {', '.join(NAMES)}")
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or name}: {e['msg']}" for e in exc.errors())
        raise BadCall(f"bad arguments for {name}: {problems}") from None


# Selenium's key names for what models write.
_KEYS = {
    "enter": "ENTER",
    "return": "RETURN",
    "tab": "TAB",
    "backspace": "BACKSPACE",
    "delete": "DELETE",
    "escape": "ESCAPE",
    "esc": "ESCAPE",
    "space": "SPACE",
    "arrowup": "ARROW_UP",
    "up": "ARROW_UP",
    "arrowdown": "ARROW_DOWN",
    "down": "ARROW_DOWN",
    "arrowleft": "ARROW_LEFT",
    "left": "ARROW_LEFT",
    "arrowright": "ARROW_RIGHT",
    "right": "ARROW_RIGHT",
    "home": "HOME",
    "end": "END",
    "pageup": "PAGE_UP",
    "pagedown": "PAGE_DOWN",
    "ctrl": "CONTROL",
    "control": "CONTROL",
    "shift": "SHIFT",
    "alt": "ALT",
    "meta": "META",
    "cmd": "META",
}
_MODIFIERS = {"CONTROL", "SHIFT", "ALT", "META"}


def key_chord(key: str) -> tuple[list[str], str]:
    """`ctrl+a` -> (modifier key codes, the key's code or character); `BadCall` for what no keyboard has."""
    from selenium.webdriver.common.keys import Keys

    parts = [p.strip() for p in key.split("+")] if key.strip() != "+" else ["+"]
    if not parts or any(not p for p in parts):
        raise BadCall(f"bad key {key!r}: name one key, optionally with modifiers, e.g. Enter or ctrl+a")
    codes = []
    for p in parts:
        name = _KEYS.get(p.lower().replace("_", "").replace(" ", ""))
        if name is not None:
            codes.append((name, getattr(Keys, name)))
        elif len(p) == 1:
            codes.append((p, p))
        elif re.fullmatch(r"[Ff]([1-9]|1[0-2])", p):
            codes.append((p.upper(), getattr(Keys, p.upper())))
        else:
            raise BadCall(f"unknown key {p!r} in {key!r}: use Enter, Tab, Backspace, Escape, ArrowDown, a letter, ...")
    *mods, last = codes
    if any(m[0] not in _MODIFIERS for m in mods):
        raise BadCall(f"bad key {key!r}: only ctrl, shift, alt or meta may come before the last +")
    return [m[1] for m in mods], last[1]
