"""An offline judge with no LLM: a baseline for offline use and tests, not the paper's judge.

A user reply is scored by explicit feedback: thanks and praise are positive;
corrections ("wrong", "don't", "you should ..."), complaints and asking the
same thing again are negative. A tool result is negative when it shows an
error (tracebacks, error markers, a non-zero exit code), positive otherwise.
The hint is the corrective sentence of a negative reply.

Style feedback counts as a correction too: a complaint about how the answer reads ("too curt", "looks
AI-generated", "not helpful") or a request to redo it. The hint prefers directive sentences (instructions:
"Don't use bold.", "Be more specific.") over complaints, and skips bare redo requests, which say nothing about
what to change. Asking the same thing again scores -1 but yields no hint: it carries no directive.
"""

from __future__ import annotations

import re

from judges.base import JudgeContext, PairwiseContext, StepJudgeContext, StepView


class _Words:
    """A case-insensitive search for ASCII words and phrases, linear in the text.

    ASCII text (nearly every tool result) is lowered once and searched case-sensitively: for one megabyte that
    is several times faster than re.I, and lets re skip ahead to the first letters of a pattern whose every
    alternative starts with a literal. Lowering ASCII changes no verdict; other text keeps re.I, where a few
    non-ASCII letters (long s, Kelvin sign) also match the ASCII words.
    """

    def __init__(self, source: str):
        self._ascii = re.compile(source)
        self._any = re.compile(source, re.I)

    def search(self, text: str) -> re.Match[str] | None:
        return self._ascii.search(text.lower()) if text.isascii() else self._any.search(text)


_POSITIVE = _Words(
    r"\b(thanks|thank you|thx|great|perfect|awesome|exactly|nice|well done|works( now)?|"
    r"that'?s right|correct|love it)\b"
)
_NEGATIVE = _Words(
    r"\b(wrong|incorrect|not what i|don'?t|do not|doesn'?t work|didn'?t|stop|try again|you should|should have|"
    r"instead|that'?s not|no,|not correct|mistake|fix (it|this)|please (use|make|do|don'?t)|never|always)\b"
)
# Complaints about how an answer reads, and requests to do it over: a user's verdict on style, not on facts.
_STYLE_COMPLAINT = _Words(
    r"\b(too (short|long|terse|brief|curt|blunt|bare|vague|formal|robotic|generic|harsh|cold|wordy|verbose|formatted)|"
    r"(looks|sounds|reads) (totally |obviously |so |very )?(like (an? )?)?(ai|bot|robot|machine)|ai[- ]generated|"
    r"written by (an? )?(ai|bot|robot)|not helpful|not how|learns nothing|redo|rewrite|write it again|"
    r"try (that|it) again)\b"
)
_REDO_ONLY = re.compile(
    r"^\W*(can you |could you |please )*(redo|rewrite|write|try) (it|that|this)( over| again)?( please)?\W*$", re.I
)
# A sentence that starts with a base-form verb, or with "no X", is an instruction ("Be more specific.", "No bold.").
_IMPERATIVE = re.compile(
    r"^\W*(please |just |also |and )?(be|make|keep|use|write|add|mention|give|say|put|skip|avoid|show|explain|lay|"
    r"bold|include|remove|drop|cut|check|cite|sound|don'?t|do not|never|always|only|stop)\b|^\W*no\s",
    re.I,
)
_CORRECTIVE = _Words(r"\b(should|instead|don'?t|do not|please|use|make sure|always|never|must|need to|rather)\b")
# A tool result can be megabytes, so no alternative may backtrack over a run of text. A word ending in "error"
# or "exception" (KeyError) is found by its ending: the former leading `\w*` matched the same texts but re-scanned
# each run of word characters from every start in it, quadratic on a long one (a 20 KB base64 line took 2.5 s,
# 1 MB about an hour). Each alternative starts with a literal so the ASCII search skips to candidate letters; the
# word boundary before "failed" is checked behind its end for that reason.
_TOOL_ERROR = _Words(
    r"traceback \(most recent call last\)|error\b|exception\b|failed\b(?<!\wfailed)|not found|permission denied|"
    r"no such file|command not found|timed out"
)
_RETURNCODE = re.compile(r"\[user\] <returncode>(-?\d+)</returncode>")
"""The next state of a mini-swe-agent step (envs.swe), as the step judge's view shows it."""
_EXIT_CODE = re.compile(r"exit(?:ed with)?(?: code| status)?[:= ]+(-?\d+)", re.I)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")


_ASKED_AGAIN = "the user asked the same thing again"


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", "", text.lower()).split())


