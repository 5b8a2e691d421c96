"""The REST API's ASGI application, built from the settings the process reads (`uvicorn api.main:app --factory`,
which `openclaw-rl api` runs)."""

from __future__ import annotations

from fastapi import FastAPI

from api.app import create_app
from openclaw_rl.settings import load_settings


def app() -> FastAPI:
    return create_app(load_settings())
