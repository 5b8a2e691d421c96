"""A GUI episode: one MiniWoB++ task, seeded, in a tab of the worker's browser; its own reward is the verdict.

Each state is a screenshot (a PNG in the episode's folder under the data
directory; only its path travels, in the stored observation) and a listing of
the page's visible elements with ids, which the agent's actions name. Every
agent mistake is answered, never raised: an unknown tool, bad arguments, an id
not on the page, a click that lands on another element. A dead browser raises
`BrowserCrashed` (the episode's attempt is lost; the env pool says so).

Outcome: MiniWoB++'s raw reward r in [-1, 1] (before its time discount) of an
episode the page ended, mapped to (r + 1) / 2, so success is 1, failure 0 and
a task's partial credit stays in between; an episode the page did not end
(the agent stopped, or ran out of steps) scores 0.
"""

from __future__ import annotations

import base64
import time
import uuid
from pathlib import Path
from typing import Any

import structlog

from envs.base import Action, Observation, ToolCallAction, ToolResult
from envs.gui import actions
from envs.gui import page as js
from envs.gui.browser import Browser, Page
from envs.gui.task import GuiTask
from openclaw_rl.settings import GuiSettingConfig

log = structlog.get_logger(__name__)

TASK_AREA = (160, 210)
"""CSS pixels: every MiniWoB++ task lives in this box at the page's top left (what the screenshot keeps)."""
END_AREA = (330, 210)
"""The last screenshot also keeps MiniWoB++'s panel beside the task, which shows the reward the page gave."""
READY_WAIT_S = 5.0
TYPE_EXTRA_SETTLE_S = 0.4
"""Typing triggers debounced widgets (jQuery UI's autocomplete waits 300 ms): give them time to show."""
OPENING_SCREENSHOT = "reset.png"
"""The state the agent first sees, beside `step-NNN.png` (the state after each step) in the episode's folder."""

SYSTEM_PROMPT = """\
You are a GUI agent using a web page in a browser. You see the task and a listing of the page's visible elements, \
one per line: an id in brackets, the element's role, its text and its state, e.g. [3] button "Submit" \
(indentation shows nesting). After each step you see the page again.

You act only by calling tools, and you may make several calls in one step; you have at most {max_steps} steps.
- click(element): click an element.
- type(element, text): replace the text of an input field with `text`.
- key(key): press a key on the focused element (Enter, Tab, Backspace, ArrowDown, ctrl+a, ...).
- scroll(direction, element?): scroll the page, or an element, up, down, left or right.
- done(): say you are finished.

Many tasks end by themselves once you complete them (for example when you click Submit): then the episode is over. \
The task must be finished within {time_s:g} seconds."""


def outcome_of(status: js.Status | None) -> float:
    """(raw + 1) / 2 for an episode the page ended; 0 for one it did not."""
    if status is None or not status.done:
        return 0.0
    return min(1.0, max(0.0, (status.raw_reward + 1.0) / 2.0))


