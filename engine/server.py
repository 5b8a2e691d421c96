"""HTTP front of the embedded engine: SGLang's native API (the subset this system uses).

Same routes, request fields and answer shapes as an SGLang server, so
`PolicyClient` (and any SGLang client) cannot tell them apart.

What it refuses, and why: requests without the bearer key when one is set
(SGLang's --api-key); bodies over a size limit; weight updates from folders
outside the allowed roots, sent as anything but application/json (a web page
can POST text/plain cross-site without asking), or labelled with anything but a
short plain token; generation requests over the token caps; requests of a tenant
that already has `engine.max_queued_per_tenant` waiting (503 with Retry-After).

Weight sync without disk (engine.weight_group): /init_weights_update_group joins
a trainer's process group, /update_weights_from_distributed receives a bucket
over it (a whole version is swapped in at once, in place), and
/destroy_weights_update_group leaves it. /pause_generation and
/continue_generation hold requests around an update instead of aborting them.

Tenants: a request may carry `X-Openclaw-Tenant: <opaque token>` (SGLang ignores
unknown headers, so the wire stays SGLang's); the scheduler shares slots fairly
between tenants. No header: the shared system bucket. A client that disconnects
stops its generation (streaming or not): the engine drops its row.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from engine.http_guards import BearerKey, Refused, _error
from engine.lora_adapters import LoraRegistry
from engine.routes_admin import add_admin_routes
from engine.routes_generate import _stream, add_generation_routes
from engine.routes_lora import add_lora_routes
from engine.routes_weights import add_weight_routes
from engine.scheduler import QueueFull, Scheduler
from engine.weight_group import WeightGroups
from openclaw_rl import tracing
from openclaw_rl.settings import EngineSettings

__all__ = ["_stream", "create_engine_app"]  # _stream: tests/policy_client/test_incremental_stream.py imports it here


def create_engine_app(scheduler: Scheduler, cfg: EngineSettings, *, weight_roots: Sequence[Path]) -> FastAPI:
    """The engine's routes over `scheduler`; `weight_roots`: the folders weight updates may load from."""
    app = FastAPI(title="openclaw-rl embedded engine (SGLang API)", docs_url=None, redoc_url=None)
    if cfg.api_key.get_secret_value():
        app.add_middleware(BearerKey, key=cfg.api_key.get_secret_value())
    weight_groups = WeightGroups()  # the weight routes join and use them; /get_server_info lists them
    tracing.install_fastapi(app, "engine")  # a span per request, in the trace of the activity that called

    @app.exception_handler(Refused)
    async def _refuse(_: Request, exc: Refused) -> JSONResponse:
        return _error(exc.status, str(exc))

    @app.exception_handler(QueueFull)
    async def _queue_full(_: Request, exc: QueueFull) -> JSONResponse:
        return _error(503, str(exc), {"Retry-After": str(exc.retry_after_s)})

    # On the app itself and in this order, as when they were written here (an included APIRouter is matched through
    # another layer in this FastAPI).
    loras = LoraRegistry(cfg.max_loras)  # LoRA adapters served on the base model (engine.lora_adapters)
    app.state.loras = loras
    add_generation_routes(app, scheduler, cfg, loras)
    add_admin_routes(app, scheduler, cfg, weight_groups)
    add_weight_routes(app, scheduler, cfg, weight_groups, weight_roots=weight_roots)
    add_lora_routes(app, scheduler, cfg, loras, weight_roots)
    return app
