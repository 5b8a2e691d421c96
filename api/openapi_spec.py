"""What `/openapi.json` says about the parts of the API that FastAPI cannot see.

`POST /v1/chat/completions` reads its body by hand (api.request_body: a size
limit, a depth limit, lone-surrogate checks and OpenAI-shaped errors before any
validation), so FastAPI knows no request schema for it. The route declares its
body here instead, from the same pydantic model that validates it
(api.openai_schema.ChatCompletionRequest) plus the routing fields that are
stripped before validation (api.session_identity.ROUTING_BODY_FIELDS), and the
headers it reads. Nothing here changes how a request is parsed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from api.idempotency import MAX_KEY_CHARS
from api.openai_schema import ChatCompletion, ChatCompletionRequest
from api.session_identity import MAX_SESSION_ID_CHARS

_REF = "#/components/schemas/{model}"
_NO_CONTROL_CHARACTERS = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """OpenAI's error shape, which every 4xx and 5xx of this API uses (api.errors)."""

    error: ErrorDetail


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorResponse, "description": description}


AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: _error("No bearer token, or a key this server never issued"),
    403: _error("The API key was revoked"),
}

CHAT_ERRORS: dict[int | str, dict[str, Any]] = {
    200: {
        "model": ChatCompletion,
        "description": "The completion; with `stream: true`, server-sent `chat.completion.chunk` events ending in "
        "`data: [DONE]`",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    400: _error(
        "Bad JSON, JSON nested too deep, a lone UTF-16 surrogate, a bad session id or Idempotency-Key, "
        "a prompt longer than the context"
    ),
    **AUTH_ERRORS,
    410: _error("The user was forgotten while the turn was on its way (`DELETE /v1/me/data`)"),
    413: _error("The body is over api.max_request_bytes"),
    422: _error("A field of the wrong type or value (`param` names it), or an Idempotency-Key reused"),
    429: _error("Too many requests in flight for this user or on this session"),
    503: _error("Temporal or the policy servers were unreachable beyond api.temporal_retry_s"),
}

SESSION_ERRORS: dict[int | str, dict[str, Any]] = {
    **AUTH_ERRORS,
    404: _error("No such session for this API key's user"),
}


USER_DATA_ERRORS: dict[int | str, dict[str, Any]] = {
    **AUTH_ERRORS,
    404: _error("Nothing is held about this API key's user"),
    422: _error("A query parameter of the wrong value (`param` names it)"),
    503: _error("Temporal or the store were unreachable"),
}


EPISODE_ERRORS: dict[int | str, dict[str, Any]] = {
    **AUTH_ERRORS,
    400: _error("A request that does not fit the episode (a bad setting, an outcome out of bounds, too long a prompt)"),
    404: _error("No such episode for this API key's user"),
    409: _error("The episode cannot take the call now (it ended, was abandoned, or has used its steps)"),
    410: _error("The key's user was forgotten while the call ran: nothing of it is kept"),
    413: _error("The body is over api.max_request_bytes, or the call over Temporal's payload limit"),
    422: _error("A field of the wrong type or value (`param` names it)"),
    503: _error("Temporal, the store or the policy servers were unreachable"),
}


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """openapi_extra for a route that reads a flat pydantic model's body by hand (api.request_body)."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema()}}}}


def _header(name: str, description: str, **schema: Any) -> dict[str, Any]:
    return {"name": name, "in": "header", "required": False, "description": description, "schema": schema}


_CHAT_HEADERS = [
    _header(
        "X-Session-Id",
        "The session this turn belongs to (printable text, no control characters); UTF-8 bytes are read as UTF-8",
        type="string",
        maxLength=MAX_SESSION_ID_CHARS,
        pattern=_NO_CONTROL_CHARACTERS,
    ),
    _header(
        "Idempotency-Key",
        "A retried request with the same key gets the same turn (printable ASCII)",
        type="string",
        minLength=1,
        maxLength=MAX_KEY_CHARS,
    ),
    _header("X-Turn-Type", "`main` (default) or anything else for a side turn", type="string"),
    _header("X-Session-Done", "`true`/`1`/`yes`/`on`: this turn ends the session", type="string"),
    _header(
        "x-session-affinity", "The stock OpenClaw client's session header (`<id>:<N>`; `:N` is dropped)", type="string"
    ),
]


def chat_request_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """(the body schema, the component schemas it refers to), from the model that validates the body."""
    schema = ChatCompletionRequest.model_json_schema(ref_template=_REF)
    defs = schema.pop("$defs", {})
    schema["description"] = (
        "OpenAI's chat-completions request. Unknown fields are accepted and ignored; `session_id`, `turn_type` and "
        "`session_done` route the turn and are not forwarded to the model."
    )
    schema["properties"].update(
        session_id={
            "type": "string",
            "maxLength": MAX_SESSION_ID_CHARS,
            "pattern": _NO_CONTROL_CHARACTERS,
            "description": "The session (as the X-Session-Id header, which wins)",
        },
        turn_type={"type": "string", "description": "`main` (default) or anything else for a side turn"},
        session_done={
            "anyOf": [{"type": "boolean"}, {"type": "string"}],
            "description": "true: this turn ends the session",
        },
    )
    return schema, defs


CHAT_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": _REF.format(model="ChatCompletionRequest")}}},
    },
    "parameters": _CHAT_HEADERS,
}
"""`openapi_extra` of the chat route: its body and headers."""


def add_hand_read_bodies(spec: dict[str, Any]) -> dict[str, Any]:
    """Register the schemas CHAT_OPENAPI refers to in the spec's components."""
    body, defs = chat_request_schema()
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in {**defs, "ChatCompletionRequest": body}.items():
        if schemas.setdefault(name, definition) != definition:
            raise ValueError(f"two different OpenAPI schemas named {name}")
    return spec
