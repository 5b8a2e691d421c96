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
    STORE_UNAVAILABLE = "StoreUnavailable"
    """Redis is down or unreachable: retried until it is back (a sample is never given up for it). The API answers
    a turn that failed on it with 503 `store_unavailable`."""
    STORAGE_FULL = "StorageFull"
    """Redis refuses writes for lack of room (its memory limit, or a full disk under its append-only file): waited
    out like an outage, since expiry, training and an operator free room. The API answers 503 `storage_full`."""
    # training
    SAMPLE_MISSING = "SampleMissing"
    WEIGHT_LOAD_FAILED = "WeightLoadFailed"
    LABEL_TAKEN = "LabelTaken"
    CHECKPOINT_MISSING = "CheckpointMissing"
    CHECKPOINT_CORRUPT = "CheckpointCorrupt"
    """A checkpoint's trainer state was refused (not plain tensors) or is damaged: retrying cannot help."""
    NON_FINITE_UPDATE = "NonFiniteUpdate"
    """A train step produced NaN/Inf (loss, gradient or weights): nothing saved or published; the batch is dropped."""
    DISK_FULL = "DiskFull"
    """A checkpoint could not be written for lack of space: training pauses until an operator resumes it."""
    TRAINER_LOST = "TrainerLost"
    """The trainer does not hold the version the workflow trains from (its process restarted since): the workflow
    goes back to its last durable checkpoint and trains the samples since then again."""
    # general-agent episodes
    UNKNOWN_TASK = "UnknownTask"
    TASK_SETUP_FAILED = "TaskSetupFailed"
    ENV_MISSING = "EnvMissing"
    """A step reached a worker that does not hold the episode's environment."""
    ENV_LOST = "EnvLost"
    """The env worker holding the episode stopped answering; the episode starts over on another."""
    EPISODE_DATA_MISSING = "EpisodeDataMissing"
    WORKSPACE_UNREACHABLE = "WorkspaceUnreachable"
    """The env worker's sandbox could not reach the episode's workspace to check it (envs.sandbox.root under a folder
    the sandbox uids may not traverse): a misconfigured machine, reported instead of an outcome of 0."""
    ENV_PLUGIN_BROKEN = "EnvPluginBroken"
    """An environment plugin failed to load or broke the protocol (the message names it): retrying cannot help."""
    EPISODE_ABANDONED = "EpisodeAbandoned"
    """A client-driven episode heard nothing from its client for its idle timeout: it ends without an outcome."""
    EPISODE_NOT_YOURS = "EpisodeNotYours"
    """A client-driven episode's call with another user's key: answered as if the episode did not exist."""
    EPISODE_CONFLICT = "EpisodeConflict"
    """A client-driven episode's call does not fit its state (a step after the end, another outcome than the one
    posted, a tool of an episode without an environment)."""
    # evaluation
    EVAL_SET_INVALID = "EvalSetInvalid"
    """An evaluation set is unknown, or its JSONL file is missing or has a bad line (the message names it)."""
    EVAL_VERSION_MOVED = "EvalVersionMoved"
    """The policy servers no longer serve the version being evaluated: the next scheduled run takes the newest."""
    # health
    POOL_MISMATCH = "PoolMismatch"
    """A ping reached a worker of another pool: a misrouted task queue."""
