"""Judge prompts: the paper's appendix C.1 and C.2 (personal agent) and C.4 (general agents)."""

from __future__ import annotations

import json

from judges.base import JudgeContext, StepJudgeContext, StepView

PRM_SYSTEM = (
    "You are a process reward model (PRM) evaluating an AI assistant.\n"
    "You will see the assistant's output and the subsequent user reply.\n"
    "Judge the quality of the assistant's output based on the feedback.\n"
    "Think step-by-step, then give your final score inside \\boxed{}.\n"
    "Valid scores: \\boxed{1} (good), \\boxed{-1} (bad), \\boxed{0} (neutral)."
)

HINT_SYSTEM = (
    "You are a process reward model used for hindsight hint extraction.\n"
    "Decide whether the next state reveals useful hindsight that could have\n"
    "improved the assistant response at turn t.\n"
    "- Output \\boxed{1} if yes; provide a hint in [HINT_START]...[HINT_END].\n"
    "- Output \\boxed{-1} if no; do not provide a hint.\n"
    "- Hint must be concrete and actionable (1-3 sentences)."
)

_ROLE_LABEL = {"user": "user reply", "tool": "tool result"}


def judge_user_message(ctx: JudgeContext) -> str:
    label = _ROLE_LABEL.get(ctx.next_state_role, ctx.next_state_role)
    return f"## Assistant output (turn t)\n{ctx.response}\n\n## Next state ({label})\n{ctx.next_state}"


def messages(system: str, ctx: JudgeContext) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": judge_user_message(ctx)}]


# C.4, terminal: also used for tool-call episodes, whose steps are tool calls and their results alike.
STEP_SYSTEM = {
    "terminal": (
        "You are an evaluator for a terminal agent.\n"
        "You are provided with:\n"
        "1) the agent's task instruction,\n"
        "2) the interaction history, and\n"
        "3) the agent's most recent step to evaluate."
    ),
}
STEP_SYSTEM["toolcall"] = STEP_SYSTEM["terminal"].replace("a terminal agent", "a tool-calling agent")

STEP_RUBRIC = (
    "Evaluate ONLY the single most recent step using the information above.\n\n"
    "Assign a score of +1 if ALL of the following are true:\n"
    "- The current assistant message is a correct/helpful step that advances the task;\n"
    "- The tool-call format is valid;\n"
    "- Tool usage is appropriate for the step;\n"
    "- Tool results (if any) are consistent with making progress.\n\n"
    "Otherwise assign a score of -1, for example if:\n"
    "- The step is incorrect, misleading, or does not advance the task;\n"
    "- Tool-call format is broken (invalid JSON / parse error);\n"
    "- Tool usage is clearly wrong or irrelevant;\n"
    "- Tool results show failure or clearly no progress.\n\n"
    "Think carefully, then provide your reasoning and put the final score in \\boxed{}."
)


def _step_json(step: StepView) -> dict:
    return {
        "turn_idx": step.turn_idx,
        "assistant_text": step.assistant_text,
        "tool_calls": step.tool_calls,
        "tool_results": step.tool_results,
    }


def step_messages(ctx: StepJudgeContext) -> list[dict[str, str]]:
    """The C.4 user prompt: task instruction, history, and the current step, as JSON fields."""
    body = (
        f'"task_instruction": {json.dumps(ctx.task_instruction)}\n\n'
        f'"history": {json.dumps([_step_json(h) for h in ctx.history], indent=1)}\n\n'
        f'"current": {json.dumps(_step_json(ctx.current), indent=1)}\n\n'
        f"{STEP_RUBRIC}"
    )
    system = STEP_SYSTEM.get(ctx.setting, STEP_SYSTEM["terminal"])
    return [{"role": "system", "content": system}, {"role": "user", "content": body}]
