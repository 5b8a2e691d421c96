"""`openclaw-rl api`: serve the REST API with uvicorn."""

from __future__ import annotations

from openclaw_rl.settings import Settings


def serve_api(settings: Settings) -> None:
    import uvicorn

    from api.app import create_app

    uvicorn.run(
        create_app(settings), host=settings.api.host, port=settings.api.port, log_level="warning", access_log=False
    )
