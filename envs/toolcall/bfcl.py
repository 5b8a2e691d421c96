"""BFCL v4 multi-turn episodes: a user's turns, the entry's API functions as tools, BFCL's checker as the verdict.

The episode follows BFCL's FC inference loop (`BaseHandler.inference_multi_turn_FC`):
a turn's user message, then steps of tool calls, each executed at once against the
live API instances; a step without tool calls ends the turn and the next user turn
arrives as `user_message` (after the last one the episode is done, "no_more_turns").
A `miss_func` turn that makes held-out functions available delivers them the way
BFCL's prompting handlers do, as their schemas in the user message, since the
episode's tool list is fixed when it opens. As in BFCL's executor, any public
method of the entry's API instances runs when called, offered yet or not (one
`miss_func` ground truth calls a held-out function before its turn). Every agent
mistake (an unknown function, bad arguments, an API error, a malformed call)
comes back as an error result and the turn goes on.

Task ids are `bfcl/<BFCL id>`, e.g. `bfcl/multi_turn_base_0`.
"""

from __future__ import annotations

import ast
import inspect
import json
from typing import Any

from envs.base import Action, Observation, TaskInfo, ToolCallAction, ToolResult, UnknownTask
from envs.toolcall.bfcl_calls import ApiSession
from envs.toolcall.bfcl_data import CATEGORIES, BfclEntry, load, openai_tool, require_bfcl
from envs.toolcall.bfcl_score import Verdict, check
from envs.toolcall.text import clip_middle

PREFIX = "bfcl/"
OUTPUT_CHARS = 16_000
"""What the agent reads back of one result (head and tail); long-context entries return large listings."""


def system_prompt() -> str:
    """BFCL's own classic-style instructions, less the text-format ones (calls go through native tool calling)."""
    from bfcl_eval.constants.default_prompts import PROMPT_STYLE_TEMPLATES

    style = PROMPT_STYLE_TEMPLATES["classic"]
    return f"{style['persona']} {style['task']}\n\n{style['multiturn_behavior']}"


class BfclEnv:
    setting = "toolcall"

    def __init__(self, entry: BfclEntry):
        self.entry = entry
        self.session: ApiSession | None = None
        self.turn = 0
        self.model_turns: list[list[list[str]]] = []
        """Per turn reached, per step that ran calls, the calls as BFCL call strings: what the checker replays."""
        self.done = False
        self.verdict: Verdict | None = None

    # ---- Environment ---------------------------------------------------------------
    def reset(self) -> list[dict[str, Any]]:
        self.session = ApiSession(self.entry)
        self.turn, self.model_turns, self.done, self.verdict = 0, [], False, None
        first = self._open_turn(0)
        return [{"role": "system", "content": system_prompt()}, {"role": "user", "content": first}]

    def tools(self) -> list[dict[str, Any]]:
        """The functions offered at the start (a `miss_func` entry's held-out ones arrive later, in a user turn)."""
        return [openai_tool(doc) for doc in self.entry.functions]

    def step(self, action: Action) -> Observation:
        session = self._session()
        if self.done:
            raise RuntimeError("the episode is over: every turn has been answered")
        self.verdict = None  # a verdict taken mid-episode is stale once the episode moves on
        results, ran = [], []
        for call in action.tool_calls:
            result, recorded = self._call(session, call)
            results.append(result)
            if recorded is not None:
                ran.append(recorded)
        if ran:
            self.model_turns[self.turn].append(ran)
        if action.tool_calls or action.parse_error:
            user_message = None
            if action.parse_error:
                user_message = (
                    f"Your tool call could not be parsed: {action.parse_error}. Send each call as a JSON object with"
                    ' "name" and "arguments"; reply without a tool call when you have no more functions to call.'
                )
            return Observation(tool_results=results, user_message=user_message)
        if self.turn + 1 >= len(self.entry.turns):
            self.done = True
            return Observation(done=True, done_reason="no_more_turns")
        self.turn += 1
        return Observation(user_message=self._open_turn(self.turn))

    def outcome(self) -> float:
        """1.0 when BFCL's multi-turn checker accepts the episode's calls, else 0.0 (computed once)."""
        if self.verdict is None:
            self.verdict = check(self.entry, self.model_turns)
        return 1.0 if self.verdict.valid else 0.0

    def close(self) -> None:
        self.session = None

    # ---- internals ---------------------------------------------------------------------
    def _session(self) -> ApiSession:
        if self.session is None:
            raise RuntimeError("the environment is not reset (or is closed)")
        return self.session

    def _open_turn(self, index: int) -> str:
        """The turn's user text; a `miss_func` turn offering held-out functions gets BFCL's text with their schemas."""
        from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING

        self.model_turns.append([])
        added = self.entry.held_out.get(index, [])
        if added:
            schemas = json.dumps([openai_tool(doc) for doc in added])
            return DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=schemas)
        return "\n\n".join(str(m.get("content", "")) for m in self.entry.turns[index] if m.get("role") == "user")

    def _call(self, session: ApiSession, call: ToolCallAction) -> tuple[ToolResult, str | None]:
        result = session.call(call.name, call.arguments)
        content = clip_middle(result.content, OUTPUT_CHARS)
        return ToolResult(call_id=call.id, name=call.name, content=content, error=result.error), result.recorded


