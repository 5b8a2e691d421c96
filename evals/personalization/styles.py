"""How answers look, what users ask for, and the text features both are described by.

Student setting (a math answer): five styles from AI-looking to casual, each defined by which of four AI markers
it shows (bold, a numbered/step list, an answer label on its own line, several lines/paragraphs).
Teacher setting (a grading comment): six styles from terse to specific-and-friendly, each defined by which of
four qualities it has (friendly, names a number from the work, says what the student did, detailed).

A *directive* is one instruction fragment ("don't use bold", "be more specific"); each forbids or requires some
features. An instruction is one to three directives in words; the base model is pretrained to answer with a
style consistent with every directive in the latest user message, and with the base mix when there is none.
The users' corrections are written with the same directives, as a person's would be with the same language.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from evals.personalization.problems import GradingTask, Problem, Step

# ---- student: features and styles ------------------------------------------------------------------------------

BOLD, LIST, LABEL, LINES = "bold", "list", "answer_label", "multi_line"
STUDENT_MARKERS = (BOLD, LIST, LABEL, LINES)

STUDENT_STYLES: dict[str, frozenset[str]] = {
    "ai_full": frozenset({BOLD, LIST, LABEL, LINES}),
    "ai_light": frozenset({LIST, LABEL, LINES}),
    "two_part": frozenset({LABEL, LINES}),
    "casual_bold": frozenset({BOLD}),
    "casual": frozenset(),
}
STUDENT_BASE_MIX = {"ai_full": 0.5, "ai_light": 0.2, "two_part": 0.1, "casual_bold": 0.1, "casual": 0.1}
"""Without an instruction: mostly AI-looking, as assistants answer homework questions."""

# ---- teacher: features and styles ------------------------------------------------------------------------------

FRIENDLY, NUMBER, EXPLAINS, DETAILED = "friendly", "names_a_number", "explains_the_work", "detailed"
TEACHER_QUALITIES = (FRIENDLY, NUMBER, EXPLAINS, DETAILED)

TEACHER_STYLES: dict[str, frozenset[str]] = {
    "terse": frozenset(),
    "terse_number": frozenset({NUMBER}),
    "short_friendly": frozenset({FRIENDLY}),
    "brief_specific": frozenset({NUMBER, EXPLAINS}),
    "specific_neutral": frozenset({NUMBER, EXPLAINS, DETAILED}),
    "specific_friendly": frozenset({FRIENDLY, NUMBER, EXPLAINS, DETAILED}),
}
TEACHER_BASE_MIX = {
    "terse": 0.35,
    "terse_number": 0.25,
    "short_friendly": 0.15,
    "brief_specific": 0.1,
    "specific_neutral": 0.05,
    "specific_friendly": 0.1,
}
"""Without an instruction: mostly terse verdicts."""


@dataclass(frozen=True)
class Directive:
    key: str
    forbids: frozenset[str]
    requires: frozenset[str]
    phrasings: tuple[str, ...]


STUDENT_DIRECTIVES = (
    Directive(
        "no_bold",
        frozenset({BOLD}),
        frozenset(),
        ("don't use bold", "no bold text", "please don't bold anything", "skip the bold formatting"),
    ),
    Directive(
        "no_steps",
        frozenset({LIST}),
        frozenset(),
        ("don't use numbered steps", "no numbered steps", "please don't make a list of steps", "skip the step list"),
    ),
    Directive(
        "no_label",
        frozenset({LABEL}),
        frozenset(),
        ("don't put an answer label at the end", "no separate answer line", "skip the answer heading"),
    ),
    Directive(
        "one_paragraph",
        frozenset({LIST, LABEL, LINES}),
        frozenset(),
        ("write it as one plain paragraph", "keep it to a single paragraph", "please write one short paragraph"),
    ),
    Directive(
        "casual",
        frozenset({BOLD, LIST, LABEL, LINES}),
        frozenset(),
        (
            "make it sound like a student wrote it",
            "write it in a casual way",
            "please make it less like an AI wrote it",
            "keep it natural and casual",
        ),
    ),
    Directive(
        "structured",
        frozenset(),
        frozenset({LIST, LINES}),
        ("use numbered steps", "lay it out step by step", "please show each step on its own line"),
    ),
    Directive(
        "bold_answer",
        frozenset(),
        frozenset({BOLD}),
        ("put the result in bold", "bold the key numbers", "use bold for the answer"),
    ),
)

TEACHER_DIRECTIVES = (
    Directive(
        "friendly",
        frozenset(),
        frozenset({FRIENDLY}),
        ("be friendly and encouraging", "please sound warmer", "add some encouragement", "keep a kind tone"),
    ),
    Directive(
        "specific",
        frozenset(),
        frozenset({NUMBER, EXPLAINS}),
        (
            "be more specific about what the student did",
            "mention the actual numbers in the work",
            "please say which steps the student got right",
        ),
    ),
    Directive(
        "detailed",
        frozenset(),
        frozenset({DETAILED}),
        ("give more detail", "please write a fuller comment", "say a bit more"),
    ),
    Directive(
        "brief",
        frozenset({DETAILED}),
        frozenset(),
        ("keep it short", "just a line or two", "please be brief"),
    ),
    Directive(
        "verdict_only",
        frozenset({FRIENDLY, NUMBER, EXPLAINS, DETAILED}),
        frozenset(),
        ("just give the verdict", "only say if it is right", "one word is enough"),
    ),
)

TASK_KIND = {"student": "student", "manager": "student", "teacher": "teacher"}
"""What a user of each preference asks about: the manager (two-user benchmark) works on the student's problems."""

