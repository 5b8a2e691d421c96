"""A user's held-out turns and progress reports in the store (store/progress.py), on a bare valkey: kept once however
often a retry writes them, the oldest dropped past the cap, nothing written for a forgotten user, sealed under
encryption (no user text in the clear), and all of it gone with the forget."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis

from contracts.chat import tenant_of
from contracts.progress import Comparison, HeldOutTurn, ProgressReport
from openclaw_rl.encryption import Keyring
from store import keys
from store.client import Store, StoreAddress
from tests.helpers import running_valkey

pytestmark = pytest.mark.timeout(120)

SECRET = "my-cat-is-called-Quetzalcoatl"


@pytest.fixture
def port(tmp_path: Path):
    with running_valkey(tmp_path) as p:
        yield p


def held(i: int, version: str = "1") -> HeldOutTurn:
    return HeldOutTurn(
        turn_id=f"turn-{i}",
        at=1000.0 + i,
        version=version,
        messages=[{"role": "user", "content": f"{SECRET} question {i}"}],
        answer=f"answer {i} about {SECRET}",
    )


def report(tenant: str, version: str) -> ProgressReport:
    c = Comparison(against="first", version="1", turns=3, wins=2, ties=1, losses=0, win_rate=0.83, low=0.4, high=0.97)
    return ProgressReport(
        tenant=tenant, served_version=version, at=2000.0, judge="llm", held_out_turns=3, judged=3, comparisons=[c]
    )


def test_held_out_turns_are_kept_once_capped_and_never_written_for_a_forgotten_user(port):
    async def main():
        store = Store.connect(StoreAddress(f"redis://127.0.0.1:{port}/0", 3600))
        alice = tenant_of("alice")
        for i in range(5):
            assert await store.progress.hold_out(alice, held(i), keep=3)
        assert await store.progress.hold_out(alice, held(4), keep=3)  # a retry: still one copy
        kept = await store.progress.held_out(alice)
        assert [t.turn_id for t in kept] == ["turn-2", "turn-3", "turn-4"]  # the oldest went
        assert await store.progress.held_out_count(alice) == 3
        await store.users.tombstone("bob")
        assert not await store.progress.hold_out(tenant_of("bob"), held(9), keep=3)
        assert await store.progress.held_out(tenant_of("bob")) == []
        assert await store.progress.tenants_with_held_out() == [alice]

        for v in ("1", "2", "3"):
            assert await store.progress.add_report(report(alice, v), keep=2)
        assert [r.served_version for r in await store.progress.reports(alice)] == ["3", "2"]  # newest first, capped
        assert (await store.progress.latest(alice)).served_version == "3"
        assert not await store.progress.add_report(report(tenant_of("bob"), "1"), keep=2)

        key = await store.progress.put_answers(alice, "run1", {"turn-3": "new"})
        assert await store.progress.answers(key) == {"turn-3": "new"}
        assert 0 < redis.Redis(port=port).ttl(key) <= keys.PROGRESS_ANSWERS_TTL_S
        assert await store.progress.forget(alice) == 3
        assert await store.progress.held_out(alice) == [] and await store.progress.reports(alice) == []
        assert await store.progress.answers(key) is None
        await store.aclose()

    asyncio.run(main())


def test_with_encryption_keys_nothing_of_the_users_words_is_in_the_clear(port):
    async def main():
        address = StoreAddress(f"redis://127.0.0.1:{port}/0", 3600)
        sealed = Store.connect(address, keyring=Keyring([("k1", bytes(range(32)))]))
        alice = tenant_of("alice")
        await sealed.progress.hold_out(alice, held(1), keep=10)
        r = report(alice, "2").model_copy(update={"note": SECRET})
        await sealed.progress.add_report(r, keep=10)
        await sealed.progress.put_answers(alice, "run1", {"turn-1": SECRET})
        raw = redis.Redis(port=port)
        blobs = [raw.dump(k) or b"" for k in raw.scan_iter()]
        assert blobs and not any(SECRET.encode() in b for b in blobs)
        assert (await sealed.progress.held_out(alice))[0].answer == f"answer 1 about {SECRET}"
        assert (await sealed.progress.latest(alice)).note == SECRET
        await sealed.aclose()

    asyncio.run(main())
