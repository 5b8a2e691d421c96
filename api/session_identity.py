"""Which session a chat request belongs to, whether it is a main-line turn, and whether it ends the session.

The stock OpenClaw client sends no session or turn headers (see
shared/OPENCLAW_CLIENT.md), so identity is resolved from whatever the request
carries, first match wins:
  1. the reference client's `X-Session-Id` header, then its `session_id` body field;
  1b. a session the protocol itself names (`SessionHint`): an Anthropic Messages client's `metadata.user_id`
     session part, a Responses chain's `previous_response_id` (api.anthropic_messages, api.openai_responses);
  2. the stock client's affinity headers `session_id` / `x-session-affinity`
     (value `<sessionId>:<N>`, N counting compactions: the suffix is dropped);
  3. body `prompt_cache_key` (same value and suffix);
  4. `sessionId=<id>` in the `Runtime:` line of the first user message;
  5. nothing: the caller links the request to a session by message-history prefix.
Side calls (memory flush, compaction summary, activity recap) are recognised by
the markers in `session.side_call_markers`; an explicit `X-Turn-Type` /
`turn_type` wins over the markers.

A session id, from whichever source, is at most MAX_SESSION_ID_CHARS characters
of text without control characters: it becomes a Temporal search attribute, part
of Redis keys and log lines, and the response's X-Session-Id header. Session
headers are read as UTF-8 (HTTP hands header bytes over as Latin-1), so a
non-ASCII id names the same session in a header, the body and an audit URL.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Literal, Mapping

from pydantic import BaseModel

from contracts.chat import TurnType
from openclaw_rl.settings import SessionSettings
from policy_client.chat import message_text

ROUTING_BODY_FIELDS = ("session_id", "turn_type", "session_done")
_TRUTHY = {"1", "true", "yes", "on"}
_RUNTIME_SESSION = re.compile(r"^Runtime:.*?\bsessionId=([^\s|]+)", re.MULTILINE)
_COMPACTION_SUFFIX = re.compile(r":\d+$")

MAX_SESSION_ID_CHARS = 256
"""Well under Temporal's 2 KiB keyword search attribute limit (OpenclawSession), and any real client's ids."""


class InvalidSessionId(ValueError):
    """The request names a session id the server cannot use; the client has to send another."""


class SessionHint(BaseModel):
    """A session named by the protocol's own fields rather than by our headers."""

    session_id: str
    source: Literal["metadata.user_id", "previous_response_id"]


class SessionIdentity(BaseModel):
    session_id: str | None
    """None: no hint in the request; link by message-history prefix."""
    source: Literal[
        "x-session-id",
        "body",
        "metadata.user_id",
        "previous_response_id",
        "affinity-header",
        "prompt_cache_key",
        "runtime-line",
        "none",
    ]
    turn_type: TurnType
    side_kind: str | None = None
    """Why a turn is a side turn (a marker's kind, or 'explicit')."""
    session_done: bool = False


def _header(headers: Mapping[str, str], name: str) -> str | None:
    lowered = {k.lower(): v for k, v in headers.items()}
    value = lowered.get(name.lower())
    return value.strip() if isinstance(value, str) and value.strip() else None


def _session_header(headers: Mapping[str, str], name: str) -> str | None:
    """A session header's text: its bytes as UTF-8 where they are UTF-8 (any client sends that), else as they came."""
    value = _header(headers, name)
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:  # not Latin-1 text (a caller's own str), or bytes that are not UTF-8
        return value


def header_value(session_id: str) -> str:
    """`session_id` for a response header: Starlette writes header text as Latin-1, so hand it the UTF-8 bytes."""
    return session_id.encode("utf-8").decode("latin-1")


def _strip_compaction(value: str) -> str:
    return _COMPACTION_SUFFIX.sub("", value)


def _session(
    headers: Mapping[str, str], body: Mapping[str, Any], messages: list[dict], hint: SessionHint | None
) -> tuple[str | None, str]:
    if v := _session_header(headers, "x-session-id"):
        return v, "x-session-id"
    if isinstance(body.get("session_id"), str) and body["session_id"].strip():
        return body["session_id"].strip(), "body"
    if hint is not None:
        return hint.session_id, hint.source
    for name in ("session_id", "x-session-affinity"):
        if v := _session_header(headers, name):
            return _strip_compaction(v), "affinity-header"
    if isinstance(body.get("prompt_cache_key"), str) and body["prompt_cache_key"].strip():
        return _strip_compaction(body["prompt_cache_key"].strip()), "prompt_cache_key"
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    if first_user is not None and (match := _RUNTIME_SESSION.search(message_text(first_user.get("content"), "\n"))):
        return match.group(1), "runtime-line"
    return None, "none"


def _turn_type(
    headers: Mapping[str, str], body: Mapping[str, Any], messages: list[dict], markers: Mapping[str, str]
) -> tuple[TurnType, str | None]:
    explicit = _header(headers, "x-turn-type") or (
        body.get("turn_type") if isinstance(body.get("turn_type"), str) else None
    )
    if explicit:
        return (TurnType.MAIN, None) if explicit.strip().lower() == "main" else (TurnType.SIDE, "explicit")
    system = "\n".join(
        message_text(m.get("content"), "\n") for m in messages if m.get("role") in ("system", "developer")
    )
    for marker, kind in markers.items():
        if marker in system:
            return TurnType.SIDE, kind
    return TurnType.MAIN, None


def resolve_identity(
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    markers: Mapping[str, str] | None = None,
    *,
    hint: SessionHint | None = None,
) -> SessionIdentity:
    """`markers`: system-prompt substring -> side-call kind (default: `session.side_call_markers`).

    Raises InvalidSessionId for a session id over MAX_SESSION_ID_CHARS or with a control character.
    """
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    session_id, source = _session(headers, body, messages, hint)
    _check_session_id(session_id, source)
    turn_type, side_kind = _turn_type(
        headers, body, messages, SessionSettings().side_call_markers if markers is None else markers
    )
    done_raw = _header(headers, "x-session-done") or body.get("session_done")
    done = str(done_raw).strip().lower() in _TRUTHY if done_raw is not None else False
    return SessionIdentity(
        session_id=session_id, source=source, turn_type=turn_type, side_kind=side_kind, session_done=done
    )


def _check_session_id(session_id: str | None, source: str) -> None:
    if session_id is None:
        return
    if len(session_id) > MAX_SESSION_ID_CHARS:
        raise InvalidSessionId(
            f"the session id (from {source}) is {len(session_id)} characters; the limit is {MAX_SESSION_ID_CHARS}"
        )
    for i, ch in enumerate(session_id):
        if unicodedata.category(ch) in ("Cc", "Cs"):  # control characters; lone surrogates
            raise InvalidSessionId(
                f"the session id (from {source}) contains U+{ord(ch):04X} at character {i}: "
                "a session id is text without control characters"
            )


def strip_routing_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body without our routing fields, as forwarded to the model (the reference strips them too)."""
    return {k: v for k, v in body.items() if k not in ROUTING_BODY_FIELDS}
