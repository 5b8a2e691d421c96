"""The sglang-router in front of several embedded engines, and how an engine joins it.

An engine takes traffic only once it serves the published policy version: the launcher withdraws a dead engine
from the router at once, and admits a (re)started one only after it has caught up. `python -m stack.router ...`
runs the real router (the `sglang-router` package) with the engines' key taken from the environment, so it never
shows on a command line.
"""

from __future__ import annotations

import os
import sys
import time
from urllib.parse import quote

import httpx
import structlog
from pydantic import BaseModel

from openclaw_rl.checkpoints import read_version_label, served_dir, version_dir
from openclaw_rl.settings import Settings
from store.client import Store

log = structlog.get_logger(__name__)

ROUTER_API_KEY_ENV = "OPENCLAW_RL_ROUTER_API_KEY"
"""The router's --api-key (it checks it on every call and sends it to the engines), passed through the environment."""
CALL_TIMEOUT_S = 10.0
LOAD_TIMEOUT_S = 600.0
"""Upper bound on one engine loading a checkpoint while it catches up (a large model takes minutes)."""


class RouterWorker(BaseModel):
    """One entry of the router's GET /workers."""

    id: str
    url: str
    is_healthy: bool


class RouterWorkers(BaseModel):
    workers: list[RouterWorker]


class RouterCallError(RuntimeError):
    """The router refused a control call (its answer says why)."""


SGLANG_BALANCE_ABS_THRESHOLD = 64


def balance_abs_threshold(settings: Settings) -> int:
    """`router.balance_abs_threshold`, or about one engine's batch when unset (RouterSettings says why)."""
    if settings.router.balance_abs_threshold is not None:
        return settings.router.balance_abs_threshold
    return settings.engine.max_batch_size if settings.embedded_router else SGLANG_BALANCE_ABS_THRESHOLD


def router_argv(settings: Settings, host: str = "127.0.0.1") -> list[str]:
    """How `up` starts the router: no workers on the command line; each engine is admitted once it has caught up.
    `host`: the address it serves on (and its metrics), loopback for `up`'s."""
    r = settings.router
    return [
        sys.executable,
        "-m",
        "stack.router",
        "--host",
        host,
        "--port",
        str(r.port),
        "--policy",
        r.policy,
        "--balance-abs-threshold",
        str(balance_abs_threshold(settings)),
        "--balance-rel-threshold",
        str(r.balance_rel_threshold),
        "--prometheus-host",
        host,
        "--prometheus-port",
        str(r.metrics_port),
        "--health-check-interval-secs",
        str(r.health_check_interval_s),
        "--health-failure-threshold",
        str(r.health_failure_threshold),
        "--health-success-threshold",
        "1",
        # A generation may take as long as the policy client lets it; the router must not cut it shorter.
        "--request-timeout-secs",
        str(int(settings.policy.request_timeout_s) + 1),
        "--log-level",
        "warn",
    ]


class RouterFront:
    """The control side of a router: admit caught-up servers, withdraw dead ones (the launcher for the embedded
    engines, `stack.follow` for SGLang servers)."""

    def __init__(self, url: str, api_key: str = ""):
        self.url = url.rstrip("/")
        self.key = api_key
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    @classmethod
    def embedded(cls, settings: Settings) -> "RouterFront":
        """The router `up` starts, keyed with the engines' key."""
        return cls(settings.embedded_router_url(), settings.engine.api_key.get_secret_value())

    async def live(self) -> bool:
        async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S) as http:
            return (await http.get(f"{self.url}/liveness")).status_code == 200

    async def workers(self) -> list[RouterWorker]:
        async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S, headers=self.headers) as http:
            resp = await http.get(f"{self.url}/workers")
        _raise_for(resp, "list workers")
        return RouterWorkers.model_validate(resp.json()).workers

    async def admit(self, engine_url: str) -> bool:
        """Ask the router to route to `engine_url`; True once it lists it as healthy (adding is asynchronous there,
        and adding a listed engine again changes nothing)."""
        listed = {w.url: w for w in await self.workers()}
        if engine_url in listed and listed[engine_url].is_healthy:
            return True
        body: dict[str, str] = {"url": engine_url}
        if self.key:
            body["api_key"] = self.key  # the router discovers the engine's model with it
        async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S, headers=self.headers) as http:
            resp = await http.post(f"{self.url}/workers", json=body)
        _raise_for(resp, f"add {engine_url}")
        return False  # not routed to yet: the caller asks again

    async def withdraw(self, engine_url: str) -> bool:
        """Stop routing to `engine_url`; False when the router did not list it."""
        for w in await self.workers():
            if w.url == engine_url:
                async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S, headers=self.headers) as http:
                    resp = await http.delete(f"{self.url}/workers/{quote(w.id, safe='')}")
                _raise_for(resp, f"remove {engine_url}")
                log.info("engine withdrawn from the router", engine=engine_url)
                return True
        return False


