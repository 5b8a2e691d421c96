"""Errors in OpenAI's JSON shape: {"error": {"message", "type", "param", "code"}}, or in the shape of the protocol
a route speaks (`register_error_shape`: Anthropic's Messages route has its own).

OpenAI clients surface `message` to the person, so each says what to do next.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from contracts.errors import ErrorType
from store.errors import StoreError, StoreFull, StoreUnavailable

log = structlog.get_logger(__name__)

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable",
}


ERROR_STATUS: dict[str, tuple[int, str]] = {
    ErrorType.INVALID_REQUEST: (400, "invalid_request"),
    ErrorType.PROMPT_TOO_LONG: (400, "context_length_exceeded"),
    ErrorType.EPISODE_NOT_YOURS: (404, "episode_not_found"),
    ErrorType.EPISODE_CONFLICT: (409, "episode_conflict"),
    ErrorType.EPISODE_ABANDONED: (409, "episode_conflict"),
    ErrorType.ENV_LOST: (409, "episode_conflict"),
    ErrorType.POLICY_UNAVAILABLE: (503, "policy_unavailable"),
    ErrorType.STORE_UNAVAILABLE: (503, "store_unavailable"),
    ErrorType.STORAGE_FULL: (503, "storage_full"),
    ErrorType.REQUEST_MISSING: (503, "request_lost"),
}
"""The HTTP status and error code of a workflow's failure, by its ApplicationError type: one map for a chat turn
(api.session_gateway) and an episode's call (api.episodes); a type not named here is the route's to handle."""


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param

    def body(self) -> dict:
        return error_body(self.status, self.message, code=self.code, param=self.param)

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


ErrorShape = Callable[["ApiError"], tuple[int, dict]]
"""An ApiError -> (HTTP status, body) in a protocol's own error shape."""

_SHAPES: dict[str, ErrorShape] = {}


def register_error_shape(path: str, shape: ErrorShape) -> None:
    """Errors of requests to `path` (auth, body, validation, the turn's own) answer in `shape`."""
    _SHAPES[path] = shape


def _respond(request: Request, exc: ApiError) -> JSONResponse:
    shape = _SHAPES.get(request.url.path.rstrip("/"))
    if shape is None:
        return exc.response()
    status, body = shape(exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def error_body(status: int, message: str, *, code: str | None = None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": _TYPES.get(status, "api_error"), "param": param, "code": code}}


def store_failure_code(exc: StoreError) -> str:
    return "storage_full" if isinstance(exc, StoreFull) else "store_unavailable"


def store_failure_message(exc: StoreError) -> str:
    if isinstance(exc, StoreFull) and exc.disk:
        return (
            "the server's disk is full: its store refuses writes, and nothing of this request was kept. "
            "Retry later; an operator must free space on the data disk."
        )
    if isinstance(exc, StoreFull):
        return (
            "the server's store is full (redis.maxmemory_mb reached); nothing of this request was kept. "
            "Retry later: stored data expires and training frees room; an operator can raise the limit."
        )
    if isinstance(exc, StoreUnavailable):
        return "the server's store (Redis) cannot be reached; retry shortly"
    return f"the server's store failed the request ({type(exc.__cause__ or exc).__name__}); retry shortly"


def store_error(exc: StoreError) -> ApiError:
    """The 503 a store failure answers a request with."""
    return ApiError(503, store_failure_message(exc), code=store_failure_code(exc))


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _respond(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return _respond(
            request, ApiError(422, f"{where or 'request'}: {first.get('msg', 'invalid value')}", param=where or None)
        )

    @app.exception_handler(StoreError)
    async def _store(request: Request, exc: StoreError) -> JSONResponse:
        log.warning(
            "the store refused or failed a request", path=request.url.path, error=f"{type(exc).__name__}: {exc}"
        )
        return _respond(request, store_error(exc))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", path=request.url.path)
        return _respond(
            request,
            ApiError(500, f"internal error ({type(exc).__name__}); the request was not completed. See the API log."),
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _respond(request, ApiError(exc.status_code, str(exc.detail)))
