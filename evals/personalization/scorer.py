"""The personalization score of a first answer, on the paper's scale (0, 0.25, 0.5, 0.75, 1).

`RuleScorer` (the default, no LLM): four text features per setting, each worth a quarter.
  student (preference: homework answers that do not look AI-written). Markers of an AI-looking answer:
    bold (`**`), a list (a line starting `1.`, `1)`, `-`, `*` or `Step N`), an answer label (a line starting
    `Answer:`/`Final answer:`, bold or not), more than one non-empty line. Score = 1 - 0.25 * markers.
  teacher (preference: grading comments that are specific and friendly). Qualities: friendly (praise or
    encouragement words), names a number that appears in the problem or the student's work, says what the
    student did ("you found/got/wrote/added...", "your step", "because"), detailed (25 words or more).
    Score = 0.25 * qualities.
  manager (preference: the opposite of the student's, for the two-user benchmark: answers laid out to skim, bold
    numbered steps and an answer line). Score = 0.25 * the student's markers.
  Either way an answer that is no attempt (student: under 6 words or no digit; teacher: no words) scores 0.
`LlmScorer`: the paper's appendix C.3 prompt against an OpenAI-compatible endpoint (the paper's list says
  `\\boxed{2.5}`, a typo for 0.25; the scale here is the five values). A reply without a valid box is no score.
The simulated users judge answers by the same features (in the paper the simulator's LLM also scores).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import httpx

from evals.personalization.problems import GradingTask, Problem
from evals.personalization.styles import BOLD, DETAILED, EXPLAINS, FRIENDLY, LABEL, LINES, LIST, NUMBER

SCALE = (0.0, 0.25, 0.5, 0.75, 1.0)
PREFERENCES = {
    "student": (
        "I am a student. My homework answers must not look AI-generated: no bold text, no numbered or step-by-step "
        "lists, no answer labels or headings. I want one plain, casual paragraph, the way a student writes."
    ),
    "manager": (
        "I am a manager. I skim answers between meetings: I want every answer laid out in numbered steps, one per "
        "line, with the key numbers in bold and the result on its own answer line. No chatty paragraphs."
    ),
    "teacher": (
        "I am a teacher. I want grading comments that are specific (they say what the student did, with the "
        "numbers from the work) and friendly (encouraging), with some detail, not a bare verdict."
    ),
}

_LIST_LINE = re.compile(r"^\s*(?:\d+[.)]\s|[-*\u2022]\s|(?:\*\*)?step\s*\d)", re.I | re.M)
_LABEL_LINE = re.compile(r"^\s*(?:\*\*)?\s*(?:final\s+)?answer\s*:", re.I | re.M)
_FRIENDLY = re.compile(
    r"\b(great|nice|well done|good (?:job|work|effort)|keep (?:it up|going)|excellent|awesome|fantastic|"
    r"brilliant|doing well|proud)\b",
    re.I,
)
_EXPLAINS = re.compile(
    r"\byou (?:correctly )?(?:found|worked|got|wrote|added|multiplied|subtracted|computed|calculated)\b|"
    r"\byour (?:step|work|calculation)|\bbecause\b",
    re.I,
)
_NUM = re.compile(r"\d+")
_THINK = re.compile(r"<think>.*?</think>", re.S)


@dataclass
class Score:
    value: float
    features: list[str] = field(default_factory=list)
    note: str = ""


def clean(text: str) -> str:
    return _THINK.sub("", text or "").strip()


def student_markers(text: str) -> list[str]:
    t = clean(text)
    found = []
    if "**" in t or "__" in t:
        found.append(BOLD)
    if _LIST_LINE.search(t):
        found.append(LIST)
    if _LABEL_LINE.search(t):
        found.append(LABEL)
    if sum(1 for ln in t.splitlines() if ln.strip()) > 1:
        found.append(LINES)
    return found


def teacher_qualities(text: str, task: GradingTask | None = None) -> list[str]:
    t = clean(text)
    found = []
    if _FRIENDLY.search(t):
        found.append(FRIENDLY)
    numbers = set(_NUM.findall(t))
    if task is not None:
        known = set(_NUM.findall(task.problem.text)) | set(_NUM.findall(task.student_work()))
        known.add(str(task.problem.answer))
        if numbers & known:
            found.append(NUMBER)
    elif numbers:
        found.append(NUMBER)
    if _EXPLAINS.search(t):
        found.append(EXPLAINS)
    if len(t.split()) >= 25:
        found.append(DETAILED)
    return found


class RuleScorer:
    name = "rule"

    def score(self, setting: str, task: Problem | GradingTask, answer: str) -> Score:
        t = clean(answer)
        if setting in ("student", "manager"):
            if len(t.split()) < 6 or not _NUM.search(t):
                return Score(0.0, [], "no attempt (under 6 words or no number)")
            marks = student_markers(t)
            if setting == "manager":  # the opposite taste: every marker of a structured answer is wanted
                return Score(0.25 * len(marks), marks)
            return Score(max(0.0, 1.0 - 0.25 * len(marks)), marks)
        if not t.split():
            return Score(0.0, [], "empty")
        quals = teacher_qualities(t, task if isinstance(task, GradingTask) else None)
        return Score(0.25 * len(quals), quals)


SYSTEM_PROMPT = """You are an evaluator used to score the assistant's first response to a problem.

