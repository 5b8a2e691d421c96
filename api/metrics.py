"""GET /metrics of the API, in Prometheus text format: requests by route and status, their latency, turns in flight.

Behind the same key as the other routes (any valid API key). Routes are labelled by their template
(`/v1/chat/completions`, never a raw path), so the label set stays small whatever clients send.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import Caller, authenticate
from openclaw_rl.prometheus import CONTENT_TYPE, Registry

router = APIRouter()


class ApiMetrics:
    def __init__(self, app: FastAPI):
        self.registry = r = Registry()
        self.requests = r.counter(
            "api_requests_total", "HTTP requests answered, by route, method and status.", ["route", "method", "status"]
        )
        self.latency = r.histogram(
            "api_request_seconds", "Time to answer a request (to its last byte; streams included), by route.", ["route"]
        )
        self.in_flight = r.gauge("api_requests_in_flight", "HTTP requests being answered now.")
        r.gauge("api_turns_in_flight", "Chat turns admitted and not finished (streaming or not).", source=self._turns)
        self.app = app

    def _turns(self) -> list:
        admission = getattr(self.app.state, "admission", None)  # set when the app starts
        return [((), sum(admission.in_flight.values()) if admission is not None else 0)]


class _Measure:
    """ASGI middleware: counts and times every HTTP request by its route template."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics):
        self.app, self.m = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        self.m.in_flight.inc()
        try:
            await self.app(scope, receive, sending)
        finally:
            self.m.in_flight.dec()
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.m.requests.inc(route=route, method=scope.get("method", ""), status=str(status))
            self.m.latency.observe(time.perf_counter() - started, route=route)


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, caller: Caller = Depends(authenticate)) -> Response:
    return Response(request.app.state.metrics.registry.render(), media_type=CONTENT_TYPE)


def install(app: FastAPI) -> None:
    """The /metrics route and the middleware that feeds it."""
    app.state.metrics = ApiMetrics(app)
    app.include_router(router)
    app.add_middleware(_Measure, metrics=app.state.metrics)
