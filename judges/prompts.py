"""Judge prompts: the paper's appendix C.1 and C.2 (personal agent) and C.4 (general agents)."""

from __future__ import annotations

import json

from judges.base import JudgeContext, PairwiseContext, StepJudgeContext, StepView

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


# Not in the paper: a user's progress report (contracts.progress) compares two answers to one of their own turns.
PAIRWISE_SYSTEM = (
    "You compare two responses of an AI assistant to the same conversation with one user.\n"
    "Decide which response serves this user better: correct, helpful, and in the way this user asked for.\n"
    "Think step-by-step, then give your verdict inside \\boxed{}.\n"
    "Valid verdicts: \\boxed{A}, \\boxed{B}, or \\boxed{tie} when neither is better."
)


def pairwise_messages(ctx: PairwiseContext) -> list[dict[str, str]]:
    user = f"## Conversation\n{ctx.conversation}\n\n## Response A\n{ctx.answer_a}\n\n## Response B\n{ctx.answer_b}"
    return [{"role": "system", "content": PAIRWISE_SYSTEM}, {"role": "user", "content": user}]


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
# C.4, SWE: the step is a THOUGHT plus one bash command, its next state the return code and output; the SWE
# rubric's criteria ride in the system prompt, since the user prompt's rubric is shared by every setting.
STEP_SYSTEM["swe"] = (
    "You are a strict evaluator for a software engineering agent that fixes GitHub issues.\n"
    "You are provided with:\n"
    "1) the issue description (problem statement),\n"
    "2) the agent's recent action history, and\n"
    "3) the agent's most recent step (THOUGHT + bash command) to evaluate, with the execution result of that "
    "command (returncode + output).\n"
    "A good step runs without unexpected errors (returncode 0, or an expected non-zero like grep with no match), "
    "is clearly relevant to diagnosing or fixing the stated issue, and gives useful information or makes a "
    "logically correct change toward the fix. A bad step fails unexpectedly (wrong path, syntax error, missing "
    "tool), is irrelevant, goes in circles (repeats a failed command or approach), introduces an obvious bug, or "
    "wastes steps (re-reading files already fully examined)."
)
# C.4, GUI: its user prompt (states as screenshots, or element listings for a text-only judge) is judges.gui_prompt.
STEP_SYSTEM["gui"] = (
    "You are an evaluator for the most recent step of a GUI agent.\n"
    "You are provided with:\n"
    "1) the interaction history between the agent and the environment,\n"
    "2) the agent's objective, and\n"
    "3) the agent's most recent step to evaluate."
)

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


def step_messages(ctx: StepJudgeContext, images: bool = False) -> list[dict]:
    """The C.4 user prompt: task instruction, history, and the current step, as JSON fields (GUI: its own prompt,
    with screenshots as images when `images`)."""
    if ctx.setting == "gui":
        from judges.gui_prompt import gui_step_messages

        return gui_step_messages(ctx, STEP_SYSTEM["gui"], images)
    body = (
        f'"task_instruction": {json.dumps(ctx.task_instruction)}\n\n'
        f'"history": {json.dumps([_step_json(h) for h in ctx.history], indent=1)}\n\n'
        f'"current": {json.dumps(_step_json(ctx.current), indent=1)}\n\n'
        f"{STEP_RUBRIC}"
    )
    system = STEP_SYSTEM.get(ctx.setting, STEP_SYSTEM["terminal"])
    return [{"role": "system", "content": system}, {"role": "user", "content": body}]
