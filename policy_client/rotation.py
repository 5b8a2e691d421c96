"""Whether a generation that has gone quiet may be waiting on an engine that is gone.

A host whose link is cut closes no connection: a request already sent to its engine (by a router, or by us) waits
for the TCP stack or the request timeout, minutes later, although the router or the follower took the engine out
of rotation within seconds. So a generation silent for `policy.silence_probe_s` asks:
- through a router: is every engine that was in rotation when the call began still there and healthy (GET /workers,
  the router's own view, which its health checks and `stack.follow` keep)? One that left may be the one holding the
  call: it is ended and sent again, and the router picks an engine that answers.
- straight to several servers: does this one still answer its version (/get_weight_version, no generation)? With a
  single server there is nowhere else to go, so nothing is asked.

What the call started from is a look taken at most `silence_probe_s` before it began (shared by the calls that start
meanwhile: one GET per router every few seconds under traffic), so an engine that left long before a call cannot
end it.

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
"""A look serves every call that goes quiet within this long (many go quiet together when an engine goes)."""


class EngineLeft(Exception):
    """An engine the call may be waiting on left the rotation (or stopped answering) while it was quiet."""


class RotationWatch:
    """The engines in rotation behind each traffic URL, looked at as calls start and as they go quiet; one look per
    URL serves every call that asks within SHARED_FOR_S."""

    def __init__(
        self, http: httpx.AsyncClient, *, routed: bool, traffic_urls: list[str], timeout_s: float, quiet_s: float
    ):
        self._http = http
        self.quiet_s = quiet_s
        self.routed = routed
        self.enabled = routed or len(traffic_urls) > 1
        self.timeout_s = timeout_s
        self._looking: dict[str, tuple[float, asyncio.Future]] = {}

    def baseline(self, url: str) -> asyncio.Future | None:
        """What a call to `url` starts from: a look at the rotation taken within `quiet_s` before it starts (so a
        steady stream of calls costs one look per `quiet_s`, not one each). None when nothing is watched."""
        return self._look(url, self.quiet_s) if self.enabled else None

    async def left(self, url: str, baseline: asyncio.Future | None) -> str | None:
        """An engine that was in rotation when the call began and is not now (or, straight to a server, `url` itself
        when it no longer answers); None when there is nothing to end the call for."""
        if baseline is None:
            return None
        # Shielded: the looks are shared, and one call cancelled must not cancel the others' look.
        before = await asyncio.shield(baseline)
        now = await asyncio.shield(self._look(url, SHARED_FOR_S))
        if before is None or now is None:
            return None
        gone = sorted(before - now)
        return gone[0] if gone else None

    def _look(self, url: str, max_age_s: float) -> asyncio.Future:
        started, fut = self._looking.get(url, (0.0, None))
        if fut is None or time.monotonic() - started > max_age_s:
            fut = asyncio.ensure_future(self._workers(url) if self.routed else self._answering(url))
            self._looking[url] = (time.monotonic(), fut)
        return fut

    async def _workers(self, url: str) -> frozenset[str] | None:
        """The healthy engines the router at `url` lists (None: the router did not say)."""
        try:
            resp = await self._http.get(f"{url}/workers", timeout=self.timeout_s)
            resp.raise_for_status()
            workers = resp.json().get("workers") or []
            return frozenset(str(w["url"]) for w in workers if w.get("is_healthy"))
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.info("could not list the router's engines", router=url, error=str(exc))
            return None  # the router itself: the call's own connection to it tells

    async def _answering(self, url: str) -> frozenset[str]:
        """Straight to a server: {url} while it answers its version (a cheap route, no generation), else empty."""
        try:
            resp = await self._http.get(f"{url}/get_weight_version", timeout=self.timeout_s)
        except httpx.TransportError:
            return frozenset()
        return frozenset({url}) if resp.status_code < 500 else frozenset()


async def wait_watched(
    fut: asyncio.Future, watch: RotationWatch, url: str, baseline: asyncio.Future | None, quiet_s: float
):
    """`fut`'s result, looking every `quiet_s` it stays pending whether the engine behind `url` may be gone; raises
    EngineLeft (and cancels `fut`) when one left."""
    try:
        while True:
            done, _ = await asyncio.wait({fut}, timeout=quiet_s)
            if done:
                return fut.result()
            gone = await watch.left(url, baseline)
            if gone is not None and not fut.done():  # answered meanwhile: keep the answer
                log.warning("an engine left the rotation while a generation waited", via=url, gone=gone)
                raise EngineLeft(f"{gone} left the rotation while the call to {url} was quiet for {quiet_s:g} s")
    finally:
        if not fut.done():
            fut.cancel()
