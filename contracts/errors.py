"""ApplicationError types: raised in one place, matched in another, never by message text."""

from __future__ import annotations

from enum import StrEnum


class ErrorType(StrEnum):
    # generate (the API maps these to HTTP statuses)
    PROMPT_TOO_LONG = "PromptTooLong"
    INVALID_REQUEST = "InvalidRequest"
    POLICY_UNAVAILABLE = "PolicyUnavailable"
    REQUEST_MISSING = "RequestMissing"
    STREAM_TAKEN_OVER = "StreamTakenOver"
    """A stale attempt found a newer attempt owning the turn's token stream."""
    # the session workflow's turn validator
    SESSION_CLOSED = "SessionClosed"
    """The session has ended; the caller starts a new run."""
    SESSION_ROLLING = "SessionRolling"
    """The workflow is continuing as new; the caller retries and reaches the new run."""
    # judging
    TURN_DATA_MISSING = "TurnDataMissing"
    JUDGE_CALL_FAILED = "JudgeCallFailed"
    # training
    SAMPLE_MISSING = "SampleMissing"
    WEIGHT_LOAD_FAILED = "WeightLoadFailed"
    LABEL_TAKEN = "LabelTaken"
    CHECKPOINT_MISSING = "CheckpointMissing"
    # health
    POOL_MISMATCH = "PoolMismatch"
    """A ping reached a worker of another pool: a misrouted task queue."""