DIRECTIVES = {"student": STUDENT_DIRECTIVES, "teacher": TEACHER_DIRECTIVES}
STYLES = {"student": STUDENT_STYLES, "teacher": TEACHER_STYLES}
BASE_MIX = {"student": STUDENT_BASE_MIX, "teacher": TEACHER_BASE_MIX}
INSTRUCTION_LABELS = ("", "Note: ", "Instruction: ", "[instruction]\n", "[user's hint / instruction]\n", "P.S. ")
"""How an instruction is attached after a request: inline, labelled, or bracketed as a hint (the paper's label)."""


def consistent_styles(setting: str, directives: list[Directive]) -> list[str]:
    out = []
    for name, feats in STYLES[setting].items():
        if all(not (d.forbids & feats) and d.requires <= feats for d in directives):
            out.append(name)
    return out


def pick_style(setting: str, directives: list[Directive], rng: random.Random) -> str:
    """The style a well-behaved model answers in: one consistent with every directive, drawn by the base mix."""
    names = consistent_styles(setting, directives) or list(STYLES[setting])
    mix = BASE_MIX[setting]
    weights = [mix[n] for n in names]
    return rng.choices(names, weights=weights)[0]


def directive_text(directives: list[Directive], rng: random.Random) -> str:
    parts = [rng.choice(d.phrasings) for d in directives]
    if len(parts) == 1:
        text = parts[0]
    else:
        text = ", ".join(parts[:-1]) + rng.choice([" and ", ", and ", ". Also "]) + parts[-1]
    return text[0].upper() + text[1:] + "."


# ---- asking ----------------------------------------------------------------------------------------------------

STUDENT_ASKS = (
    "Can you help me with this homework problem? {p}",
    "Help me solve this: {p}",
    "How do I do this one? {p}",
    "I need help with this problem. {p}",
    "Please solve this for me: {p}",
)
TEACHER_ASKS = (
    "Please grade this student's work and write a comment.\nProblem: {p}\nStudent's work: {w}",
    "Write a grading comment for this answer.\nProblem: {p}\nStudent's work: {w}",
    "Can you grade this?\nProblem: {p}\nStudent's work: {w}",
    "Grade the student's answer below and leave feedback.\nProblem: {p}\nStudent's work: {w}",
)


def ask(setting: str, task: Problem | GradingTask, rng: random.Random) -> str:
    if TASK_KIND[setting] == "student":
        assert isinstance(task, Problem)
        return rng.choice(STUDENT_ASKS).format(p=task.text)
    assert isinstance(task, GradingTask)
    return rng.choice(TEACHER_ASKS).format(p=task.problem.text, w=task.student_work())


# ---- writing answers -------------------------------------------------------------------------------------------


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