async def catch_up(settings: Settings, engine_url: str, api_key: str) -> str:
    """Make the server at `engine_url` serve the published policy version before it takes traffic; returns the
    version it serves.

    A starting engine loads the published version itself (engine.main); this closes the gap left when a version is
    published while it starts. Never a step back: an engine already past the published version (it took part in a
    publication still under way) keeps its weights. An engine serving weights loaded by hand under a label that is
    not a policy version (an evaluation, an operator's test) is left alone too: someone chose them.
    """
    published = await _published_version(settings)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S, headers=headers) as http:
        resp = await http.get(f"{engine_url}/get_model_info")
        resp.raise_for_status()
        serving = str(resp.json().get("weight_version") or "0")
        if serves_current(serving, published):
            return serving
        folder = _servable_folder(settings, published)
        if folder is None:
            # Published from the trainer's memory: only the trainer holds it. It gives every server that lacks it
            # the version again (a server serving it already reloads nothing).
            log.info("asking the trainer to publish the version again", version=published, engine=engine_url)
            await _ask_for_republication(settings)
            return serving
        log.info("engine catching up", engine=engine_url, serving=serving, published=published)
        resp = await http.post(
            f"{engine_url}/update_weights_from_disk",
            json={"model_path": str(folder), "weight_version": str(published), "abort_all_requests": False},
            timeout=LOAD_TIMEOUT_S,
        )
        resp.raise_for_status()
        if not resp.json().get("success"):
            raise RuntimeError(f"{engine_url} refused version {published}: {resp.text[:300]}")
        return str(published)


async def admit_caught_up(settings: Settings, engine_url: str, router: RouterFront, api_key: str) -> bool:
    """`catch_up`, then route to the engine; True once the router routes to it.

    An engine still behind the published version (it restarted while only the trainer's memory held that version,
    and the republication asked for has not reached it yet) stays out of rotation while another engine in rotation
    can answer: a turn it served would come from old weights, its sample dropped as stale. With no other engine it is
    admitted anyway: old weights beat no answer, and the republication brings it up to date in place."""
    serving = await catch_up(settings, engine_url, api_key)
    if not serves_current(serving, await _published_version(settings)):
        others = [w for w in await router.workers() if w.url != engine_url and w.is_healthy]
        if others:
            await router.withdraw(engine_url)  # the router may still list it from before its restart
            log.info("engine kept out of rotation until it has the published version", engine=engine_url)
            return False
    return await router.admit(engine_url)


def serves_current(serving: str, published: int) -> bool:
    """Whether an engine serving `serving` may answer: at or past the published version, or weights loaded by hand
    under a label that is not a policy version (someone chose them)."""
    return not published or not serving.isdigit() or int(serving) >= published


def _servable_folder(settings: Settings, version: int):
    """A folder holding `version`'s weights: its durable checkpoint, or the weights-only folder of a disk
    publication; None when only the trainer's memory holds it."""
    for folder in (version_dir(settings.checkpoints_dir, version), served_dir(settings.checkpoints_dir, version)):
        if read_version_label(folder) is not None:
            return folder
    return None


REPUBLISH_ASK_EVERY_S = 10.0
"""A behind engine is checked every round (the follower's 2 s, a readiness poll's less): one signal per this many
seconds is enough, since the training workflow folds repeated asks into one republication."""
_last_ask = [float("-inf")]


async def _ask_for_republication(settings: Settings) -> None:
    from temporalio.service import RPCError

    from control.training import request_republish
    from openclaw_rl.temporal_client import connect

    if time.monotonic() - _last_ask[0] < REPUBLISH_ASK_EVERY_S:
        return
    _last_ask[0] = time.monotonic()
    try:
        await request_republish(await connect(settings.temporal, keyring=settings.keyring()), settings)
    except (RPCError, RuntimeError) as exc:  # no training workflow (training off), or Temporal away: next round
        log.warning("could not ask for the version again", error=str(exc))


async def _published_version(settings: Settings) -> int:
    async with Store.from_settings(settings, socket_connect_timeout=2.0, socket_timeout=5.0) as store:
        return await store.policy.served()


def _raise_for(resp: httpx.Response, what: str) -> None:
    if resp.status_code >= 400:
        raise RouterCallError(f"router refused to {what}: HTTP {resp.status_code} {resp.text[:300]}")


def main(argv: list[str] | None = None) -> None:
    """Run the sglang-router with these arguments, its --api-key from ROUTER_API_KEY_ENV."""
    from sglang_router.launch_router import launch_router, parse_router_args

    args = parse_router_args(sys.argv[1:] if argv is None else argv)
    args.api_key = os.environ.get(ROUTER_API_KEY_ENV) or None
    launch_router(args)


if __name__ == "__main__":
    main()
