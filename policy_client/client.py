"""PolicyClient: the one way activities talk to policy servers.

Token-in/token-out: prompts arrive as token ids rendered on our side
(`policy_client.chat`), and the response ids and log-probs are exactly what the
server returned, never re-tokenized. Works against the embedded engine, an
SGLang server, or an SGLang router (a single URL); with several URLs,
generation spreads round-robin and weight updates go to every server.

Failures that can succeed on retry (connection errors, timeouts, HTTP 5xx) are
retried with exponential backoff, moving to the next server; a 4xx fails at once
with the server's reason.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any, AsyncIterator

import httpx
import structlog
from pydantic import BaseModel, Field

from policy_client.wire import (
    ErrorBody,
    FinishReason,
    GenerateResponse,
    ModelInfo,
    SamplingParams,
    UpdateWeightsResult,
)

log = structlog.get_logger(__name__)

TENANT_HEADER = "X-Openclaw-Tenant"
STREAM_MODE_HEADER = "X-Openclaw-Stream"
"""`incremental`: asks the embedded engine for SGLang's incremental streaming output on this request (SGLang sets it
per server with --incremental-streaming-output and ignores the header)."""
"""Whose request a generation is, for the embedded engine's fair sharing; SGLang ignores unknown headers."""
MAX_RETRY_AFTER_S = 30.0
"""Longest Retry-After a retry honours: beyond it, fail over to the caller's own retry policy."""


class PolicyRequestError(Exception):
    """The server refused the request (HTTP 4xx); retrying the same request cannot help."""

    def __init__(self, status: int, reason: str, url: str):
        super().__init__(f"{url} answered {status}: {reason}")
        self.status, self.reason, self.url = status, reason, url


class PolicyUnavailableError(Exception):
    """No policy server answered after every allowed attempt."""


class Generation(BaseModel):
    """What one generation produced, in the server's own tokens."""

    text: str
    output_ids: list[int]
    output_logprobs: list[float] = Field(default_factory=list)
    """Log-prob of each output token (rlmath.logprobs convention); empty unless requested."""
    finish_reason: FinishReason | None = None
    prompt_tokens: int = 0
    weight_version: str | None = None
    server: str = ""
    new_ids: list[int] = Field(default_factory=list)
    """Streaming: the tokens this event added (output_ids ends with them)."""
    new_logprobs: list[float] = Field(default_factory=list)
    new_text: str = ""
    """Streaming: the text this event added."""

    @classmethod
    def from_wire(cls, body: GenerateResponse, server: str) -> "Generation":
        meta = body.meta_info
        lps = [float(e[0]) if e[0] is not None else 0.0 for e in (meta.output_token_logprobs or [])]
        return cls(
            text=body.text,
            output_ids=body.output_ids,
            output_logprobs=lps,
            finish_reason=meta.finish_reason,
            prompt_tokens=meta.prompt_tokens,
            weight_version=meta.weight_version,
            server=server,
        )


