"""Judge prompts: the system prompts of the paper's appendix C.1 and C.2."""

from __future__ import annotations

from judges.base import JudgeContext

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