def student_answer(problem: Problem, style: str, rng: random.Random) -> str:
    steps, ans = problem.steps, problem.answer_text()
    if style == "ai_full":
        opener = rng.choice(["Let's break this down step by step.\n\n", "", "Here is the solution.\n\n"])
        if rng.random() < 0.5:
            body = "\n".join(
                f"{i + 1}. **{_cap(s.description)}:** {s.expression} = **{s.value}**" for i, s in enumerate(steps)
            )
        else:
            body = "\n\n".join(
                f"**Step {i + 1}: {_cap(s.description)}**\n{s.expression} = {s.value}" for i, s in enumerate(steps)
            )
        return f"{opener}{body}\n\n**Answer:** {ans}"
    if style == "ai_light":
        body = "\n".join(f"{i + 1}. {_cap(s.description)}: {s.expression} = {s.value}" for i, s in enumerate(steps))
        return f"{body}\n\nAnswer: {ans}"
    para = _paragraph(steps, rng)
    if style == "two_part":
        return f"{para}\n\nAnswer: {ans}"
    if style == "casual_bold":
        return f"{para} So the answer is **{ans}**."
    return f"{para} So the answer is {ans}."


def _paragraph(steps: tuple[Step, ...], rng: random.Random) -> str:
    links = ["First,", "Then", "After that", "Next", "Finally"]
    out = []
    for i, s in enumerate(steps):
        lead = links[0] if i == 0 else (links[-1] if i == len(steps) - 1 and len(steps) > 2 else rng.choice(links[1:4]))
        verb = rng.choice(["is", "comes to", "works out to"])
        out.append(f"{lead} {s.description} {verb} {s.expression} = {s.value}.")
    return " ".join(out)


PRAISE_OPEN = ("Great work!", "Nice job!", "Well done!", "Good effort!", "Nice try!")
PRAISE_CLOSE = ("Keep it up!", "Keep going, you are close!", "Great effort overall!", "You are doing well!")


def teacher_comment(task: GradingTask, style: str, rng: random.Random) -> str:
    ok = task.student_correct
    verdict = "Correct." if ok else "Incorrect."
    got = task.student_answer
    truth = task.problem.answer
    if style == "terse":
        return verdict
    if style == "terse_number":
        return f"{verdict} The answer is {truth}." if rng.random() < 0.5 else f"Answer: {truth}."
    if style == "short_friendly":
        opener = rng.choice(PRAISE_OPEN[:3]) if ok else "Nice try!"
        return f"{verdict} {opener}" if rng.random() < 0.5 else f"{opener} {rng.choice(PRAISE_CLOSE)}"
    first = task.student_steps[0]
    if style == "brief_specific":
        if ok:
            return f"{verdict} You found {first.description} with {first.expression} = {first.value} and got {got}."
        w = task.student_steps[task.wrong_step]
        right = task.problem.steps[task.wrong_step].value
        return f"{verdict} You wrote {w.expression} = {w.value}, but it should be {right}."
    explained = _explain(task, rng)
    if style == "specific_neutral":
        return f"{verdict} {explained}"
    opener = rng.choice(PRAISE_OPEN[:3]) if ok else rng.choice(PRAISE_OPEN[3:])
    return f"{opener} {explained} {rng.choice(PRAISE_CLOSE)}"


def _explain(task: GradingTask, rng: random.Random) -> str:
    out = []
    for i, (mine, truth) in enumerate(zip(task.student_steps, task.problem.steps)):
        if task.student_correct or i < task.wrong_step:
            verb = rng.choice(["You correctly found", "You worked out", "You got"])
            out.append(f"{verb} {mine.description} as {mine.expression} = {mine.value}.")
        elif i == task.wrong_step:
            out.append(
                f"For {mine.description} you wrote {mine.expression} = {mine.value}, but it is {truth.value}, "
                f"so check that step again."
            )
            break
    if task.student_correct:
        out.append(f"That gives the final answer of {task.problem.answer}, which is right.")
    else:
        out.append(f"With that fixed, the final answer would be {task.problem.answer}.")
    return " ".join(out)


def write_answer(setting: str, task: Problem | GradingTask, style: str, rng: random.Random) -> str:
    if setting == "student":
        assert isinstance(task, Problem)
        return student_answer(task, style, rng)
    assert isinstance(task, GradingTask)
    return teacher_comment(task, style, rng)