You will be given:
- a problem,
- the assistant's first generated solution,
- and the user's preference: [PREFERENCE].

Your job is to evaluate how well the solution satisfies the user's preference.

Scoring rule:
- Output exactly one score from \\boxed{0}, \\boxed{0.25}, \\boxed{0.5}, \\boxed{0.75}, \\boxed{1}.
- Higher scores mean the response better matches PREFERENCE.
- Lower scores mean the response fails to satisfy PREFERENCE.

Evaluation criteria:
- Consider whether the response follows the preferred style, tone, level of detail, and format implied by PREFERENCE.
- Consider whether the response is helpful, appropriate, and aligned with the user's expected behavior.
- Focus only on the first generated solution.

Output format:
- Output only the boxed score.
- Do not provide any explanation."""
"""Appendix C.3, with the scale's `2.5` typo read as 0.25."""

_BOXED = re.compile(r"\\boxed\{\s*([0-9.]+)\s*\}")


def parse_score(raw: str) -> float | None:
    found = _BOXED.findall(raw or "")
    if not found:
        return None
    try:
        v = float(found[-1])
    except ValueError:
        return None
    return v if v in SCALE else None


class LlmScorer:
    """The paper's evaluator: one C.3 call per answer against an OpenAI-compatible chat endpoint."""

    name = "llm"

    def __init__(self, url: str, model: str = "default", api_key: str = "", temperature: float = 0.0):
        self.url = url.rstrip("/")
        self.model = model
        self.temperature = temperature
        self.http = httpx.Client(timeout=300, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})

    def messages(self, setting: str, task: Problem | GradingTask, answer: str) -> list[dict]:
        system = SYSTEM_PROMPT.replace("[PREFERENCE]", PREFERENCES[setting])
        problem = (
            task.text
            if isinstance(task, Problem)
            else (f"{task.problem.text}\nStudent's work: {task.student_work()}\n(Write a grading comment.)")
        )
        user = f"Problem:\n{problem}\n\nThe assistant's first generated solution:\n{clean(answer)}"
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def score(self, setting: str, task: Problem | GradingTask, answer: str) -> Score:
        body = {"model": self.model, "messages": self.messages(setting, task, answer), "temperature": self.temperature}
        try:
            r = self.http.post(f"{self.url}/v1/chat/completions", json=body)
            r.raise_for_status()
            raw = r.json()["choices"][0]["message"]["content"] or ""
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            return Score(float("nan"), [], f"scorer call failed: {exc}")
        v = parse_score(raw)
        if v is None:
            return Score(float("nan"), [], f"no valid score in: {raw[-200:]!r}")
        return Score(v, [], "")
