"""OpenTelemetry traces: one trace per chat turn and per episode step, across the processes that serve it.

Off unless the standard variables ask for it: `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`), or
`OTEL_TRACES_EXPORTER=otlp`; the OTLP/HTTP exporter then reads every other `OTEL_*` variable itself (headers,
timeout, `OTEL_BSP_*` batching, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`). Each process names itself
(`openclaw-rl-api`, `openclaw-rl-worker-policy`, `openclaw-rl-engine`, ...).

How a turn is followed: the API opens a server span per request (continuing the caller's `traceparent` when it
sends one); Temporal's TracingInterceptor carries the context in workflow and activity headers, so the workflow
worker's and every pool's spans join it; the policy client sends `traceparent` to the engine, which opens its own
span. Temporal's own server is not instrumented.
"""

from __future__ import annotations

import atexit
import os

import structlog

log = structlog.get_logger(__name__)

_enabled: bool | None = None


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
    name = os.environ.get("OTEL_SERVICE_NAME") or f"openclaw-rl-{process}"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
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
