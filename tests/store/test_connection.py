"""The store's URL forms (store.connection): a Sentinel URL read into its sentinels, master name, db and credentials;
a malformed one refused with a ValueError that says what is wrong; the password the settings add lands where the
parser finds it, and masking hides it."""

from __future__ import annotations

import pytest

from openclaw_rl.masking import mask_url
from openclaw_rl.settings.service import RedisSettings
from store.connection import SENTINEL_PORT, is_sentinel_url, open_redis, open_redis_sync, parse_sentinel_url


def test_a_sentinel_url_names_its_sentinels_master_and_db():
    t = parse_sentinel_url("redis+sentinel://10.0.0.1:26379,10.0.0.2:26380,[::1]:26381/oc-store/2")
    assert t.sentinels == [("10.0.0.1", 26379), ("10.0.0.2", 26380), ("::1", 26381)]
    assert (t.master, t.db, t.username, t.password) == ("oc-store", 2, None, None)


def test_defaults_a_port_and_the_db():
    t = parse_sentinel_url("redis+sentinel://sentinel-a,sentinel-b:26390/main")
    assert t.sentinels == [("sentinel-a", SENTINEL_PORT), ("sentinel-b", 26390)]
    assert t.db == 0


@pytest.mark.parametrize(
    ("userinfo", "username", "password"),
    [(":p%40ss%2Fw%3Ard", None, "p@ss/w:rd"), ("ann:secret", "ann", "secret"), ("secret", None, "secret")],
)
def test_reads_the_credentials(userinfo: str, username: str | None, password: str):
    t = parse_sentinel_url(f"redis+sentinel://{userinfo}@h1:1,h2:2/m")
    assert (t.username, t.password) == (username, password)
    assert t.sentinels == [("h1", 1), ("h2", 2)]


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel:///oc-store", "at least one sentinel host"),
        ("redis+sentinel://h1:26379", "master's name"),
        ("redis+sentinel://h1:26379/", "master's name"),
        ("redis+sentinel://h1:port/m", "port must be a number"),
        ("redis+sentinel://h1:70000/m", "port must be a number"),
        ("redis+sentinel://h1:1,,h2:2/m", "empty sentinel host"),
        ("redis+sentinel://:1/m", "no host name"),
        ("redis+sentinel://h1:1/m/zero", "db in a Sentinel URL is a number"),
        ("redis+sentinel://h1:1/m?ssl=true", "no query"),
        ("redis+sentinel://[::1/m", "IPv6"),
        ("redis://h1:1/0", "not a Sentinel URL"),
    ],
)
def test_a_malformed_sentinel_url_says_what_is_wrong(url: str, says: str):
    with pytest.raises(ValueError, match=says):
        parse_sentinel_url(url)
    if is_sentinel_url(url):  # opening one fails the same way, before any connection is tried
        with pytest.raises(ValueError, match=says):
            open_redis_sync(url)


def test_the_settings_password_reaches_master_and_sentinels_and_is_masked():
    settings = RedisSettings(url="redis+sentinel://h1:26379,h2:26379/oc-store", password="p@ss/word")
    url = settings.target()
    assert parse_sentinel_url(url).password == "p@ss/word"
    assert "p%40ss" not in mask_url(url) and "h1:26379,h2:26379/oc-store" in mask_url(url)
    # the URL's own credentials win over the setting, as for redis://
    own = RedisSettings(url="redis+sentinel://:mine@h1:26379/oc-store", password="other").target()
    assert parse_sentinel_url(own).password == "mine"


async def test_a_sentinel_client_is_made_without_connecting_and_closes():
    client = open_redis("redis+sentinel://:pw@127.0.0.1:1,127.0.0.1:2/oc-store/3")
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["db"], kwargs["password"]) == (3, "pw")
    sentinels = client.connection_pool.sentinel_manager.sentinels
    assert [s.connection_pool.connection_kwargs["port"] for s in sentinels] == [1, 2]
    assert all(s.connection_pool.connection_kwargs["password"] == "pw" for s in sentinels)
    await client.aclose()


def test_a_plain_url_is_redis_pys_own():
    client = open_redis_sync("redis://:pw@127.0.0.1:1/4", socket_timeout=2.0)
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["db"], kwargs["password"], kwargs["socket_timeout"]) == (4, "pw", 2.0)
    client.close()


def test_settings_with_a_malformed_sentinel_url_are_refused_at_load():
    with pytest.raises(ValueError, match="redis.url: .*master's name"):
        RedisSettings(url="redis+sentinel://h1:26379,h2:26379")
    assert RedisSettings(url="redis+sentinel://h1:26379/oc-store").url == "redis+sentinel://h1:26379/oc-store"


def test_more_calls_at_once_than_redis_pys_default_pool_wait_for_a_connection_instead_of_failing(tmp_path):
    """redis-py's asyncio pool holds 100 connections by default and fails the 101st call (`MaxConnectionsError`);
    `bench scale` saw it on the API with 100 turns at once. 300 calls that each hold a connection for a moment now
    all succeed."""
    import asyncio

    from tests.helpers import running_valkey

    async def calls(port: int) -> list:
        client = open_redis(f"redis://127.0.0.1:{port}/0")
        try:
            return await asyncio.gather(*(client.blpop([f"empty-{i}"], timeout=0.3) for i in range(300)))
        finally:
            await client.aclose()

    with running_valkey(tmp_path) as port:
        assert asyncio.run(calls(port)) == [None] * 300