class BfclTasks:
    """BFCL v4 multi-turn entries as tasks, `steps_per_turn` policy steps per user turn."""

    setting = "toolcall"

    def __init__(self, categories: tuple[str, ...] = CATEGORIES, steps_per_turn: int = 4):
        """`steps_per_turn`: a turn needs at least two steps (its calls, then a reply without calls); BFCL lets a
        turn run 20 steps. Four leaves room for a follow-up call and a retry without letting one turn run away."""
        unknown = sorted(set(categories) - set(CATEGORIES))
        if unknown:
            raise ValueError(f"unknown BFCL categories {unknown}: choose among {', '.join(CATEGORIES)}")
        self.categories = categories
        self.steps_per_turn = steps_per_turn

    def tasks(self) -> list[TaskInfo]:
        require_bfcl()
        return [
            TaskInfo(
                setting=self.setting,
                task_id=PREFIX + entry.id,
                title=_title(entry),
                category=f"bfcl_{entry.category}",
                max_steps=self.steps_per_turn * len(entry.turns),
            )
            for category in self.categories
            for entry in load(category)
        ]

    def entry(self, task_id: str) -> BfclEntry:
        bfcl_id = task_id.removeprefix(PREFIX)
        category = bfcl_id.rsplit("_", 1)[0]
        if not task_id.startswith(PREFIX) or category not in self.categories:
            raise UnknownTask(task_id)
        found = next((e for e in load(category) if e.id == bfcl_id), None)
        if found is None:
            raise UnknownTask(task_id)
        return found

    def make(self, task_id: str, sandboxes: Any = None) -> BfclEnv:
        """A fresh environment (`sandboxes` is unused: the APIs are in-process simulations)."""
        require_bfcl()
        return BfclEnv(self.entry(task_id))


def oracle_turns(entry: BfclEntry) -> list[list[ToolCallAction]]:
    """BFCL's ground-truth calls of each turn as tool calls (positional arguments named from the method signature).

    For checking the environment end to end: replaying them, each turn as one step then a step without calls,
    must score 1.0.
    """
    session = ApiSession(entry)
    turns: list[list[ToolCallAction]] = []
    for t, calls in enumerate(entry.ground_truth):
        actions = []
        for c, text in enumerate(calls):
            node = ast.parse(text, mode="eval").body
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                raise ValueError(f"{entry.id}: ground truth {text!r} is not a plain function call")
            name = node.func.id
            method = getattr(session.instances[session.owner[name]], name)
            params = list(inspect.signature(method).parameters)
            arguments = {params[i]: ast.literal_eval(arg) for i, arg in enumerate(node.args)}
            arguments.update({kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg})
            actions.append(ToolCallAction(id=f"gt-{t}-{c}", name=name, arguments=arguments))
        turns.append(actions)
    return turns


def _title(entry: BfclEntry) -> str:
    first = next((str(m.get("content", "")) for m in entry.turns[0] if m.get("role") == "user"), "")
    line = first.strip().splitlines()[0] if first.strip() else entry.id
    return line if len(line) <= 100 else line[:99] + "…"
