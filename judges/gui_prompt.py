"""The C.4 GUI step-judge prompt: previous actions, the state before the step, the step, and the state after it.

The paper shows each state as a screenshot. A judge endpoint that accepts images
(`judge.llm.vision`) gets them as OpenAI `image_url` parts (PNG data URLs read
from the data directory); a text-only one, or a screenshot that cannot be read
(a judge worker on another machine), gets the page's element listing instead.
"""

from __future__ import annotations

import base64
from pathlib import Path

from judges.base import StepJudgeContext, StepView

GUI_RUBRIC = (
    "Evaluate ONLY the single most recent step using the information above.\n\n"
    "Use the next observation AFTER executing this step (i.e., the environment state after this action) to judge "
    "whether the action actually took effect.\n\n"
    "Assign a score of +1 if ALL of the following are true:\n"
    "- The step is clearly relevant to the stated objective;\n"
    "- The action is executable and coherent given the next observation;\n"
    "- The next observation shows concrete progress toward the objective, not just a no-op.\n\n"
    "Otherwise assign a score of -1, for example if the step is incorrect, irrelevant, impossible in context, has no "
    "visible effect, undoes progress, contradicts the next observation, or hallucinates tools/objects/facts.\n\n"
    "Think carefully, then provide your reasoning and put the final score in \\boxed{}."
)
PAGE_MARK = "The page:\n"
MAX_IMAGE_BYTES = 4 << 20


def _action(step: StepView) -> str:
    return f"{step.assistant_text.strip()}\n{step.tool_calls}".strip()


def _listing(text: str) -> str:
    """The state as text: the last element listing in an observation, or the whole observation if it has none."""
    return text.rsplit(PAGE_MARK, 1)[-1] if PAGE_MARK in text else text


def _data_url(path: str | None) -> str | None:
    if not path:
        return None
    try:
        p = Path(path)
        if not p.is_file() or p.stat().st_size > MAX_IMAGE_BYTES:
            return None
        return "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode("ascii")
    except OSError:
        return None


class _Parts:
    def __init__(self, images: bool):
        self.images = images
        self.parts: list[dict] = []

    def text(self, text: str) -> None:
        if self.parts and self.parts[-1]["type"] == "text":
            self.parts[-1]["text"] += text
        else:
            self.parts.append({"type": "text", "text": text})

    def state(self, screenshot: str | None, listing: str) -> None:
        url = _data_url(screenshot) if self.images else None
        if url is not None:
            self.parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            self.text(f"(the page's visible elements)\n{listing.strip()}\n")

    def content(self) -> str | list[dict]:
        if any(p["type"] == "image_url" for p in self.parts):
            return self.parts
        return "".join(p["text"] for p in self.parts)


def gui_step_messages(ctx: StepJudgeContext, system: str, images: bool = False) -> list[dict]:
    """C.4's GUI user prompt, in its order. States before a step: the previous step's result, or the opening."""
    objective = ctx.task_instruction.split("\n\n", 1)[0]
    opening = (ctx.opening_screenshot, _listing(ctx.task_instruction))

    def before(i: int) -> tuple[str | None, str]:
        if i == 0:
            return opening
        prev = ctx.history[i - 1]
        return prev.screenshot, _listing(prev.tool_results)

    p = _Parts(images)
    lines = [f"Step {h.turn_idx + 1}: {_action(h)}" for h in ctx.history]
    p.text("Previous Actions:\n" + ("\n".join(lines) if lines else "None") + "\n")
    if ctx.history:
        last = len(ctx.history) - 1
        p.text("Image of environment:\n")
        p.state(*before(last))
        p.text(f"\nAction of agent:\nStep {ctx.history[last].turn_idx + 1}:\n{_action(ctx.history[last])}\n")
    p.text("Agent's current observation:\n")
    p.state(*before(len(ctx.history)))
    p.text(
        "\nYou are a strict evaluator to evaluate the most recent step of the agent in the following.\n\n"
        f"Objective of Agent:\n{objective}\n\nAgent's most recent step (reasoning + action):\n"
        f"{_action(ctx.current)}\n"
    )
    p.text("\nNext observation after executing this action:\n")
    p.state(ctx.current.screenshot, _listing(ctx.current.tool_results))
    p.text(f"\n{GUI_RUBRIC}")
    return [{"role": "system", "content": system}, {"role": "user", "content": p.content()}]
