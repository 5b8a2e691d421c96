"""SGLang's native HTTP API, the subset this system uses, as typed models.

Field names, shapes and defaults follow SGLang's `GenerateReqInput`,
`SamplingParams` and `/generate` answers, so the embedded engine and a real
SGLang server are interchangeable behind `PolicyClient`. Log-prob entries are
SGLang's triples (logprob, token_id, decoded_text_or_null).
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Literal
from urllib.parse import quote, unquote

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

LogprobEntry = tuple[float | None, int, str | None]

_VERSION_LABEL = r"[A-Za-z0-9._-]{1,64}"
WEIGHT_VERSION_PATTERN = f"^{_VERSION_LABEL}$"
"""A weight version label: it is echoed in every answer, logged and stored with turns, so it stays a short plain
token that can never carry a path separator, a newline or markup."""


def is_safe_version(label: str) -> bool:
    """Whether `label` matches WEIGHT_VERSION_PATTERN (fullmatch: Python's `$` would let a trailing newline in)."""
    return re.fullmatch(_VERSION_LABEL, label) is not None


class SamplingParams(BaseModel):
    """Per-request sampling, as SGLang's `sampling_params` object."""

    model_config = ConfigDict(extra="forbid")

    max_new_tokens: int = Field(128, ge=0)
    """Most tokens to generate; 0 only scores the input."""
    temperature: float = Field(1.0, ge=0)
    """0 means greedy decoding."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling mass."""
    top_k: int = -1
    """Keep the k most likely tokens; -1 (or 0) disables."""
    min_p: float = Field(0.0, ge=0, le=1)
    """Drop tokens less likely than min_p times the most likely one."""
    stop: str | list[str] | None = None
    """Stop strings; the text is trimmed before the match unless no_stop_trim."""
    stop_token_ids: list[int] | None = None
    """Extra token ids that end generation (beside the model's EOS ids)."""
    ignore_eos: bool = False
    """Keep generating past EOS tokens."""
    skip_special_tokens: bool = True
    """Drop special tokens from the returned text (ids are always returned)."""
    spaces_between_special_tokens: bool = True
    """Accepted for compatibility; byte-level BPE decodes without extra spaces."""
    no_stop_trim: bool = False
    """Keep the matched stop string in the text."""
    n: int = Field(1, ge=1, le=1)
    """Only 1 is supported, as in this system's use of SGLang."""

    @field_validator("top_k")
    @classmethod
    def _top_k(cls, v: int) -> int:
        if v < -1:
            raise ValueError("top_k must be -1 (disabled) or a positive integer")
        return v

    def stop_strings(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else [s for s in self.stop if s]


class GenerateRequest(BaseModel):
    """Body of POST /generate: one request, or a batch when text/input_ids is a list of prompts."""

    model_config = ConfigDict(extra="forbid")

    text: str | list[str] | None = None
    input_ids: list[int] | list[list[int]] | None = None
    sampling_params: SamplingParams | list[SamplingParams] | None = None
    return_logprob: bool | list[bool] = False
    logprob_start_len: int | list[int] = -1
    """First input position whose log-prob is returned; -1 returns none."""
    top_logprobs_num: int | list[int] = Field(0)
    return_text_in_logprobs: bool = False
    stream: bool = False
    rid: str | list[str] | None = None
    # Accepted and ignored: SGLang options that do not change a single-engine CPU answer.
    custom_logit_processor: Any = None
    lora_path: Any = None
    return_hidden_states: bool = False
    bootstrap_host: Any = None
    data_parallel_rank: int | None = None
    # What the sglang-router adds when it re-serializes a request for a worker (its GenerateRequest's defaults).
    model: str | None = None
    log_metrics: bool = True
    background: bool = False
    no_logs: bool = False
    return_bytes: bool = False
    return_entropy: bool = False

    @model_validator(mode="after")
    def _one_input(self) -> "GenerateRequest":
        if (self.text is None) == (self.input_ids is None):
            raise ValueError("give exactly one of `text` or `input_ids`")
        return self

    @property
    def is_batch(self) -> bool:
        if self.text is not None:
            return isinstance(self.text, list)
        return bool(self.input_ids) and isinstance(self.input_ids[0], list)

    def prompts(self) -> list[str | list[int]]:
        """The request's prompts, one per batch entry."""
        value = self.text if self.text is not None else self.input_ids
        return list(value) if self.is_batch else [value]  # type: ignore[list-item,arg-type]

    def per_request(self, field: str, i: int, default: Any) -> Any:
        """The i-th prompt's value of a field given either once or once per prompt."""
        value = getattr(self, field)
        if value is None:
            return default
        if isinstance(value, list):
            n = len(self.prompts())
            if len(value) != n:
                raise ValueError(f"`{field}` has {len(value)} entries for {n} prompts")
            return value[i]
        return value


class FinishReason(BaseModel):
    type: Literal["stop", "length", "abort"]
    matched: int | str | None = None
    """The stop token id or stop string that ended generation (type stop)."""
    length: int | None = None
    """The token budget that ended generation (type length)."""
    message: str | None = None


class MetaInfo(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    finish_reason: FinishReason | None = None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    e2e_latency: float | None = None
    weight_version: str | None = None
    """Version label of the weights that produced every token of this answer."""
    output_token_logprobs: list[LogprobEntry] | None = None
    input_token_logprobs: list[LogprobEntry] | None = None
    output_top_logprobs: list[list[LogprobEntry] | None] | None = None
    input_top_logprobs: list[list[LogprobEntry] | None] | None = None


class GenerateResponse(BaseModel):
    model_config = ConfigDict(extra="allow")

    text: str
    output_ids: list[int]
    meta_info: MetaInfo


class UpdateWeightsFromDiskRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model_path: str
    load_format: str | None = None
    abort_all_requests: bool = False
    weight_version: str | None = Field(None, pattern=WEIGHT_VERSION_PATTERN)
    """Label of the new weights; None: the checkpoint's own label, else the current one."""
    flush_cache: bool = True


class UpdateWeightsResult(BaseModel):
    success: bool
    message: str
    num_paused_requests: int = 0


class ModelInfo(BaseModel):
    model_config = ConfigDict(extra="allow")

    model_path: str
    tokenizer_path: str | None = None
    is_generation: bool = True
    weight_version: str | None = None
    preferred_sampling_params: Any = None


class ErrorBody(BaseModel):
    """SGLang's error answer: {"error": {"message": ..., "code": ...}} (object form) or {"detail": ...}."""

    model_config = ConfigDict(extra="allow")

    error: Any = None
    detail: Any = None
    message: str | None = None

    def reason(self) -> str:
        if isinstance(self.error, dict):
            return str(self.error.get("message") or self.error)
        return str(self.error or self.detail or self.message or "no reason given")


TENANT_RID_PREFIX = "t/"
"""Request ids of the form t/<tenant, percent-quoted>/<hex> carry the tenant in the body, which the sglang-router
forwards (it drops unknown headers, X-Openclaw-Tenant among them). SGLang takes any unique string as a rid."""


def tenant_rid(tenant: str) -> str:
    return f"{TENANT_RID_PREFIX}{quote(tenant, safe='')}/{uuid.uuid4().hex}"


def tenant_of_rid(rid: object) -> str | None:
    """The tenant a `tenant_rid` names; None for any other rid (a list, a client's own id)."""
    if not isinstance(rid, str) or not rid.startswith(TENANT_RID_PREFIX):
        return None
    parts = rid.split("/")
    if len(parts) != 3 or not parts[1] or not re.fullmatch(r"[0-9a-f]{32}", parts[2]):
        return None
    return unquote(parts[1])
