"""The one way a process opens a client on the store from its URL: a single server (`redis://`, `rediss://`,
`unix://`, as redis-py reads them) or a master found through Sentinel (`redis+sentinel://`), so the one URL string
stays what is passed around.

    redis+sentinel://[[user]:password@]host1:port1,host2:port2,.../<master-name>[/<db>]

The password (and user) go to the master and to the sentinels alike: run the sentinels with the same `requirepass`
(an open sentinel takes `SENTINEL SET` and `SENTINEL FAILOVER` from anyone who reaches it). A port left out is
Sentinel's own, 26379.

A Sentinel client asks the sentinels for the master's address on every new connection: after the master dies its
calls raise ConnectionError (the store unavailable, to every caller) until the sentinels have promoted a replica,
then succeed against it, with no restart.
"""

from __future__ import annotations

from urllib.parse import unquote

import redis
import redis.asyncio as aioredis
from pydantic import BaseModel, Field
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.sentinel import Sentinel

SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379
"""Sentinel's default port, for a host written without one."""
SENTINEL_TIMEOUT_S = 1.0
"""Each question to a sentinel: a dead sentinel costs this much before the next one is asked."""
CONNECT_TIMEOUT_S = 2.0
"""Opening a connection to the master (unless the caller says otherwise): a host that is gone fails this fast instead
of after the kernel's minutes of SYN retries. No read timeout by default: blocking reads (XREAD BLOCK) wait longer."""
POOL_CONNECTIONS = 512
"""Connections one process may hold to the store. redis-py's asyncio pool stops at 100 by default and then fails the
call (`MaxConnectionsError`): 100 turns at once on one API process did (`bench scale`, 1,000 sessions). A process
at this limit waits for a free connection (up to `POOL_WAIT_S`) instead of failing."""
POOL_WAIT_S = 20.0
"""How long a call waits for a free connection before it fails as the store being unavailable."""


class SentinelTarget(BaseModel):
    """A `redis+sentinel://` URL, read."""

    sentinels: list[tuple[str, int]] = Field(min_length=1)
    master: str = Field(min_length=1)
    db: int = Field(0, ge=0)
    username: str | None = None
    password: str | None = None


def is_sentinel_url(url: str) -> bool:
    return url.lower().startswith(f"{SENTINEL_SCHEME}://")


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The sentinels, master name, db and credentials of `url`; ValueError naming what is wrong."""
    head = f"{SENTINEL_SCHEME}://"
    if not is_sentinel_url(url):
        raise ValueError(f"not a Sentinel URL (it starts with {head})")
    rest = url[len(head) :]
    if "?" in rest or "#" in rest:
        raise ValueError(
            "a Sentinel URL takes no query or fragment (redis+sentinel://[:password@]hosts/<master>[/<db>])"
        )
    username = password = None
    if "@" in rest:  # the user info runs to the last @ (a password is quoted, but be lenient)
        userinfo, _, rest = rest.rpartition("@")
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else unquote(user) or None
        if not colon:
            username = None  # `secret@host`: the password alone, as redis-py reads `redis://secret@host`
    hosts, _, path = rest.partition("/")
    if not hosts:
        raise ValueError("a Sentinel URL needs at least one sentinel host:port before the master name")
    sentinels = [_host_port(h) for h in hosts.split(",")]
    master, _, db_text = path.partition("/")
    master = unquote(master)
    if not master:
        raise ValueError("a Sentinel URL needs the master's name after the hosts: redis+sentinel://hosts/<master-name>")
    db = 0
    if db_text:
        if not db_text.isdigit():
            raise ValueError(f"the db in a Sentinel URL is a number (…/<master-name>/<db>), not {db_text!r}")
        db = int(db_text)
    return SentinelTarget(sentinels=sentinels, master=master, db=db, username=username, password=password)


def _host_port(text: str) -> tuple[str, int]:
    if not text:
        raise ValueError("an empty sentinel host in a Sentinel URL (two commas, or one at an end)")
    if text.startswith("["):  # [IPv6]:port
        host, bracket, port = text[1:].partition("]")
        if not bracket or (port and not port.startswith(":")):
            raise ValueError(f"sentinel host {text!r}: an IPv6 address is written [address]:port")
        port = port[1:]
    else:
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not host:
        raise ValueError(f"sentinel host {text!r} has no host name")
    if not port:
        return host, SENTINEL_PORT
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"sentinel host {text!r}: the port must be a number from 1 to 65535")
    return host, int(port)


def _sentinel_options(target: SentinelTarget) -> dict:
    return {
        "username": target.username,
        "password": target.password,
        "socket_connect_timeout": SENTINEL_TIMEOUT_S,
        "socket_timeout": SENTINEL_TIMEOUT_S,
    }


def _master_options(target: SentinelTarget, options: dict) -> dict:
    return {
        "db": target.db,
        "username": target.username,
        "password": target.password,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        **options,
    }


class _SentinelMaster(aioredis.Redis):
    """The master's client; closing it closes its connections to the sentinels too (redis-py leaves them open)."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        owner = close_connection_pool or (close_connection_pool is None and self.auto_close_connection_pool)
        await super().aclose(close_connection_pool)
        if owner:  # not a `client()` borrowing the pool
            await self.connection_pool.sentinel_manager.aclose()


class _SentinelMasterSync(redis.Redis):
    def close(self) -> None:
        owner = getattr(self, "auto_close_connection_pool", False)  # also called from __del__
        super().close()
        if owner:
            self.connection_pool.sentinel_manager.close()


def open_redis(url: str, **options) -> aioredis.Redis:
    """An asyncio client on the store at `url` (connecting lazily); `options` go to its connections (a plain URL's
    client is exactly redis-py's `from_url`)."""
    if not is_sentinel_url(url):
        pool = aioredis.BlockingConnectionPool.from_url(
            url, max_connections=POOL_CONNECTIONS, timeout=POOL_WAIT_S, **options
        )
        return aioredis.Redis.from_pool(pool)
    target = parse_sentinel_url(url)
    sentinel = AsyncSentinel(target.sentinels, sentinel_kwargs=_sentinel_options(target))
    return sentinel.master_for(
        target.master,
        redis_class=_SentinelMaster,
        max_connections=POOL_CONNECTIONS,  # redis-py has no waiting pool for Sentinel: a higher limit instead
        **_master_options(target, options),
    )


def open_redis_sync(url: str, **options) -> redis.Redis:
    """The blocking twin of `open_redis` (a process starting up, before its event loop)."""
    if not is_sentinel_url(url):
        return redis.Redis.from_url(url, **options)
    target = parse_sentinel_url(url)
    sentinel = Sentinel(target.sentinels, sentinel_kwargs=_sentinel_options(target))
    return sentinel.master_for(target.master, redis_class=_SentinelMasterSync, **_master_options(target, options))
