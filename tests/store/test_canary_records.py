"""Candidate adapter versions in the store (store/canaries.py), on a bare valkey: a new version is the candidate
against the current adapter, or waits as the next while one is judged; a decision promotes (the candidate becomes
the adapter) and judges the next, or rolls back (the trainer goes back to the incumbent, the next and the
abandoned line with it); each turn is logged once however often a retry logs it; a
forgotten user gets nothing written, and the forget takes the candidate, the next and the turn logs; the answer
pairs are sealed under encryption; the candidate serves its share of turns exactly, a retry keeping its arm."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis

from contracts.chat import tenant_of
from openclaw_rl.encryption import Keyring
from store.adapters import AdapterRef
from store.canaries import LoggedTurn
from store.client import Store, StoreAddress
from tests.helpers import running_valkey

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def port(tmp_path: Path):
    with running_valkey(tmp_path) as p:
        yield p


def ref(tenant: str, v: int, lineage: int = 0) -> AdapterRef:
    return AdapterRef(name=f"{tenant}-v{v}", path=f"/data/adapters/{tenant}/v{v}", version=v, lineage=lineage)


def test_candidates_wait_their_turn_and_a_decision_promotes_or_rolls_back(port):
    async def main():
        store = Store.connect(StoreAddress(f"redis://127.0.0.1:{port}/0", 3600))
        ana = tenant_of("ana")
        assert (await store.canaries.propose(ana, ref(ana, 1))).status == "candidate"
        cand = await store.canaries.candidate(ana)
        assert cand.ref == ref(ana, 1) and cand.incumbent is None  # judged against the base
        assert await store.adapters.current(ana) is None  # not served to everyone yet

        assert (await store.canaries.propose(ana, ref(ana, 1))).status == "candidate"  # a retried publication
        assert (await store.canaries.propose(ana, ref(ana, 2))).status == "next"
        third = await store.canaries.propose(ana, ref(ana, 3))
        assert third.status == "next" and third.replaced_next == ref(ana, 2)  # the newest waits
        assert (await store.canaries.propose(ana, ref(ana, 3))).status == "next"  # a retry: nothing replaced
        assert (await store.canaries.propose(ana, ref(ana, 2))).status == "next"  # older than the waiting one
        assert (await store.canaries.propose(ana, ref(ana, 0))).status == "stale"  # older than the judged one
        assert (await store.canaries.candidate(ana)).ref == ref(ana, 1)

        t1, t2 = LoggedTurn(arm="candidate", turn_id="t1", max_tokens=8), LoggedTurn(arm="incumbent", turn_id="t2")
        assert await store.canaries.log_turn(ana, 1, t1)
        assert not await store.canaries.log_turn(ana, 1, t1)  # a retried generation
        assert await store.canaries.log_turn(ana, 1, t2)
        assert await store.canaries.turns(ana, 1, 0, 10) == [t1, t2]
        assert await store.canaries.turns(ana, 1, 1, 10) == [t2]

        assert not (await store.canaries.decide(ana, 7, promote=True)).done  # not the pending one
        promoted = await store.canaries.decide(ana, 1, promote=True)
        assert promoted.done and promoted.loser is None and promoted.next_version == 3
        assert await store.adapters.current(ana) == ref(ana, 1)
        cand = await store.canaries.candidate(ana)
        assert cand.ref == ref(ana, 3) and cand.incumbent == ref(ana, 1)  # the next, against the promoted one

        rolled = await store.canaries.decide(ana, 3, promote=False)
        assert rolled.done and rolled.loser == ref(ana, 3) and rolled.next_version is None
        assert await store.adapters.current(ana) == ref(ana, 1) and await store.canaries.candidate(ana) is None
        assert not (await store.canaries.decide(ana, 3, promote=False)).done  # a retry of the decision
        # The rollback abandons the candidate's line: the trainer goes back to the current adapter, and a version
        # of the abandoned line (trained before it went back) is never proposed.
        back = await store.canaries.go_backs([ana, tenant_of("nobody")])
        assert list(back) == [ana] and back[ana].lineage == 1 and back[ana].to == ref(ana, 1) and back[ana].top == 3
        assert (await store.canaries.propose(ana, ref(ana, 4))).status == "stale"
        assert (await store.canaries.propose(ana, ref(ana, 4, lineage=1))).status == "candidate"
        assert (await store.canaries.propose(ana, ref(ana, 5, lineage=1))).status == "next"
        again = await store.canaries.decide(ana, 4, promote=False)  # the waiting next goes with its rolled-back base
        assert again.done and again.loser == ref(ana, 4, 1) and again.dropped == ref(ana, 5, 1)
        assert again.next_version is None and await store.canaries.candidate(ana) is None
        back = (await store.canaries.go_backs([ana]))[ana]
        assert back.lineage == 2 and back.to == ref(ana, 1) and back.top == 5  # past the dropped next too

        bo = tenant_of("bo")
        assert (await store.canaries.propose(bo, ref(bo, 1))).status == "candidate"
        await store.users.tombstone("bo")
        assert (await store.canaries.propose(bo, ref(bo, 2))).status == "forgotten"
        assert not await store.canaries.log_turn(bo, 1, t1)  # a forget between the generation and its log
        assert await store.canaries.arm(bo, 1, "t1", 0.5) == "incumbent"  # nothing written for a forgotten user
        assert not redis.Redis(port=port).exists(f"oc:canary:{bo}:v1:arms")
        assert not (await store.canaries.decide(bo, 1, promote=True)).done  # a decision racing the forget
        assert await store.adapters.current(bo) is None

        assert (await store.canaries.propose(ana, ref(ana, 6, lineage=2))).status == "candidate"
        assert (await store.canaries.propose(ana, ref(ana, 7, lineage=2))).status == "next"
        await store.canaries.log_turn(ana, 6, LoggedTurn(arm="candidate", turn_id="t9"))
        await store.canaries.arm(ana, 6, "t9", 0.25)
        assert {r.name for r in await store.canaries.forget(ana)} == {ref(ana, 6).name, ref(ana, 7).name}
        assert await store.canaries.candidate(ana) is None and await store.canaries.turns(ana, 6, 0, 10) == []
        assert await store.canaries.go_backs([ana]) == {}
        assert not redis.Redis(port=port).keys(f"oc:canary:{ana}:*")
        await store.aclose()

    asyncio.run(main())


def test_the_answer_pairs_are_sealed_under_encryption(port):
    async def main():
        store = Store.connect(
            StoreAddress(f"redis://127.0.0.1:{port}/0", 3600), keyring=Keyring.parse(f"k1:{Keyring.new_key()}")
        )
        pair = {"t1": {"candidate": "my-cat-Quetzalcoatl", "incumbent": "old", "conversation": "user: hi"}}
        key = await store.canaries.put_pairs("ten", 1, "run", 0, pair)
        assert b"Quetzalcoatl" not in redis.Redis(port=port).get(key)
        assert await store.canaries.pairs(key) == pair
        await store.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("share", [0.25, 0.1, 0.5, 1 / 3])
def test_the_candidate_serves_its_share_of_turns_to_the_turn_and_a_retry_keeps_its_arm(port, share):
    async def main():
        store = Store.connect(StoreAddress(f"redis://127.0.0.1:{port}/0", 3600))
        ana = tenant_of("ana")
        arms = [await store.canaries.arm(ana, 1, f"turn-{i}", share) for i in range(200)]
        for n in range(1, 201):  # after every turn, never more than the share (and never a whole turn less)
            served = arms[:n].count("candidate")
            assert n * share - 1 < served <= n * share + 1e-9, (n, served)
        again = [await store.canaries.arm(ana, 1, f"turn-{i}", share) for i in (0, 3, 9, 199)]
        assert again == [arms[i] for i in (0, 3, 9, 199)]  # a retried generation takes the arm it took
        assert await store.canaries.arm(ana, 2, "turn-0", share) == "incumbent"  # a new candidate counts afresh
        assert redis.Redis(port=port).ttl(f"oc:canary:{ana}:v1:arms") > 0  # expires with the turn data
        await store.aclose()

    asyncio.run(main())
