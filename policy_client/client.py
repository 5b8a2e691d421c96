"""PolicyClient: the one way activities talk to policy servers.

Token-in/token-out: prompts arrive as token ids rendered on our side
(`policy_client.chat`), and the response ids and log-probs are exactly what the
server returned, never re-tokenized. Works against the embedded engine, an
SGLang server, or an sglang-router.

Two planes: traffic (generate, score, model info) goes to `urls`, the router
when there is one; control calls (weight updates, cache flushes) go to every
server in `control_urls`, which a router does not forward to. With several
traffic URLs and no router, generation spreads round-robin, and a server that
just failed is skipped for a while so a dead one costs no retry delays.

Failures that can succeed on retry (connection errors, timeouts, HTTP 5xx) are
retried with exponential backoff, moving to the next server; a 4xx fails at once
with the server's reason.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any, AsyncIterator

import httpx
import structlog
from pydantic import BaseModel, Field

from openclaw_rl import tracing
from policy_client.rotation import EngineLeft, RotationWatch, wait_watched
from policy_client.wire import (
    ErrorBody,
    FinishReason,
    GenerateResponse,
    ModelInfo,
    SamplingParams,
    UpdateWeightsResult,
    tenant_rid,
)

log = structlog.get_logger(__name__)

TENANT_HEADER = "X-Openclaw-Tenant"
"""Whose request a generation is, for the embedded engine's fair sharing; SGLang ignores unknown headers. The
sglang-router does not forward them, so the tenant also travels in the request id (policy_client.wire.tenant_rid)."""
STREAM_MODE_HEADER = "X-Openclaw-Stream"
"""`incremental`: asks the embedded engine for SGLang's incremental streaming output on this request (SGLang sets it
per server with --incremental-streaming-output and ignores the header; the router does not forward it)."""
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
        control_urls: list[str] | None = None,
        server_down_s: float = 5.0,
        request_timeout_s: float = 300.0,
        connect_timeout_s: float = 5.0,
        max_attempts: int = 4,
        backoff_s: float = 0.25,
        api_key: str = "",
        transport: httpx.AsyncBaseTransport | None = None,
        incremental_streaming: bool = True,
        silence_probe_s: float = 5.0,
    ):
        """`urls`: where traffic goes (a router, or the servers themselves). `control_urls`: the servers that get
        every weight update and cache flush (None: `urls`, no router). `server_down_s`: how long a traffic URL that
        failed is skipped while another is up.
        `api_key`: sent as `Authorization: Bearer <key>` on every call (SGLang's --api-key); empty sends none.
        `incremental_streaming`: ask for incremental stream events (the embedded engine honours it per request; an
        SGLang server streams incrementally when launched with --incremental-streaming-output). Either way the
        events are read by what they carry, so a server that sends cumulative snapshots is still understood.
        `silence_probe_s`: a generation quiet this long asks whether its engine is still in rotation
        (policy_client.rotation)."""
        self.incremental_streaming = incremental_streaming
        if not urls:
            raise ValueError("PolicyClient needs at least one server URL")
        self.urls = [u.rstrip("/") for u in urls]
        self.control_urls = [u.rstrip("/") for u in control_urls] if control_urls else list(self.urls)
        self.routed = control_urls is not None and self.control_urls != self.urls
        """Traffic goes through a router (sglang-router), not straight to the servers."""
        self.server_down_s = server_down_s
        self._down_until: dict[str, float] = {}
        self._next = itertools.cycle(range(len(self.urls)))
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(request_timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
            headers={"Authorization": f"Bearer {api_key}"} if api_key else None,
            transport=transport,
        )
        self.silence_probe_s = silence_probe_s
        self._rotation = RotationWatch(
            self._http, routed=self.routed, traffic_urls=self.urls, timeout_s=connect_timeout_s, quiet_s=silence_probe_s
        )

    @classmethod
    def from_settings(cls, settings: Any) -> "PolicyClient":
        """The policy servers of `settings` (traffic through the router when there is one), called with their key
        (the embedded engines' own when they serve)."""
        p = settings.policy
        return cls(
            settings.traffic_urls(),
            control_urls=settings.policy_urls(),
            server_down_s=p.server_down_s,
            request_timeout_s=p.request_timeout_s,
            connect_timeout_s=p.connect_timeout_s,
            max_attempts=p.max_attempts,
            backoff_s=p.backoff_s,
            api_key=settings.policy_api_key().get_secret_value(),
            incremental_streaming=settings.embedded_engine or p.incremental_streaming,
            silence_probe_s=p.silence_probe_s,
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
        lora_path: str | None = None,
    ) -> Generation:
        """One generation. `tenant`: whose request it is (sent as X-Openclaw-Tenant; None: the system bucket).
        `lora_path`: the name of a LoRA adapter the server has loaded (SGLang's field; None: the base model)."""
        body = _generate_body(input_ids, sampling, return_logprob, tenant, lora_path)
        raw, url = await self._call("POST", "/generate", body, headers=_tenant_headers(tenant), watched=True)
        return Generation.from_wire(GenerateResponse.model_validate(raw), url)

    async def generate_stream(
        self,
        input_ids: list[int],
        sampling: SamplingParams,
        *,
        return_logprob: bool = True,
        tenant: str | None = None,
        lora_path: str | None = None,
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
        `tenant` and `lora_path` as in `generate`.
        """
        body = _generate_body(input_ids, sampling, return_logprob, tenant, lora_path) | {"stream": True}
        headers = _tenant_headers(tenant)
        if self.incremental_streaming:
            headers = (headers or {}) | {STREAM_MODE_HEADER: "incremental"}
        attempt = 0
        while True:
            url = self._pick()
            started = False
            acc = _StreamAccumulator(url)
            baseline = self._rotation.baseline(url)
            try:
                request = self._http.build_request("POST", f"{url}/generate", json=body, headers=headers)
                resp = await self._watched(self._http.send(request, stream=True), url, baseline)
                try:
                    if resp.status_code >= 400:
                        await resp.aread()
                        self._raise_for(resp, url)
                    lines = resp.aiter_lines()
                    while True:
                        try:
                            line = await self._watched(anext(lines), url, baseline)
                        except StopAsyncIteration:
                            break
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            return
                        started = True
                        yield acc.feed(json.loads(data))
                    return
                finally:
                    await resp.aclose()
            except (httpx.TransportError, _Retryable, EngineLeft) as exc:
                attempt += 1
                self._mark_down(url)
                if started or attempt >= self.max_attempts:
                    raise PolicyUnavailableError(f"streaming from {url} failed: {exc}") from exc
                if not self._another_is_up(url):
                    await self._backoff(attempt, url, exc)

    async def score(
        self, input_ids: list[int], start: int, *, temperature: float = 1.0, lora_path: str | None = None
    ) -> list[float]:
        """Log-probs of input_ids[start:] given everything before them (no generation).

        Used for teacher log-probs: the response span scored under another context. `lora_path`: score with that
        loaded adapter (a user's own policy), as in `generate`.
        """
        if not 0 < start < len(input_ids):
            raise ValueError(f"start must be inside the prompt (1..{len(input_ids) - 1}), got {start}")
        sampling = SamplingParams(max_new_tokens=0, temperature=temperature)
        body = _generate_body(input_ids, sampling, True, lora_path=lora_path) | {"logprob_start_len": start}
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
        """Ask every server to load `model_path`; raises if any refuses (it keeps its old weights) or cannot be
        reached (a server that is down must not be left on the old version unnoticed)."""
        body = {"model_path": model_path, "weight_version": weight_version, "abort_all_requests": False}
        results = await asyncio.gather(
            *(self._call("POST", "/update_weights_from_disk", body, only=u) for u in self.control_urls)
        )
        out = [UpdateWeightsResult.model_validate(raw) for raw, _ in results]
        return out

    async def model_info(self) -> ModelInfo:
        raw, _ = await self._call("GET", "/get_model_info", None)
        return ModelInfo.model_validate(raw)

    async def health(self) -> dict[str, bool]:
        """Whether each traffic URL can serve, without retries (a probe must answer quickly): a server's /health,
        or a router's /readiness (200 while at least one of its servers is healthy)."""
        path = "/readiness" if self.routed else "/health"

        async def one(url: str) -> bool:
            try:
                return (await self._http.get(f"{url}{path}", timeout=5.0)).status_code == 200
            except httpx.HTTPError:
                return False

        flags = await asyncio.gather(*(one(u) for u in self.urls))
        return dict(zip(self.urls, flags))

    async def flush_cache(self) -> None:
        await asyncio.gather(
            *(self._call("POST", "/flush_cache", None, only=u, expect_json=False) for u in self.control_urls)
        )

    # ---- plumbing --------------------------------------------------------
    async def _watched(self, step, url: str, baseline: asyncio.Future | None):
        """`step` (a coroutine) awaited, ended with EngineLeft when it stays quiet while an engine leaves."""
        return await wait_watched(asyncio.ensure_future(step), self._rotation, url, baseline, self.silence_probe_s)

    def _pick(self) -> str:
        """The next traffic URL round-robin, passing over those that failed lately while another is up."""
        now = time.monotonic()
        for _ in range(len(self.urls)):
            url = self.urls[next(self._next)]
            if self._down_until.get(url, 0.0) <= now:
                return url
        return self.urls[next(self._next)]  # every one failed lately: try them in turn anyway

    def _mark_down(self, url: str) -> None:
        if len(self.urls) > 1 and url in self.urls:
            self._down_until[url] = time.monotonic() + self.server_down_s

    def _another_is_up(self, url: str) -> bool:
        now = time.monotonic()
        return any(u != url and self._down_until.get(u, 0.0) <= now for u in self.urls)

    async def _call(
        self,
        method: str,
        path: str,
        body: dict | None,
        *,
        only: str | None = None,
        expect_json: bool = True,
        headers: dict[str, str] | None = None,
        watched: bool = False,
    ) -> tuple[Any, str]:
        """`watched`: a generation, which a quiet engine that left the rotation must not hold (rotation.py)."""
        attempt = 0
        while True:
            url = only or self._pick()
            try:
                sent = self._http.request(method, f"{url}{path}", json=body, headers=headers)
                resp = await (self._watched(sent, url, self._rotation.baseline(url)) if watched else sent)
                if resp.status_code >= 400:
                    self._raise_for(resp, url)
                return (resp.json() if expect_json else resp.text), url
            except (httpx.TransportError, _Retryable, EngineLeft) as exc:
                attempt += 1
                if attempt >= self.max_attempts:
                    raise PolicyUnavailableError(f"{method} {path} failed after {attempt} attempts: {exc}") from exc
                if only is None:
                    self._mark_down(url)
                    if self._another_is_up(url):  # no need to wait: the next try goes to another server
                        log.warning("policy server call failed; trying another", url=url, error=str(exc))
                        continue
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
    """Whose request it is, and the trace it belongs to (`traceparent`, when tracing is on)."""
    return tracing.inject({TENANT_HEADER: tenant} if tenant else {}) or None


def _generate_body(
    input_ids: list[int],
    sampling: SamplingParams,
    return_logprob: bool,
    tenant: str | None = None,
    lora_path: str | None = None,
) -> dict:
    if not input_ids:
        raise ValueError("input_ids is empty")
    body = {
        "input_ids": list(input_ids),
        "sampling_params": sampling.model_dump(exclude_defaults=True),
        "return_logprob": return_logprob,
    }
    if tenant:
        body["rid"] = tenant_rid(tenant)  # the one place the tenant survives the sglang-router
    if lora_path:
        body["lora_path"] = lora_path
    return body
