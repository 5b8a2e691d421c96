"""The training sample: what a judged turn hands to the trainer, and its Redis-stream encoding.

Arrays travel packed (int32 / float32) in the stream entry; the metadata is one
JSON field. The trainer decodes entries with `decode_sample`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from contracts.learning import JudgeSummary
from openclaw_rl.turn_data import pack_floats, pack_ints, unpack_floats, unpack_ints


class SampleMeta(BaseModel):
    sample_id: str
    """`<session workflow id>#<turn index>`: one per turn, ever."""
    source: str
    method: str
    user_id: str
    session_id: str
    turn_id: str
    turn_index: int
    policy_version: str | None
    temperature: float
    """Rollout log-probs are log_softmax(logits / T) at this T (rlmath.logprobs)."""
    reward: float
    loss_mask: int
    """1: learn from every response token; 0: submitted but never learned from."""
    use_teacher: bool
    reason: str
    judge: JudgeSummary


class TrainingSample(BaseModel):
    meta: SampleMeta
    prompt_ids: list[int]
    response_ids: list[int]
    rollout_logprobs: list[float]
    advantages: list[float]
    """Per response token: w_binary * r + w_opd * (teacher - rollout), or r alone."""
    teacher_logprobs: list[float] | None = None

    @property
    def loss_mask(self) -> list[int]:
        return [self.meta.loss_mask] * len(self.response_ids)


def encode_sample(s: TrainingSample) -> dict[str, Any]:
    return {
        "meta": s.meta.model_dump_json(),
        "prompt_ids": pack_ints(s.prompt_ids),
        "response_ids": pack_ints(s.response_ids),
        "rollout_logprobs": pack_floats(s.rollout_logprobs),
        "advantages": pack_floats(s.advantages),
        "teacher_logprobs": pack_floats(s.teacher_logprobs) if s.teacher_logprobs is not None else b"",
    }


def decode_sample(fields: dict[bytes, bytes]) -> TrainingSample:
    teacher = fields.get(b"teacher_logprobs", b"")
    return TrainingSample(
        meta=SampleMeta.model_validate_json(fields[b"meta"]),
        prompt_ids=unpack_ints(fields[b"prompt_ids"]),
        response_ids=unpack_ints(fields[b"response_ids"]),
        rollout_logprobs=unpack_floats(fields[b"rollout_logprobs"]),
        advantages=unpack_floats(fields[b"advantages"]),
        teacher_logprobs=unpack_floats(teacher) if teacher else None,
    )
