"""An episode attempt as the policy and the step judge see it: the conversation so far, and a vote's window of
steps, read from the store in one round trip whatever the step."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from temporalio.exceptions import ApplicationError

from contracts.errors import ErrorType
from store.episodes import EpisodeData, EpisodeDataMissing, EpisodeOpening, EpisodeStepData


@contextmanager
def missing_data_is_final():
    """Data the episode wrote is gone: retrying cannot bring it back."""
    try:
        yield
    except EpisodeDataMissing as exc:
        raise ApplicationError(str(exc), type=ErrorType.EPISODE_DATA_MISSING, non_retryable=True) from exc


async def conversation(episodes: EpisodeData, attempt_key: str, upto: int) -> tuple[list[dict], list[dict]]:
    """The messages the policy sees before step `upto` (opening, then each step's action and observation), and tools.

    A setting with a history policy (`HISTORY`) sees only the steps the policy keeps once the history is long.
    """
    with missing_data_is_final():
        opening, done = await episodes.history(attempt_key, upto)
    steps = [[s.action.message, *s.observation.messages] for s in done]
    policy = HISTORY.get(opening.setting)
    if policy is not None:
        steps = policy.keep(steps)
    return [*opening.messages, *(m for step in steps for m in step)], opening.tools


async def vote_window(
    episodes: EpisodeData, attempt_key: str, step: int, history: int
) -> tuple[EpisodeOpening, list[EpisodeStepData]]:
    """The opening and the steps a vote on `step` reads: up to `history` before it, and itself."""
    with missing_data_is_final():
        return await episodes.steps(attempt_key, list(range(max(0, step - history), step + 1)))


@dataclass(frozen=True)
class HeadTail:
    """Past `max_chars` of step text, keep the first steps within `head` of it and the last within the rest.

    The reference's SWE history: head 30% + tail 70%. The first steps hold the agent's exploration of the task, the
    last its current work; the middle goes. Whole steps are kept or dropped (an action with its observation), and
    the last step always stays; a user note at the cut tells the policy how many steps it does not see.
    """

    max_chars: int
    head: float = 0.3

    def keep(self, steps: list[list[dict]]) -> list[list[dict]]:
        sizes = [sum(len(str(m.get("content") or "")) for m in step) for step in steps]
        if sum(sizes) <= self.max_chars or len(steps) < 2:
            return steps
        budget_head = self.max_chars * self.head
        n_head, used = 0, 0
        while n_head < len(steps) - 1 and used + sizes[n_head] <= budget_head:
            used, n_head = used + sizes[n_head], n_head + 1
        n_tail, used = 1, sizes[-1]
        budget_tail = self.max_chars - budget_head
        while n_head + n_tail < len(steps) and used + sizes[-n_tail - 1] <= budget_tail:
            used, n_tail = used + sizes[-n_tail - 1], n_tail + 1
        dropped = len(steps) - n_head - n_tail
        if dropped == 0:
            return steps
        steps_word = "steps" if dropped > 1 else "step"
        note = {"role": "user", "content": f"[{dropped} {steps_word} left out here: the history is long]"}
        return [*steps[:n_head], [note], *steps[-n_tail:]]


SWE_HISTORY_CHARS = 60_000
"""About 15k tokens of past steps: with the opening and a reply, within a 32k-token context."""
HISTORY: dict[str, HeadTail] = {"swe": HeadTail(max_chars=SWE_HISTORY_CHARS)}
"""Per-setting history policies; a setting not named here sees every step."""
