"""Link a request with no session hint to its session by message-history prefix.

Request t+1 of a chat resends request t's history plus the reply it got. So when
a main-line turn finishes, we store digest(history + reply) -> session; a later
request whose history, cut after one of its assistant messages, has a stored
digest belongs to that session (the longest match wins).

The digest is over a canonical form that survives what clients change when they
resend: tool-call ids (OpenClaw rewrites `call_a_3` to `calla3`), content given
as a string or as text parts, surrounding whitespace, `<think>` blocks, and
client-injected internal-context messages, which come and go between requests.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from policy_client.chat_output import split_reasoning
from store.prefix_links import PrefixLinks


def _canonical(msg: dict[str, Any]) -> str:
    role = msg.get("role")
    text = (msg.get("content") or "").strip()
    if role == "assistant":
        text = split_reasoning(text)[1].strip()
        calls = []
        for c in msg.get("tool_calls") or []:
            fn = c.get("function", c)
            args = fn.get("arguments")
            try:
                args = json.loads(args) if isinstance(args, str) else args
            except ValueError:
                pass
            calls.append([fn.get("name"), args])
        return json.dumps(["assistant", text, calls], sort_keys=True, ensure_ascii=False)
    return json.dumps([role, text], ensure_ascii=False)


def is_internal_context(msg: dict[str, Any], marker: str) -> bool:
    return msg.get("role") == "user" and marker in (msg.get("content") or "")


def _digests(messages: list[dict[str, Any]], marker: str) -> list[tuple[int, str]]:
    """(message index, digest of the history up to and including it) at each assistant message."""
    h = hashlib.sha256()
    out = []
    for i, msg in enumerate(messages):
        if is_internal_context(msg, marker):
            continue
        h.update(_canonical(msg).encode())
        h.update(b"\n")
        if msg.get("role") == "assistant":
            out.append((i, h.copy().hexdigest()[:40]))
    return out


async def find_session(links: PrefixLinks, user_id: str, messages: list[dict[str, Any]], marker: str) -> str | None:
    """The session of the longest history prefix of `messages` that a finished turn linked."""
    return await links.longest(user_id, [d for _, d in _digests(messages, marker)])


async def remember(
    links: PrefixLinks,
    user_id: str,
    messages: list[dict[str, Any]],
    reply: dict[str, Any],
    session_id: str,
    marker: str,
    ttl_s: int,
) -> None:
    digests = _digests([*messages, {**reply, "role": "assistant"}], marker)
    await links.link(user_id, digests[-1][1], session_id, ttl_s)
