"""Reading a chat request's JSON body, refusing what would only break later.

Python's json parser recurses per nesting level (a deep enough body raises
RecursionError), and it accepts lone UTF-16 surrogates ("\\ud800") that no
UTF-8 encoder will take later (Redis, Temporal, the tokenizer). Both are the
client's mistake, so both are refused here with a 400 and where it happened,
before anything is stored.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import Request

from api.errors import ApiError

MAX_JSON_DEPTH = 64
"""Nesting levels a body may have. Chat messages need 4-5; tool JSON schemas rarely exceed 20."""

_SURROGATE = re.compile("[\ud800-\udfff]")


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    raw = await _read_bytes(request, limit)
    body = _parse(raw)
    if not isinstance(body, dict):
        raise ApiError(422, "the body must be a JSON object")
    _check_tree(body)
    return body


async def _read_bytes(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"request body is {int(declared)} bytes; the limit is {limit} (api.max_request_bytes)")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise ApiError(413, f"request body exceeds {limit} bytes (api.max_request_bytes)")
    return bytes(raw)


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}", code="invalid_json") from None


def _too_deep() -> ApiError:
    return ApiError(400, f"the JSON body is nested more than {MAX_JSON_DEPTH} levels deep", code="json_too_deep")


def _check_tree(body: dict[str, Any]) -> None:
    """Depth and string checks in one pass; iterative, so the walk itself cannot hit the recursion limit."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(body, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_JSON_DEPTH:
            raise _too_deep()
        if isinstance(value, str):
            _check_text(value, path)
        elif isinstance(value, dict):
            for k, v in value.items():
                _check_text(k, path)
                stack.append((v, (*path, k)))
        elif isinstance(value, list):
            stack.extend((v, (*path, str(i))) for i, v in enumerate(value))


def _check_text(text: str, path: tuple[str, ...]) -> None:
    if match := _SURROGATE.search(text):
        where = ".".join(path) or "body"
        raise ApiError(
            400,
            f"{where}: contains a lone UTF-16 surrogate (\\u{ord(match.group()):04x} at character {match.start()}), "
            "which is not valid Unicode text; send the full surrogate pair or the character itself",
            code="invalid_unicode",
            param=where,
        )