class HeuristicJudge:
    name = "heuristic"

    def score(self, ctx: JudgeContext) -> tuple[int, str]:
        if ctx.next_state_role == "tool":
            code = _EXIT_CODE.search(ctx.next_state)
            if (code and int(code.group(1)) != 0) or _TOOL_ERROR.search(ctx.next_state):
                return -1, "the tool result shows an error"
            return 1, "the tool call ran without an error"
        text = ctx.next_state
        if ctx.previous_user and (norm := _norm(text)) and norm == _norm(ctx.previous_user):
            return -1, _ASKED_AGAIN
        neg = bool(_NEGATIVE.search(text) or _STYLE_COMPLAINT.search(text))
        pos = bool(_POSITIVE.search(text))
        if neg and not pos:
            return -1, "the user corrected the assistant"
        if pos and not neg:
            return 1, "the user was satisfied"
        return 0, "no explicit feedback" if not (neg or pos) else "mixed feedback"

    def step_score(self, ctx: StepJudgeContext) -> tuple[int, str]:
        """General-agent steps: a broken call, a failed command or a repeated step is -1; a step that ran is +1."""
        cur = ctx.current
        if cur.parse_error:
            return -1, "the tool call could not be parsed"
        if cur.errors or (cur.tool_calls not in ("", "[]") and _TOOL_ERROR.search(cur.tool_results)):
            return -1, "a tool result shows an error"
        previous = ctx.history[-1] if ctx.history else None
        if previous is not None and cur.tool_calls not in ("", "[]") and cur.tool_calls == previous.tool_calls:
            return -1, "the step repeats the previous one"
        if cur.tool_calls in ("", "[]"):
            if cur.tool_results.startswith("[user] Format error"):
                return -1, "the reply broke the action format"
            if (code := _RETURNCODE.match(cur.tool_results)) is not None:  # an SWE step: one command, its return code
                return (1, "the command ran without an error") if code.group(1) == "0" else (-1, "the command failed")
            if not cur.assistant_text.strip():
                return -1, "an empty step"
            return _answer_against_tools(cur.assistant_text, ctx.history)
        return 1, "the tool calls ran without an error"

    async def step(self, ctx: StepJudgeContext) -> str:
        score, why = self.step_score(ctx)
        return f"Heuristic step judge: {why}. \\boxed{{{score}}}"

    async def prm(self, ctx: JudgeContext) -> str:
        score, why = self.score(ctx)
        return f"Heuristic judge: {why}. \\boxed{{{score}}}"

    async def hint(self, ctx: JudgeContext) -> str:
        score, why = self.score(ctx)
        if score >= 0:
            return f"Heuristic judge: {why}; no hindsight to extract. \\boxed{{-1}}"
        if ctx.next_state_role != "tool" and why == _ASKED_AGAIN:
            return f"Heuristic judge: {why}, which says nothing about what to change. \\boxed{{-1}}"
        if ctx.next_state_role == "tool":
            # The last error line says most (a traceback ends with the exception).
            lines = [ln.strip() for ln in ctx.next_state.splitlines() if not ln.lower().startswith("traceback")]
            errors = [ln for ln in lines if _TOOL_ERROR.search(ln)] or [ln for ln in lines if _EXIT_CODE.search(ln)]
            line = errors[-1] if errors else ctx.next_state.strip()[:200]
            hint = (
                f"The tool call failed with: {line[:200]}. Check the arguments and the environment before calling it."
            )
        else:
            sentences = [s.strip() for s in _SENTENCE.findall(ctx.next_state) if s.strip()]
            sentences = [s for s in sentences if not _REDO_ONLY.match(s)] or sentences
            directive = [s for s in sentences if _IMPERATIVE.match(s) or _CORRECTIVE.search(s)]
            complaint = [s for s in sentences if _NEGATIVE.search(s) or _STYLE_COMPLAINT.search(s)]
            hint = " ".join((directive or complaint or sentences)[:2])
        return f"Heuristic judge: {why}. \\boxed{{1}} [HINT_START]{hint}[HINT_END]"

    async def pairwise(self, ctx: PairwiseContext) -> str:
        # It reads feedback in a next state; two answers with no next state give it nothing to go on.
        return "Heuristic judge: it cannot compare two answers without a next state. \\boxed{tie}"

    async def aclose(self) -> None:
        return None


_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _answer_against_tools(text: str, history: list[StepView]) -> tuple[int, str]:
    """A final answer after tool calls: it should be what the tools computed (the step that reads a result and
    answers with something else threw the work away). Without a boxed answer or a tool result, the answer stands."""
    boxed = _BOXED.findall(text)
    last = next((h for h in reversed(history) if h.tool_calls not in ("", "[]") and not h.parse_error), None)
    if not boxed or last is None or not boxed[-1].strip():
        return 1, "the agent gave its answer"
    value = boxed[-1].strip()
    if re.search(rf"(?<![\w.]){re.escape(value)}(?![\w.])", last.tool_results):
        return 1, "the answer is what the tool computed"
    return -1, "the answer is not what the tool computed"