class GuiEnv:
    setting = "gui"

    def __init__(self, task: GuiTask, browser: Browser, config: GuiSettingConfig, screens_dir: Path):
        self.task = task
        self.browser = browser
        self.config = config
        self.screens_dir = screens_dir
        self.max_steps = config.max_steps
        self.page: Page | None = None
        self.folder: Path | None = None
        self.state: js.PageState | None = None
        self.steps = 0
        self.final: js.Status | None = None
        """The page's status when the episode ended (by the page, or the agent's done); None while it runs."""
        self.ended = False

    # ---- Environment ---------------------------------------------------------------
    def reset(self) -> list[dict[str, Any]]:
        self.close()
        self.steps, self.final, self.ended, self.state = 0, None, False, None
        self.page = self.browser.open_page(self.task.url)
        limit_ms = int(self.config.time_limit_s * 1000)
        time_ms = self.browser.run(self.page, lambda d: d.execute_script(js.START, self.task.seed, limit_ms))
        self._wait_ready()
        self.folder = self.screens_dir / f"{self.task.name}-s{self.task.seed}-{uuid.uuid4().hex[:8]}"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.state = self._observe(self.folder / OPENING_SCREENSHOT)
        log.info("gui.reset", task=self.task.task_id, folder=str(self.folder), time_limit_s=time_ms / 1000)
        system = SYSTEM_PROMPT.format(max_steps=self.max_steps, time_s=time_ms / 1000)
        user = f"{self.state.utterance}\n\nThe page:\n{self._tree()}"
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def tools(self) -> list[dict[str, Any]]:
        return actions.DEFINITIONS

    def step(self, action: Action) -> Observation:
        if self.page is None or self.folder is None:
            raise RuntimeError("the environment is not reset (or is closed)")
        if self.ended:
            raise RuntimeError("the episode is over")
        shot = self.folder / f"step-{self.steps:03d}.png"
        self.steps += 1
        status = self._status()
        if status.done:  # the task's timer ended it while the policy was thinking
            return self._end(status, [], "The task's time ran out before this step; the episode is over.", shot)
        results: list[ToolResult] = []
        for call in action.tool_calls:
            if self.ended:
                results.append(_error(call, "not run: the episode had already ended"))
                continue
            results.append(self._call(call))
            if not self.ended and (status := self._status()).done:
                self.final, self.ended = status, True
        user_message = None
        if action.parse_error:
            user_message = (
                f"Your tool call could not be parsed: {action.parse_error}. Call a tool with a JSON object, e.g."
                ' {"name": "click", "arguments": {"element": 3}}.'
            )
        elif not action.tool_calls:
            user_message = (
                "You did not call a tool. Act on the page with click, type, key or scroll; call done() when finished."
            )
        if self.ended:
            return self._end(self.final, results, user_message, shot)
        self.state = self._observe(shot)
        page_text = f"The page:\n{self._tree()}"
        if results:
            last = results[-1]
            results[-1] = last.model_copy(update={"content": f"{last.content}\n\n{page_text}"})
        else:
            user_message = f"{user_message}\n\n{page_text}"
        return Observation(tool_results=results, user_message=user_message, screenshot=str(shot))

    def outcome(self) -> float:
        """(raw + 1) / 2 of the page's own reward if the page ended the task, else 0 (fixed once the episode ends)."""
        if self.final is None and not self.ended and self.page is not None:
            self.final, self.ended = self._status(), True
        return outcome_of(self.final)

    def close(self) -> None:
        if self.page is not None:
            self.browser.close_page(self.page)
            self.page = None

    # ---- internals ---------------------------------------------------------------------
    def _end(self, status: js.Status | None, results: list[ToolResult], user_message: str | None, shot: Path):
        self.final, self.ended = status, True
        if status is not None and status.done:
            why = f" ({status.reason})" if status.reason else ""
            note = f"The page ended the task: reward {status.raw_reward:+.2f}{why}."
            user_message = f"{user_message}\n\n{note}" if user_message else note
        if status is not None and status.done:  # the page put its START cover over the task's final state
            self.browser.run(self.page, lambda d: d.execute_script(js.UNCOVER))
        self._screenshot(shot, END_AREA)
        return Observation(
            tool_results=results, user_message=user_message, done=True, done_reason="submitted", screenshot=str(shot)
        )

    def _call(self, call: ToolCallAction) -> ToolResult:
        try:
            args = actions.parse(call.name, call.arguments)
            if isinstance(args, actions.DoneArgs):
                self.final, self.ended = self._status(), True
                return ToolResult(call_id=call.id, name=call.name, content="done")
            text = self._act(args)
        except actions.BadCall as exc:
            return _error(call, str(exc))
        settle = self.config.settle_s + (TYPE_EXTRA_SETTLE_S if isinstance(args, actions.TypeArgs) else 0.0)
        time.sleep(settle)  # outside the browser's lock: other episodes' steps run meanwhile
        return ToolResult(call_id=call.id, name=call.name, content=text)

    def _act(self, args: Any) -> str:
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.actions.wheel_input import ScrollOrigin

        element = getattr(args, "element", None)
        if element is not None and (self.state is None or element not in self.state.ids()):
            raise actions.BadCall(f"no element [{element}] in the latest page listing; use an id from it")
        what = self._label(element)
        mods, last = actions.key_chord(args.key) if isinstance(args, actions.KeyArgs) else ([], "")
        try:
            with self.browser.on(self.page) as d:
                el = d.execute_script(js.FIND, element) if element is not None else None
                if element is not None and el is None:
                    raise actions.BadCall(f"element [{element}] is no longer on the page")
                if isinstance(args, actions.ClickArgs):
                    el.click()
                    return f"clicked {what}"
                if isinstance(args, actions.TypeArgs):
                    el.clear()
                    el.send_keys(args.text)
                    return f"typed {args.text!r} into {what}"
                if isinstance(args, actions.KeyArgs):
                    chain = ActionChains(d)
                    for m in mods:
                        chain.key_down(m)
                    chain.send_keys(last)
                    for m in reversed(mods):
                        chain.key_up(m)
                    chain.perform()
                    return f"pressed {args.key}"
                if isinstance(args, actions.ScrollArgs):
                    target = el if el is not None else d.execute_script("return document.getElementById('area');")
                    step = TASK_AREA[1] // 3
                    dx, dy = {"up": (0, -step), "down": (0, step), "left": (-step, 0), "right": (step, 0)}[
                        args.direction
                    ]
                    ActionChains(d).scroll_from_origin(ScrollOrigin.from_element(target), dx, dy).perform()
                    return f"scrolled {args.direction}" + (f" in {what}" if element is not None else "")
        except WebDriverException as exc:  # the browser is alive (Browser.on checked): the action itself failed
            first = (exc.msg or str(exc)).splitlines()[0][:200]
            raise actions.BadCall(f"{type(exc).__name__.removesuffix('Exception')} on {what or 'the page'}: {first}")
        raise AssertionError(args)

    def _label(self, element: int | None) -> str:
        row = self.state.row(element) if (self.state is not None and element is not None) else None
        return row.line().strip() if row is not None else ""

    def _status(self) -> js.Status:
        return js.Status.model_validate(self.browser.run(self.page, lambda d: d.execute_script(js.STATUS)))

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_WAIT_S
        while not self.browser.run(self.page, lambda d: d.execute_script(js.READY)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"task {self.task.task_id} did not become ready in {READY_WAIT_S:g} s")
            time.sleep(0.05)

    def _observe(self, shot: Path) -> js.PageState:
        raw = self.browser.run(self.page, lambda d: d.execute_script(js.TREE))
        self._screenshot(shot)
        return js.PageState.model_validate(raw)

    def _screenshot(self, path: Path, area: tuple[int, int] = TASK_AREA) -> None:
        # Chromium's own clipped capture: the region only, at the device scale, with no decode and re-encode here.
        clip = {"x": 0, "y": 0, "width": area[0], "height": area[1], "scale": 1}
        shot = self.browser.run(
            self.page, lambda d: d.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "clip": clip})
        )
        path.write_bytes(base64.b64decode(shot["data"]))

    def _tree(self) -> str:
        return self.state.tree(self.config.tree_chars) if self.state is not None else ""


def _error(call: ToolCallAction, message: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=f"error: {message}", error=True)
