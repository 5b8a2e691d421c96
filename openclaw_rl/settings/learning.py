"""Learning from next states: the judge (PRM votes, hindsight hints) and the teacher."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator


class HeuristicJudgeSettings(BaseModel):
    """An offline judge that needs no LLM: explicit feedback in user replies, error markers in tool results.
    A baseline for offline use and tests, not the paper's judge."""

    type: Literal["heuristic"] = "heuristic"


class LlmJudgeSettings(BaseModel):
    """The paper's judge: an LLM prompted with appendix C.1 (PRM) and C.2 (hints)."""

    type: Literal["llm"] = "llm"
    url: str | None = None
    """Base URL of the judge server. None: the policy servers themselves."""
    api: Literal["openai", "native"] = "openai"
    """`openai`: POST {url}/v1/chat/completions (SGLang, vLLM, any OpenAI-compatible server).
    `native`: render the judge prompt here and POST {url}/generate (SGLang's native API, the embedded engine)."""
    model: str = "default"
    """Model name sent to an OpenAI-compatible judge."""
    api_key: SecretStr = SecretStr("")
    """Bearer key for the judge endpoint, if it needs one."""
    tokenizer_path: Path | None = None
    """`native` only: local tokenizer + chat template of the judge model. None: the policy's."""
    temperature: float = Field(0.6, ge=0, le=2)
    """Sampling temperature of each vote (the reference's 0.6)."""
    prm_max_tokens: int = Field(4096, ge=16)
    """Most tokens a PRM vote may write."""
    hint_max_tokens: int = Field(8192, ge=16)
    """Most tokens a hint vote may write."""
    timeout_s: float = Field(120.0, gt=0)
    """Upper bound on one vote; a vote that times out counts as no vote."""
    max_concurrency: int = Field(8, ge=1, le=4096)
    """Votes one judge worker process has in flight at the judge endpoint; more wait their turn (its own budget,
    apart from the policy's and the teacher's)."""
    vision: bool = False
    """The endpoint accepts images (OpenAI `image_url` content): GUI step votes get the screenshots; else the page's
    element listing. `openai` api only; the judge worker reads the PNGs from the data directory."""


class TeacherSettings(BaseModel):
    """A frozen teacher that scores the response under the hint-enhanced context (the reference's choice).

    It must share the policy's tokenizer: its log-probs are compared with the rollout's token by token.
    """

    url: str
    """Base URL of the teacher server (an SGLang server or router, or an embedded engine)."""
    api: Literal["native"] = "native"
    """SGLang's native API: POST {url}/generate with return_logprob and logprob_start_len, the log-probs of the
    given token ids. An OpenAI-compatible /v1/completions (echo + logprobs) is not offered: servers differ in how
    they tokenize and scale prompt log-probs (none applies the sampling temperature), so the teacher term would
    not compare like with like."""
    api_key: SecretStr = SecretStr("")
    """Bearer key for the teacher endpoint, if it needs one."""
    max_concurrency: int = Field(8, ge=1, le=4096)
    """Scoring calls one policy worker process has in flight at the teacher; more wait their turn."""
    timeout_s: float = Field(300.0, gt=0)
    """Upper bound on one scoring call."""
    max_attempts: int = Field(4, ge=1, le=20)
    """Tries per call when the failure can succeed on retry (connection errors, timeouts, 5xx)."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"learning.teacher.url must be an http(s) URL, got {value!r}")
        return value.rstrip("/")


class LearningSettings(BaseModel):
    """How next-state signals become training samples (paper section 4)."""

    enabled: bool = True
    """Judge paired turns and publish samples. False: serve and record only."""
    method: Literal["binary", "opd", "combined"] = "combined"
    """binary RL, hindsight-guided OPD, or both (the paper's best)."""
    w_binary: float = 1.0
    """Weight of the scalar reward in the combined advantage."""
    w_opd: float = 1.0
    """Weight of the teacher-minus-rollout log-prob term."""
    prm_votes: int | None = Field(None, ge=1, le=16)
    """Parallel PRM votes per turn. None: 3 for binary, 1 for combined (the reference)."""
    hint_votes: int = Field(1, ge=1, le=16)
    """Parallel hint votes per turn (OPD and combined)."""
    judge: HeuristicJudgeSettings | LlmJudgeSettings | None = Field(None, discriminator="type")
    """None: `heuristic` when the policy is the built-in tiny model (an LLM judge over noise yields no signal),
    else `llm` on the policy servers."""
    teacher: TeacherSettings | None = None
    """A frozen teacher server. None: the current policy scores its own answer under the hint (the paper). The
    older `teacher_url = "..."` is read as `teacher.url`."""
    vote_timeout_s: float = Field(180.0, gt=0)
    """Upper bound on one try of one vote (a judge call that hangs counts as a failed try)."""
    source: str = "personal"
    """Sample stream of the personal agent (general agents publish to their own)."""

    @model_validator(mode="before")
    @classmethod
    def _teacher_url_is_teacher(cls, data: Any) -> Any:
        """Config files and env vars written before `teacher` existed name only `teacher_url`."""
        if not isinstance(data, dict) or "teacher_url" not in data:
            return data
        data = dict(data)
        url = data.pop("teacher_url")
        if data.get("teacher") is not None:
            raise ValueError("set learning.teacher.url or the older learning.teacher_url, not both")
        if url:
            data["teacher"] = {"url": url}
        return data

    def votes_for_prm(self) -> int:
        return self.prm_votes or (3 if self.method == "binary" else 1)
