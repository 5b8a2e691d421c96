"""Simulated users: a student who does not want homework answers to look AI-written, a teacher who wants grading
comments to be specific and friendly, and (for the two-user benchmark) a manager who wants the opposite of the
student: homework-style answers laid out in bold numbered steps. Deterministic per seed: the same answers get the
same reactions.

Each user works through tasks (homework problems or student answers to grade), `TASKS_PER_SESSION` to a session,
and reacts to every answer as the paper's simulator does, judging it by the preference's features (`scorer`):
- satisfied (score >= 0.75): thanks, then the next task in the same message;
- lukewarm (score 0.5): moves on without comment ("OK.") to the next task;
- dissatisfied (score <= 0.25): an explicit correction — a complaint plus one or two directives in words
  ("Don't use bold, and write it as one plain paragraph.") and a request to redo it — or, sometimes, the same
  question again word for word; after `MAX_ATTEMPTS` answers to one task the user gives up and moves on.
The first answer of a session's last task gets no reaction (the session is left idle, as a person leaves a chat).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from evals.personalization import styles
from evals.personalization.problems import GradingTask, Problem, make_grading_task, make_problem
from evals.personalization.scorer import RuleScorer

TASKS_PER_SESSION = 3
MAX_ATTEMPTS = 3
REASK_RATE = 0.25
"""Of dissatisfied reactions, the share that asks the same thing again (no directive) instead of correcting."""

USER_COMPLAINTS = {
    "student": (
        "Ugh, this looks totally AI-generated.",
        "No, this is obviously written by an AI.",
        "My teacher would spot this as AI in a second.",
        "That's not how a student writes.",
    ),
    "manager": (
        "No, I can't skim this.",
        "That's not what I need for my report.",
        "Not helpful: this is a wall of text.",
        "This reads too casual for a status report.",
    ),
    "teacher": (
        "No, this comment is too bare for a student.",
        "Hmm, that's not helpful feedback.",
        "That feedback is too curt.",
        "A student learns nothing from that.",
    ),
}
USER_WANTS = {
    "student": ("no_bold", "no_steps", "one_paragraph", "casual", "no_label"),
    "manager": ("structured", "bold_answer"),
    "teacher": ("friendly", "specific", "detailed"),
}
USER_MD = {
    "student": (
        "I'm a student and I paste my homework here. My answers must not look AI-written: one plain, casual "
        "paragraph, no bold, no numbered steps, no 'Answer:' label."
    ),
    "manager": (
        "I'm a manager and I skim answers for my reports: lay them out as bold numbered steps with a bold answer line."
    ),
}
"""What each user's USER.md says of their taste (the benchmark with an LLM judge sends it as OpenClaw does: in the
system prompt), so a judge comparing two answers knows what this user wants."""
USER_THANKS = ("Thanks, that's perfect!", "Perfect, thank you!", "Great, that's exactly what I wanted, thanks.")
USER_MOVE_ON = ("OK.", "Alright.", "OK, next.")
USER_GIVE_UP = ("OK, let's just move on.", "Alright, forget it, next one.")
USER_REDO = ("Can you redo it?", "Please write it again.", "Try that again.")


@dataclass
class Reaction:
    kind: str
    """satisfied | moving_on | correction | re_ask | give_up"""
    message: str
    """What the user sends next (for satisfied/moving_on/give_up: with the next task's request)."""
    score: float
    next_task: bool


@dataclass
class SimulatedUser:
    setting: str
    name: str
    seed: int
    scorer: RuleScorer = field(default_factory=RuleScorer)
    tasks_done: int = 0

    def directives(self) -> list[styles.Directive]:
        by_key = {d.key: d for d in styles.DIRECTIVES[styles.TASK_KIND[self.setting]]}
        return [by_key[k] for k in USER_WANTS[self.setting]]

    def task(self, index: int) -> Problem | GradingTask:
        """The user's `index`-th task (from the `users` split: never a pretraining or held-out task)."""
        seed = (self.seed * 1009 + sum(map(ord, self.name))) % 1_000_003
        if styles.TASK_KIND[self.setting] == "student":
            return make_problem(seed, index, "users")
        return make_grading_task(seed, index, "users")

    def ask(self, task: Problem | GradingTask, rng: random.Random) -> str:
        return styles.ask(self.setting, task, rng)

    def rng(self, session: int, turn: int) -> random.Random:
        return random.Random(f"user:{self.seed}:{self.setting}:{self.name}:{session}:{turn}")

    def react(
        self,
        task: Problem | GradingTask,
        answer: str,
        *,
        last_request: str,
        attempts: int,
        re_asked: bool,
        next_request: str,
        rng: random.Random,
    ) -> Reaction:
        score = self.scorer.score(self.setting, task, answer).value
        if score >= 0.75:
            return Reaction("satisfied", f"{rng.choice(USER_THANKS)} {next_request}", score, True)
        if score >= 0.5:
            return Reaction("moving_on", f"{rng.choice(USER_MOVE_ON)} {next_request}", score, True)
        if attempts >= MAX_ATTEMPTS:
            return Reaction("give_up", f"{rng.choice(USER_GIVE_UP)} {next_request}", score, True)
        if not re_asked and rng.random() < REASK_RATE:
            return Reaction("re_ask", last_request, score, False)
        wanted = rng.sample(self.directives(), rng.choice([1, 2, 2]))
        text = (
            f"{rng.choice(USER_COMPLAINTS[self.setting])} {styles.directive_text(wanted, rng)} {rng.choice(USER_REDO)}"
        )
        return Reaction("correction", text, score, False)


def system_prompt(setting: str) -> str:
    """An OpenClaw-style system prompt carrying the user's USER.md (short: the benchmark's policies are small)."""
    return f"You are the user's personal assistant.\n\n# USER.md\n{USER_MD[setting]}"
