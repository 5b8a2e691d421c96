"""Canary versions on the real stack (eval.canary, contracts.canary): each user's new adapter version is a candidate
that serves a share of their turns; the CanaryWorkflow has the other version answer those turns again, an LLM judge
(a scripted stand-in on the real wire format) compares both orders, and a sequential test promotes or rolls back.

The stand-in judge prefers, in either position, ines's candidate and omar's incumbent (it finds which answer is whose
in the round's pairs the store holds, as a judge reading the answers would tell them apart). So ines's first version
must be promoted (it becomes her adapter), and omar's rolled back (he stays on the base model): each decision an
event of his `canary/<pseudonym>` workflow, with its evidence.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import httpx
import pytest
import redis

from bench.personalization.canary_bench import decisions_of
from contracts.chat import tenant_of
from store import keys
from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import RunningStack
from tests.learning.conftest import ScriptedJudge, flat, pairwise_judge

pytestmark = pytest.mark.timeout(900)

PREFERS = {"ines": "candidate", "omar": "incumbent"}
STORE: dict[str, redis.Redis] = {}


def _pair_of(a: str, b: str) -> dict | None:
    r = STORE["r"]
    for key in r.scan_iter("oc:canary:*:pairs:*"):
        for pair in json.loads(r.get(key) or "{}").values():
            if {flat(pair["candidate"]), flat(pair["incumbent"])} == {flat(a), flat(b)}:
                return pair
    return None


def prefer_by_user(a: str, b: str, conversation: str) -> str:
    """ines's candidate, omar's incumbent, in either position (a tie when the answers are the same)."""
    pair = _pair_of(a, b)
    if pair is None or flat(a) == flat(b):
        return "tie"
    who = next(u for u in PREFERS if f"[{u}]" in conversation)
    return "A" if flat(a) == flat(pair[PREFERS[who]]) else "B"


@pytest.fixture(scope="module")
def stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    with ScriptedJudge(["\\boxed{0}"], decide=pairwise_judge(prefer_by_user)) as judge:
        env = chat_stack_env(
            tmp_path_factory.mktemp("canary") / "data",
            tiny_model,
            OPENCLAW_RL_LEARNING__JUDGE=json.dumps({"type": "llm", "url": judge.url, "timeout_s": 20}),
            OPENCLAW_RL_TRAINING__AUTO_START="true",
            OPENCLAW_RL_TRAINING__BATCH_SIZE="4",
            OPENCLAW_RL_TRAINING__WAIT_S="1",
            OPENCLAW_RL_TRAINING__LR="5e-4",
            OPENCLAW_RL_TRAINING__LORA__ENABLED="true",
            OPENCLAW_RL_TRAINING__LORA__RANK="4",
            OPENCLAW_RL_TRAINING__ADAPTERS="per_user",
            OPENCLAW_RL_EVAL__CANARY__ENABLED="true",
            OPENCLAW_RL_EVAL__CANARY__SHARE="0.5",
            OPENCLAW_RL_EVAL__CANARY__MAX_TURNS="30",
            OPENCLAW_RL_EVAL__CANARY__WAIT_S="2",
            OPENCLAW_RL_EVAL__TEMPERATURE="1.0",
        )
        s = RunningStack(env).start()
        STORE["r"] = redis.Redis.from_url(s.redis, decode_responses=True)
        yield s
        s.stop()


def talk(stack: RunningStack, key: str, user: str, stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        history = [{"role": "user", "content": f"[{user}] tell me about topic {n}"}]
        for t in range(4):
            r = httpx.post(
                f"{stack.api}/v1/chat/completions",
                json={"messages": history, "max_tokens": 8},
                headers={"Authorization": f"Bearer {key}", "X-Session-Id": f"{user}-{n}"},
                timeout=120,
            )
            assert r.status_code == 200, r.text
            reply = r.json()["choices"][0]["message"]["content"]
            history += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"[{user}] more {t}"}]
            if stop.is_set():
                return


def talk_once(stack: RunningStack, key: str, user: str, n: int) -> None:
    """One more session of four turns (its session id `<user>-again-<n>`)."""
    history: list[dict] = []
    for t in range(4):
        history.append({"role": "user", "content": f"[{user}] again {n}, part {t}"})
        r = httpx.post(
            f"{stack.api}/v1/chat/completions",
            json={"messages": history, "max_tokens": 8},
            headers={"Authorization": f"Bearer {key}", "X-Session-Id": f"{user}-again-{n}"},
            timeout=120,
        )
        assert r.status_code == 200, r.text
        history.append({"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]})


def logged(r: redis.Redis, tenant: str, version: int) -> list[tuple[str, str]]:
    """(arm, weight version that served it) of each turn logged while `version` was the user's candidate."""
    out = []
    for raw in r.lrange(keys.canary_turns(tenant, version), 0, -1):
        turn = json.loads(raw)
        out.append((turn["arm"], r.hget(keys.turn_data(turn["turn_id"]), "weight_version")))
    return out


