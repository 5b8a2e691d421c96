"""Whether a generation that has gone quiet may be waiting on an engine that is gone.

A host whose link is cut closes no connection: a request already sent to its engine (by a router, or by us) waits
for the TCP stack or the request timeout, minutes later, although the router or the follower took the engine out
of rotation within seconds. So a generation silent for `policy.silence_probe_s` asks:
- through a router: is every engine that was in rotation when the call began still there and healthy (GET /workers,
  the router's own view, which its health checks and `stack.follow` keep)? One that left may be the one holding the
  call: it is ended and sent again, and the router picks an engine that answers.
- straight to several servers: does this one still answer /health? With a single server there is nowhere else to
  go, so nothing is asked.

Nothing is ended while every engine stays in rotation, however long the engine takes: a queued request on a busy
GPU is slow, not lost, and sending it again would only queue it again.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import structlog

log = structlog.get_logger(__name__)

SHARED_FOR_S = 1.0
"""A look at the router serves every quiet call for this long (many calls go quiet together when an engine goes)."""


class EngineLeft(Exception):
    """An engine the call may be waiting on left the rotation (or stopped answering) while it was quiet."""


class RotationWatch:
    """The router's engines in rotation, as last seen, shared by the calls of one client."""

    def __init__(self, http: httpx.AsyncClient, *, routed: bool, traffic_urls: list[str], timeout_s: float):
        self._http = http
        self.routed = routed
        self.enabled = routed or len(traffic_urls) > 1
        self.timeout_s = timeout_s
        self._seen: dict[str, frozenset[str]] = {}
        self._looking: dict[str, tuple[float, asyncio.Future]] = {}

    def baseline(self, url: str) -> frozenset[str] | None:
        """What a call to `url` starts from: the engines in rotation behind it as last seen (None: not seen yet, and
        a first look is started so the next call has one)."""
        if not self.routed:
            return None
        seen = self._seen.get(url)
        if seen is None:
            self._look(url)
        return seen

    async def left(self, url: str, baseline: frozenset[str] | None) -> str | None:
        """The engine that left since `baseline` (or `url` itself, straight to a server that no longer answers);
        None when there is nothing to end the call for."""
        if not self.routed:
            return None if await self._answers(url) else url
        now = await self._look(url)
        if now is None or baseline is None:
            return None
        gone = sorted(baseline - now)
        return gone[0] if gone else None

    def _look(self, url: str) -> asyncio.Future:
        """One GET /workers on the router at `url`, shared by the calls that ask within SHARED_FOR_S."""
        started, fut = self._looking.get(url, (0.0, None))
        if fut is None or time.monotonic() - started > SHARED_FOR_S:
            fut = asyncio.ensure_future(self._workers(url))
            self._looking[url] = (time.monotonic(), fut)
        return fut

    async def _workers(self, url: str) -> frozenset[str] | None:
        try:
            resp = await self._http.get(f"{url}/workers", timeout=self.timeout_s)
            resp.raise_for_status()
            workers = resp.json().get("workers") or []
            healthy = frozenset(str(w["url"]) for w in workers if w.get("is_healthy"))
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.info("could not list the router's engines", router=url, error=str(exc))
            return None  # the router itself: the call's own connection to it tells
        self._seen[url] = healthy
        return healthy

    async def _answers(self, url: str) -> bool:
        try:
            resp = await self._http.get(f"{url}/health", timeout=self.timeout_s)
        except httpx.TransportError:
            return False
        return resp.status_code < 500


async def wait_watched(
    fut: asyncio.Future, watch: RotationWatch, url: str, baseline: frozenset[str] | None, quiet_s: float
):
    """`fut`'s result, looking every `quiet_s` it stays pending whether the engine behind `url` may be gone; raises
    EngineLeft (and cancels `fut`) when one left."""
    try:
        while True:
            done, _ = await asyncio.wait({fut}, timeout=quiet_s)
            if done:
                return fut.result()
            if not watch.enabled:
                continue
            gone = await watch.left(url, baseline)
            if gone is not None:
                log.warning("an engine left the rotation while a generation waited", via=url, gone=gone)
                raise EngineLeft(f"{gone} left the rotation while the call to {url} was quiet for {quiet_s:g} s")
    finally:
        if not fut.done():
            fut.cancel()
