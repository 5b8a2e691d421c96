"""Reference policies for the tested tasks: what a correct agent does, and a plausible wrong one.

Both read only what the agent reads (the task's utterance and the latest page
listing), so tests, scripted policies and benchmarks can play them through the
real environment, step by step. Each returns the next step's tool calls as
(name, arguments) pairs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Call = tuple[str, dict]

_LINE = re.compile(r'^(?P<indent> *)\[(?P<id>\d+)\] (?P<role>\S+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?(?P<rest>.*)$')


@dataclass
class Item:
    id: int
    depth: int
    role: str
    name: str
    rest: str


def parse_listing(text: str) -> list[Item]:
    """The element lines of a page listing (anything else in `text` is skipped)."""
    items = []
    for line in text.splitlines():
        if m := _LINE.match(line):
            name = re.sub(r"\\(.)", r"\1", m["name"] or "")
            items.append(Item(int(m["id"]), len(m["indent"]) // 2, m["role"], name, m["rest"]))
    return items


def latest_listing(text: str) -> str:
    """The last `The page:` listing in a prompt or an observation."""
    return text.rsplit("The page:\n", 1)[-1]


def _quoted(utterance: str) -> list[str]:
    return re.findall(r'"([^"]*)"', utterance)


def _first(items: list[Item], role: str | None = None, name: str | None = None, not_name: str | None = None) -> Item:
    for it in items:
        if (role is None or it.role == role) and (name is None or it.name == name):
            if not_name is None or it.name != not_name:
                return it
    raise LookupError(f"no {role or 'element'} {name or ''!r} on the page")


def _submit(items: list[Item], label: str = "Submit") -> Call:
    return ("click", {"element": _first(items, "button", label).id})


def _checkbox_of(items: list[Item], label: Item) -> Item:
    i = items.index(label)
    return next(it for it in items[i + 1 :] if it.role == "checkbox" and it.depth > label.depth)


def _autocomplete(utterance: str, items: list[Item], wrong: bool) -> list[Call]:
    start, *end = _quoted(utterance)
    box = _first(items, "textbox")
    if wrong:
        return [("type", {"element": box.id, "text": "zzz"}), _submit(items)]
    menu = [it for it in items if it.role in ("div", "li", "menuitem") and it.name.startswith(start)]
    pick = next((it for it in menu if not end or it.name.endswith(end[0])), None)
    if pick is None:
        return [("type", {"element": box.id, "text": start})]  # the menu shows once the prefix is typed
    return [("click", {"element": pick.id}), _submit(items)]


def next_calls(task: str, utterance: str, listing: str, wrong: bool = False) -> list[Call]:
    """The next step's calls on MiniWoB++ task `task` (its name, without the seed)."""
    items = parse_listing(listing)
    q = _quoted(utterance)
    if task == "click-button":
        if wrong:  # another button, or any other element when the target is the only one
            others = [it for it in items if it.name != q[0]]
            pick = next((it for it in others if it.role == "button"), others[0])
            return [("click", {"element": pick.id})]
        return [("click", {"element": _first(items, "button", q[0]).id})]
    if task == "click-link":
        links = [it for it in items if it.role in ("span", "link", "a")]
        pick = next(it for it in links if (it.name != q[0]) == wrong)
        return [("click", {"element": pick.id})]
    if task == "click-checkboxes":
        m = re.match(r"Select (.*) and click Submit", utterance)
        wanted = set() if m is None or m[1] == "nothing" else set(m[1].split(", "))
        labels = [it for it in items if it.role == "label"]
        pick = [lb for lb in labels if (lb.name in wanted) != wrong]
        return [("click", {"element": _checkbox_of(items, lb).id}) for lb in pick] + [_submit(items)]
    if task == "enter-text":
        text = "wrong" if wrong else q[0]
        return [("type", {"element": _first(items, "textbox").id, "text": text}), _submit(items)]
    if task == "focus-text":
        return [("done", {})] if wrong else [("click", {"element": _first(items, "textbox").id})]
    if task == "click-dialog":
        return [("done", {})] if wrong else [("click", {"element": _first(items, "button", "Close").id})]
    if task == "click-tab":
        return _click_tab(utterance, items, wrong)
    if task == "enter-password":
        boxes = [it for it in items if it.role == "textbox"]
        texts = [q[0], q[0] + ("x" if wrong else "")]
        return [("type", {"element": b.id, "text": t}) for b, t in zip(boxes, texts)] + [_submit(items)]
    if task == "login-user":
        user = next(it for it in items if it.role == "textbox" and "type=password" not in it.rest)
        password = next(it for it in items if it.role == "textbox" and "type=password" in it.rest)
        return [
            ("type", {"element": user.id, "text": q[0]}),
            ("type", {"element": password.id, "text": q[1] + ("x" if wrong else "")}),
            _submit(items, "Login"),
        ]
    if task == "choose-list":
        target = re.match(r"Select (.*) from the list", utterance)[1]
        options = [it for it in items if it.role == "option"]
        pick = next(it for it in options if (it.name != target) == wrong)
        return [("click", {"element": pick.id}), _submit(items)]
    if task == "use-autocomplete":
        return _autocomplete(utterance, items, wrong)
    raise KeyError(f"no oracle for {task}")


def _click_tab(utterance: str, items: list[Item], wrong: bool) -> list[Call]:
    n = re.search(r"Tab #(\d+)", utterance)[1]
    tabs = [it for it in items if it.role == "tab"]
    pick = next(it for it in tabs if (it.name != f"Tab #{n}") == wrong)
    return [("click", {"element": pick.id})]
