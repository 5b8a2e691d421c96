"""OpenTelemetry traces: one trace per chat turn and per episode step, across the processes that serve it.

Off unless the standard variables ask for it: `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`), or
`OTEL_TRACES_EXPORTER=otlp`; the OTLP/HTTP exporter then reads every other `OTEL_*` variable itself (headers,
timeout, `OTEL_BSP_*` batching, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`). Each process names itself
(`openclaw-rl-api`, `openclaw-rl-worker-policy`, `openclaw-rl-engine`, ...).

How a turn is followed: the API opens a server span per request (continuing the caller's `traceparent` when it
sends one); Temporal's TracingInterceptor carries the context in workflow and activity headers, so the workflow
worker's and every pool's spans join it; the policy client sends `traceparent` to the engine, which opens its own
span. Temporal's own server is not instrumented.

How an episode step is followed: not inside the episode's trace (fifty steps of it would be unreadable, and past
backends' span limits) but as a trace of its own. EpisodeWorkflow runs each step under `step_trace`, which
attaches a context derived from the run id and the step, so Temporal's activity spans, the policy client's
engine call and the step's votes join the step's trace, and records its root span (`EpisodeStep`, linked to the
episode's trace) when the step ends. A client-driven episode's call runs under the API request's trace instead:
the API passes it in the update (`traceparent()`, as an update's headers do not reach workflow code).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext

log = structlog.get_logger(__name__)

_enabled: bool | None = None
_chosen_ids: ContextVar[tuple[int, int] | None] = ContextVar("openclaw_rl_chosen_span_ids", default=None)
"""(trace id, span id) the next span takes instead of random ones: a step's root span, whose ids were derived
before its children started (see `step_trace`)."""


def wanted() -> bool:
    """Whether the environment asks for traces."""
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "")
    if exporter.lower() == "none":
        return False
    return bool(
        exporter.lower() == "otlp"
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def setup(process: str) -> bool:
    """Install the tracer provider for this process (once); True when tracing is on."""
    global _enabled
    if _enabled is not None:
        return _enabled
    _enabled = False
    if not wanted():
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:  # the OpenTelemetry SDK is a dependency; a trimmed install says so once
        log.warning("tracing asked for but the OpenTelemetry SDK is missing", error=str(exc))
        return False
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class _ChosenIds(RandomIdGenerator):
        def generate_trace_id(self) -> int:
            chosen = _chosen_ids.get()
            return chosen[0] if chosen else super().generate_trace_id()

        def generate_span_id(self) -> int:
            chosen = _chosen_ids.get()
            return chosen[1] if chosen else super().generate_span_id()

    name = os.environ.get("OTEL_SERVICE_NAME") or f"openclaw-rl-{process}"
    provider = TracerProvider(resource=Resource.create({"service.name": name}), id_generator=_ChosenIds())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    if trace.get_tracer_provider() is not provider:  # another library set one first: OpenTelemetry keeps the first
        log.warning(
            "tracing: another tracer provider was set first; episode steps' root spans cannot take their ids, so "
            "their spans lose their parent",
            service=name,
        )
    atexit.register(provider.shutdown)  # flush what is batched when the process ends
    _enabled = True
    log.info("tracing on", service=name)
    return True


def enabled() -> bool:
    return bool(_enabled)


def temporal_interceptors() -> list:
    """Interceptors for a Temporal client (and the workers made from it) when tracing is on."""
    if not enabled():
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor()]


def inject(headers: dict[str, str]) -> dict[str, str]:
    """`headers` with the current trace context (`traceparent`) added, for a call to another process."""
    if enabled():
        from opentelemetry.propagate import inject as _inject

        _inject(headers)
    return headers


def install_fastapi(app, process: str) -> None:
    """A server span per request, continuing the caller's trace (`traceparent`), when tracing is on."""
    if not enabled():
        return
    from opentelemetry import trace
    from opentelemetry.propagate import extract

    tracer = trace.get_tracer(f"openclaw_rl.{process}")

    @app.middleware("http")
    async def _traced(request, call_next):
        route = request.url.path
        with tracer.start_as_current_span(
            f"{request.method} {route}",
            context=extract(dict(request.headers)),
            kind=trace.SpanKind.SERVER,
            attributes={"http.request.method": request.method, "url.path": route},
        ) as span:
            response = await call_next(request)
            span.set_attribute("http.response.status_code", response.status_code)
            return response


def traceparent() -> str | None:
    """The current span as a W3C `traceparent`, for a call whose transport carries no headers (an update's
    argument); None when tracing is off or no span is current."""
    if not enabled():
        return None
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}" if ctx.is_valid else None


def _parsed(value: str | None) -> SpanContext | None:
    """The span context a `traceparent` names, or None (absent or malformed)."""
    if not value:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    ctx = trace.get_current_span(TraceContextTextMapPropagator().extract({"traceparent": value})).get_span_context()
    return ctx if ctx.is_valid else None


@contextlib.contextmanager
def step_trace(
    name: str,
    seed: str,
    *,
    clock: Callable[[], int],
    replaying: Callable[[], bool],
    parent: str | None = None,
    attributes: Mapping[str, str | int] | None = None,
) -> Iterator[None]:
    """Workflow code: what the block starts (activities, and through them the policy client and the engine) is a
    trace of its own rather than a part of the workflow's, which for a long episode would be unreadable and past
    backends' span limits.

    The block's root span is `name`, linked to the workflow's current span (the episode's trace). Its ids come
    from `seed` (sha256 of the run id and the step), so a replay attaches the same context, with no I/O or
    randomness; its trace is `parent`'s (a `traceparent`: a client-driven step's API request) when given. The root
    span is recorded when the block ends unless that end is being replayed (`clock`, `replaying`: the workflow's
    `time_ns` and `is_replaying`), as Temporal's own workflow spans are. A no-op when tracing is off."""
    if not enabled():
        yield
        return
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    episode = trace.get_current_span().get_span_context()
    up = _parsed(parent)
    digest = hashlib.sha256(seed.encode()).digest()
    trace_id = up.trace_id if up else int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    flags = up.trace_flags if up else episode.trace_flags if episode.is_valid else trace.TraceFlags.SAMPLED
    step = trace.SpanContext(trace_id, span_id, is_remote=False, trace_flags=trace.TraceFlags(flags))
    started = clock()
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(step)))
    try:
        yield
    except Exception as exc:  # a failed step's span says so; a cancellation or an eviction records nothing
        if not replaying():
            _record_root(name, step, up, episode, attributes, started, clock(), exc)
        raise
    else:
        if not replaying():
            _record_root(name, step, up, episode, attributes, started, clock(), None)
    finally:
        with contextlib.suppress(ValueError):  # a block finalised in another context (an evicted workflow's)
            token.var.reset(token)


def _record_root(
    name: str,
    step: SpanContext,
    up: SpanContext | None,
    episode: SpanContext,
    attributes: Mapping[str, str | int] | None,
    start_ns: int,
    end_ns: int,
    error: Exception | None,
) -> None:
    """The step's root span, with the ids its children already carry."""
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    parent = trace.set_span_in_context(trace.NonRecordingSpan(up)) if up else otel_context.Context()
    links = [trace.Link(episode)] if episode.is_valid else []
    ids = _chosen_ids.set((step.trace_id, step.span_id))
    try:
        span = trace.get_tracer("openclaw_rl.workflow").start_span(
            name, context=parent, links=links, attributes=dict(attributes or {}), start_time=start_ns
        )
    finally:
        _chosen_ids.reset(ids)
    if error is not None:
        span.record_exception(error)
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    span.end(end_time=end_ns)
