"""FastAPI application factory."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import Any

import structlog
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from api import (
    anthropic_messages,
    audit,
    chat,
    codec,
    episodes,
    metrics,
    openai_responses,
    openapi_spec,
    progress,
    user_data,
)
from api.admission import Admission
from api.errors import install_error_handlers
from api.policy_version import PolicyVersionWatcher
from api.session_gateway import SessionGateway
from control.api_keys import KeyStore
from openclaw_rl import tracing
from openclaw_rl.settings import Settings
from policy_client import PolicyClient
from store.client import Store

log = structlog.get_logger(__name__)

PROBE_TIMEOUT_S = 3.0


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.settings = settings
        app.state.store = Store.from_settings(settings)
        app.state.policy = PolicyClient.from_settings(settings)
        app.state.keys = KeyStore(app.state.store.api_keys, settings.api_key_pepper.get_secret_value())
        app.state.gateway = SessionGateway(settings)
        app.state.admission = Admission(settings.api.max_inflight_per_user)
        app.state.started_at = time.time()
        app.state.policy_version = PolicyVersionWatcher(app.state.store.policy)
        app.state.policy_version.start()
        try:
            yield
        finally:
            await app.state.policy_version.stop()
            await app.state.policy.aclose()
            await app.state.store.aclose()

    app = FastAPI(title="OpenClaw-RL", lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(chat.router)
    app.include_router(anthropic_messages.router)
    app.include_router(openai_responses.router)
    app.include_router(audit.router)
    app.include_router(episodes.router)
    app.include_router(user_data.router)
    app.include_router(progress.router)
    if settings.keyring() is not None:
        app.include_router(codec.router)
        _allow_the_web_ui(app, settings)
    metrics.install(app)
    tracing.install_fastapi(app, "api")
    _document_hand_read_bodies(app)

    @app.get("/healthz")
    async def healthz() -> dict:
        """The process is alive (no dependency checked)."""
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        """Every dependency answers: Temporal, the store (Redis), and each policy server."""
        checks = await asyncio.gather(_temporal_ok(app), _store_ok(app), _policy_ok(app))
        body: dict[str, Any] = {"temporal": checks[0], "redis": checks[1], "policy": checks[2]}
        ready = all(c["ok"] for c in checks)
        body["status"] = "ready" if ready else "not ready"
        return JSONResponse(body, status_code=200 if ready else 503)

    return app


def _allow_the_web_ui(app: FastAPI, settings: Settings) -> None:
    """The Temporal Web UI calls the codec server from the browser: its origin may (CORS), no other (api.codec
    checks the Origin too: CORS only hides answers from other pages, it does not stop the request)."""
    from fastapi.middleware.cors import CORSMiddleware

    app.add_middleware(
        CORSMiddleware,
        allow_origins=settings.codec_origins(),
        allow_methods=["POST"],
        allow_headers=["*"],
        allow_credentials=True,
    )


def _document_hand_read_bodies(app: FastAPI) -> None:
    """/openapi.json (served without a key, like /docs) with the request schemas of bodies read by hand."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = openapi_spec.add_hand_read_bodies(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


async def _temporal_ok(app: FastAPI) -> dict:
    try:
        client = await asyncio.wait_for(app.state.gateway.client(), PROBE_TIMEOUT_S)
        await asyncio.wait_for(client.service_client.check_health(), PROBE_TIMEOUT_S)
        return {"ok": True}
    except Exception as exc:  # report, never raise: this is a probe
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


async def _store_ok(app: FastAPI) -> dict:
    try:
        await asyncio.wait_for(app.state.store.server.ping(), PROBE_TIMEOUT_S)
        return {"ok": True}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


async def _policy_ok(app: FastAPI) -> dict:
    """Ready while traffic can be served: the router answers, or (without one) any listed server does."""
    servers = await app.state.policy.health()
    return {"ok": any(servers.values()), "servers": servers}