def test_a_preferred_candidate_is_promoted_and_a_losing_one_rolled_back_on_a_share_of_turns(stack):
    tenants = {u: tenant_of(u) for u in PREFERS}
    api_keys = {u: create_key(stack, u) for u in PREFERS}
    stop = threading.Event()
    threads = [threading.Thread(target=talk, args=(stack, api_keys[u], u, stop), daemon=True) for u in PREFERS]
    for t in threads:
        t.start()
    r = STORE["r"]
    found: dict[str, list[dict]] = {}
    deadline = time.monotonic() + 600
    try:
        while not all(found.get(u) for u in PREFERS):
            pending = {u: r.hgetall(keys.adapter_candidate(t)) for u, t in tenants.items()}
            assert time.monotonic() < deadline, (found, pending)
            assert all(t.is_alive() for t in threads), "a chat thread failed"
            time.sleep(3)
            found = {u: asyncio.run(decisions_of(stack.temporal, t)) for u, t in tenants.items()}
        ines, omar = found["ines"][0], found["omar"][0]
        # The users go on talking: their turns under the next candidate (if one waited) show who serves them now.
        after = {"ines": ines.get("next_version"), "omar": omar.get("next_version")}
        until = time.monotonic() + 90
        while time.monotonic() < until and any(
            v is not None and len(logged(r, tenants[u], v)) < 4 for u, v in after.items()
        ):
            time.sleep(2)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)

    assert ines["verdict"] == "promoted" and ines["evidence"]["wins"] >= 5, ines
    assert ines["evidence"]["losses"] == 0 and ines["reason"].startswith("promoted:")
    assert omar["verdict"] == "rolled back" and omar["evidence"]["losses"] >= 4 and omar["evidence"]["wins"] == 0, omar
    promoted = json.loads(r.get(keys.user_adapter(tenants["ines"])))
    assert promoted["version"] >= ines["version"]
    assert r.get(keys.user_adapter(tenants["omar"])) is None  # every candidate of his lost: the base serves him

    # While judged, each arm was served by its own version: the candidate's turns by it, the incumbent's by the base
    # (their first versions were judged against the base model, version "0"); the candidate took some, not all.
    for user, d in (("ines", ines), ("omar", omar)):
        arms = logged(r, tenants[user], d["version"])
        assert d["evidence"]["turns"] <= len(arms)
        assert {a for a, _ in arms} == {"candidate", "incumbent"}, arms
        assert all(served == (str(d["version"]) if arm == "candidate" else "0") for arm, served in arms), arms
    # After the decisions: ines's incumbent is her promoted version, omar's still the base; his rolled-back version
    # serves none of his turns.
    if after["ines"] is not None:
        assert {v for a, v in logged(r, tenants["ines"], after["ines"]) if a == "incumbent"} <= {str(ines["version"])}
    assert after["omar"] is None  # a rollback drops the version waiting behind it (trained on from the loser)
    # ...and the trainer goes back to what serves him: his next candidate is of the new line (a version of the
    # abandoned one would be refused, and none of his would ever be judged again).
    until, n = time.monotonic() + 180, 0
    while time.monotonic() < until:
        raw = r.hget(keys.adapter_candidate(tenants["omar"]), "ref") or r.get(keys.user_adapter(tenants["omar"]))
        if raw and json.loads(raw).get("lineage", 0) >= 1:
            break
        n += 1
        talk_once(stack, api_keys["omar"], "omar", n)
    else:
        raise AssertionError("no version of omar's new line was proposed after his rollback")