class PolicyClient:
    def __init__(
        self,
        urls: list[str],
        *,
        request_timeout_s: float = 300.0,
        connect_timeout_s: float = 5.0,
        max_attempts: int = 4,
        backoff_s: float = 0.25,
        api_key: str = "",
        transport: httpx.AsyncBaseTransport | None = None,
        incremental_streaming: bool = True,
    ):
        """`api_key`: sent as `Authorization: Bearer <key>` on every call (SGLang's --api-key); empty sends none.
        `incremental_streaming`: ask for incremental stream events (the embedded engine honours it per request; an
        SGLang server streams incrementally when launched with --incremental-streaming-output). Either way the
        events are read by what they carry, so a server that sends cumulative snapshots is still understood."""
        self.incremental_streaming = incremental_streaming
        if not urls:
            raise ValueError("PolicyClient needs at least one server URL")
        self.urls = [u.rstrip("/") for u in urls]
        self._next = itertools.cycle(range(len(self.urls)))
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(request_timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
            headers={"Authorization": f"Bearer {api_key}"} if api_key else None,
            transport=transport,
        )

    @classmethod
    def from_settings(cls, settings: Any) -> "PolicyClient":
        """The policy servers of `settings`, called with their key (the embedded engine's own when it serves)."""
        p = settings.policy
        return cls(
            settings.policy_urls(),
            request_timeout_s=p.request_timeout_s,
            connect_timeout_s=p.connect_timeout_s,
            max_attempts=p.max_attempts,
            backoff_s=p.backoff_s,
            api_key=settings.policy_api_key().get_secret_value(),
            incremental_streaming=settings.embedded_engine or p.incremental_streaming,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "PolicyClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- generation ------------------------------------------------------
    async def generate(
        self,
        input_ids: list[int],
        sampling: SamplingParams,
        *,
        return_logprob: bool = True,
        tenant: str | None = None,
    ) -> Generation:
        """One generation. `tenant`: whose request it is (sent as X-Openclaw-Tenant; None: the system bucket)."""
        body = _generate_body(input_ids, sampling, return_logprob)
        raw, url = await self._call("POST", "/generate", body, headers=_tenant_headers(tenant))
        return Generation.from_wire(GenerateResponse.model_validate(raw), url)

    async def generate_stream(
        self,
        input_ids: list[int],
        sampling: SamplingParams,
        *,
        return_logprob: bool = True,
        tenant: str | None = None,
    ) -> AsyncIterator[Generation]:
        """The generation as it grows: one `Generation` per server event, the last one with finish_reason.

        Each carries what the event added (`new_ids`, `new_logprobs`, `new_text`) and everything so far
        (`output_ids`, `output_logprobs`, `text`). The two lists are the same objects from event to event, growing
        in place (linear time over the answer, however long): copy them to keep a snapshot.

        Incremental events (each only what is new, SGLang's incremental streaming output) are asked for when
        `incremental_streaming`; cumulative snapshots (SGLang's default) are understood too: an event is a delta
        when its tokens extend what came before to meta_info.completion_tokens.

        A connection that breaks before the first event is retried like `generate`;
        once tokens have been handed out, a break is raised (restarting would resample).
        `tenant` as in `generate`.
        """
        body = _generate_body(input_ids, sampling, return_logprob) | {"stream": True}
        headers = _tenant_headers(tenant)
        if self.incremental_streaming:
            headers = (headers or {}) | {STREAM_MODE_HEADER: "incremental"}
        attempt = 0
        while True:
            url = self._pick()
            started = False
            acc = _StreamAccumulator(url)
            try:
                async with self._http.stream("POST", f"{url}/generate", json=body, headers=headers) as resp:
                    if resp.status_code >= 400:
                        await resp.aread()
                        self._raise_for(resp, url)
                    async for line in resp.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            return
                        started = True
                        yield acc.feed(json.loads(data))
                    return
            except (httpx.TransportError, _Retryable) as exc:
                attempt += 1
                if started or attempt >= self.max_attempts:
                    raise PolicyUnavailableError(f"streaming from {url} failed: {exc}") from exc
                await self._backoff(attempt, url, exc)

    async def score(self, input_ids: list[int], start: int, *, temperature: float = 1.0) -> list[float]:
        """Log-probs of input_ids[start:] given everything before them (no generation).

        Used for teacher log-probs: the response span scored under another context.
        """
        if not 0 < start < len(input_ids):
            raise ValueError(f"start must be inside the prompt (1..{len(input_ids) - 1}), got {start}")
        sampling = SamplingParams(max_new_tokens=0, temperature=temperature)
        body = _generate_body(input_ids, sampling, True) | {"logprob_start_len": start}
        raw, _ = await self._call("POST", "/generate", body)
        entries = GenerateResponse.model_validate(raw).meta_info.input_token_logprobs or []
        values = [float(e[0]) for e in entries if e[0] is not None]
        # SGLang returns positions start..end; tolerate servers that include one earlier position.
        expected = len(input_ids) - start
        if len(values) < expected:
            raise PolicyUnavailableError(f"server returned {len(values)} input log-probs, expected {expected}")
        return values[-expected:]

    # ---- control plane ---------------------------------------------------
    async def update_weights_from_disk(
        self, model_path: str, weight_version: str | None = None
    ) -> list[UpdateWeightsResult]:
        """Ask every server to load `model_path`; raises if any refuses (it keeps its old weights)."""
        body = {"model_path": model_path, "weight_version": weight_version, "abort_all_requests": False}
        results = await asyncio.gather(
            *(self._call("POST", "/update_weights_from_disk", body, only=u) for u in self.urls)
        )
        out = [UpdateWeightsResult.model_validate(raw) for raw, _ in results]
        return out

    async def model_info(self) -> ModelInfo:
        raw, _ = await self._call("GET", "/get_model_info", None)
        return ModelInfo.model_validate(raw)

    async def health(self) -> dict[str, bool]:
        """Each server's /health, without retries (a probe must answer quickly)."""

        async def one(url: str) -> bool:
            try:
                return (await self._http.get(f"{url}/health", timeout=5.0)).status_code == 200
            except httpx.HTTPError:
                return False

        flags = await asyncio.gather(*(one(u) for u in self.urls))
        return dict(zip(self.urls, flags))

    async def flush_cache(self) -> None:
        await asyncio.gather(*(self._call("POST", "/flush_cache", None, only=u, expect_json=False) for u in self.urls))

    # ---- plumbing --------------------------------------------------------
    def _pick(self) -> str:
        return self.urls[next(self._next)]

    async def _call(
        self,
        method: str,
        path: str,
        body: dict | None,
        *,
        only: str | None = None,
        expect_json: bool = True,
        headers: dict[str, str] | None = None,
    ) -> tuple[Any, str]:
        attempt = 0
        while True:
            url = only or self._pick()
            try:
                resp = await self._http.request(method, f"{url}{path}", json=body, headers=headers)
                if resp.status_code >= 400:
                    self._raise_for(resp, url)
                return (resp.json() if expect_json else resp.text), url
            except (httpx.TransportError, _Retryable) as exc:
                attempt += 1
                if attempt >= self.max_attempts:
                    raise PolicyUnavailableError(f"{method} {path} failed after {attempt} attempts: {exc}") from exc
                await self._backoff(attempt, url, exc)

    async def _backoff(self, attempt: int, url: str, exc: BaseException) -> None:
        delay = self.backoff_s * (2 ** (attempt - 1))
        if isinstance(exc, _Retryable) and exc.retry_after_s is not None:  # the server said when it can serve
            delay = max(delay, min(exc.retry_after_s, MAX_RETRY_AFTER_S))
        log.warning("policy server call failed; retrying", url=url, attempt=attempt, delay_s=delay, error=str(exc))
        await asyncio.sleep(delay)

    @staticmethod
    def _raise_for(resp: httpx.Response, url: str) -> None:
        try:
            reason = ErrorBody.model_validate(resp.json()).reason()
        except ValueError:
            reason = resp.text[:500] or resp.reason_phrase
        if resp.status_code >= 500:
            raise _Retryable(f"{resp.status_code}: {reason}", _retry_after(resp))
        raise PolicyRequestError(resp.status_code, reason, url)


class _StreamAccumulator:
    """Folds stream events, incremental or cumulative, into one growing generation in time linear in its length.

    An event is incremental when its tokens extend those so far to meta_info.completion_tokens; a cumulative
    snapshot repeats them all (its token count is completion_tokens itself). The two are told apart from the
    second token on; before it they are the same thing.
    """

    def __init__(self, url: str):
        self.url = url
        self.ids: list[int] = []
        self.lps: list[float] = []
        self.text = ""

    def feed(self, raw: dict) -> Generation:
        meta = raw.get("meta_info") or {}
        ids = raw.get("output_ids") or []
        total = meta.get("completion_tokens", len(ids))
        entries = meta.get("output_token_logprobs") or []
        text = raw.get("text") or ""
        have = len(self.ids)
        incremental = have + len(ids) == total and not (have and len(ids) == total)
        if incremental:
            new_ids, new_entries, new_text = ids, entries, text
        else:  # a snapshot: keep only what it adds
            new_ids = ids[have:]
            new_entries = entries[len(self.lps) :]
            new_text = text[len(self.text) :] if text.startswith(self.text) else ""
        new_lps = [float(e[0]) if e[0] is not None else 0.0 for e in new_entries]
        self.ids.extend(new_ids)
        self.lps.extend(new_lps)
        self.text = self.text + new_text if incremental else text  # a snapshot's text may end trimmed (stop string)
        reason = meta.get("finish_reason")
        return Generation.model_construct(
            text=self.text,
            output_ids=self.ids,
            output_logprobs=self.lps,
            finish_reason=FinishReason.model_validate(reason) if reason else None,
            prompt_tokens=int(meta.get("prompt_tokens") or 0),
            weight_version=meta.get("weight_version"),
            server=self.url,
            new_ids=list(new_ids),
            new_logprobs=new_lps,
            new_text=new_text,
        )


class _Retryable(Exception):
    """A 5xx answer: the server may succeed on another try (after `retry_after_s`, when it said so)."""

    def __init__(self, message: str, retry_after_s: float | None = None):
        super().__init__(message)
        self.retry_after_s = retry_after_s


def _retry_after(resp: httpx.Response) -> float | None:
    """Retry-After in seconds (the engine sends it when a tenant's queue is full); None if absent or a date."""
    try:
        value = float(resp.headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if value >= 0 else None


def _tenant_headers(tenant: str | None) -> dict[str, str] | None:
    return {TENANT_HEADER: tenant} if tenant else None


def _generate_body(input_ids: list[int], sampling: SamplingParams, return_logprob: bool) -> dict:
    if not input_ids:
        raise ValueError("input_ids is empty")
    return {
        "input_ids": list(input_ids),
        "sampling_params": sampling.model_dump(exclude_defaults=True),
        "return_logprob": return_logprob,
    }
