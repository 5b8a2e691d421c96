"""`python -m stack.follow`: keep each SGLang server in the router's rotation only while it serves the published
policy version.

What the launcher does for the embedded engines, for servers it does not start (compose, Kubernetes): a server that
stops answering is withdrawn from the router; one that answers (again) is first brought to the published version
(Redis `POLICY_VERSION`, the checkpoint under the data directory), then admitted; one still behind it (the version
only in the trainer's memory, its republication under way) stays out while another server can answer. A restarted
router knows no server: the next round admits every one that is up. Settings come from the usual sources
(REDIS_URL, the data directory, `policy.api_key` for the servers and the router); by default it follows every server of
`policy.server_urls` behind `policy.router_url`. One follower per router is enough; two are harmless (every call is
idempotent).
"""

from __future__ import annotations

import argparse
import asyncio

import httpx
import structlog

from openclaw_rl.settings import Settings, load_settings
from stack.router import RouterCallError, RouterFront, admit_caught_up
from store.errors import StoreError

log = structlog.get_logger(__name__)


async def follow_once(settings: Settings, server: str, router: RouterFront) -> bool:
    """One round: True when the server is in rotation afterwards."""
    key = settings.policy_api_key().get_secret_value()
    try:
        async with httpx.AsyncClient(timeout=5.0) as http:
            up = (await http.get(f"{server}/health")).status_code == 200
    except httpx.HTTPError:
        up = False
    if not up:
        await router.withdraw(server)
        return False
    return await admit_caught_up(settings, server, router, key)


async def follow(settings: Settings, servers: list[str], router: RouterFront, interval_s: float) -> None:
    await asyncio.gather(*(_follow_one(settings, s.rstrip("/"), router, interval_s) for s in servers))


async def _follow_one(settings: Settings, server: str, router: RouterFront, interval_s: float) -> None:
    routed = None
    while True:
        try:
            now = await follow_once(settings, server, router)
        except (httpx.HTTPError, StoreError, RouterCallError, RuntimeError, ValueError) as exc:
            # The router or Redis may be restarting: the next round tries again.
            log.warning("follow round failed", server=server, error=str(exc))
            now = None
        if now is not None and now != routed:
            log.info("server in rotation" if now else "server out of rotation", server=server)
            routed = now
        await asyncio.sleep(interval_s)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stack.follow", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--server", action="append", help="a server to follow, as the router reaches it (default: policy.server_urls)"
    )
    parser.add_argument("--router", help="the sglang-router's URL (default: policy.router_url)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between rounds")
    args = parser.parse_args(argv)
    settings = load_settings()
    router_url = args.router or settings.policy.router_url
    servers = args.server or settings.policy.server_urls
    if not router_url or not servers:
        parser.error("name the router and its servers (--router/--server, or policy.router_url and server_urls)")
    router = RouterFront(router_url, settings.policy_api_key().get_secret_value())
    log.info("following", servers=servers, router=router_url)
    asyncio.run(follow(settings, servers, router, args.interval))


if __name__ == "__main__":
    main()
