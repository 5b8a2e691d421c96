"""Made-up training samples for tests that need only token ids and log-probs, not an engine's rollout."""

from __future__ import annotations

from contracts.learning import JudgeSummary
from store.samples import PersonalTurn, TrainingSample


def personal_sample(
    sample_id: str,
    prompt_ids: list[int],
    response_ids: list[int],
    rollout_logprobs: list[float],
    advantages: list[float],
    *,
    policy_version: str = "0",
    temperature: float = 1.0,
    reward: float = 1.0,
    loss_mask: int = 1,
    turn_id: str = "t",
    turn_index: int = 0,
) -> TrainingSample:
    """A binary-RL sample of a chat turn of user `u` in session `s`."""
    return TrainingSample(
        sample_id=sample_id,
        source="personal",
        policy_version=policy_version,
        temperature=temperature,
        reward=reward,
        loss_mask=loss_mask,
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        rollout_logprobs=rollout_logprobs,
        advantages=advantages,
        provenance=PersonalTurn(
            method="binary",
            user_id="u",
            session_id="s",
            turn_id=turn_id,
            turn_index=turn_index,
            use_teacher=False,
            reason="test",
            judge=JudgeSummary(judge="test"),
        ),
    )
