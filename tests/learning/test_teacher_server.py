"""A frozen teacher on its own server, and the judge's own concurrency budget.

The teacher is a real second engine serving different weights than the policy: the log-probs the activity stores
must be the teacher's, and the policy must not be asked.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import httpx
import pytest
import torch
from safetensors.torch import load_file, save_file

from activities.learning import LearningActivities
from contracts.chat import StoredChatRequest
from contracts.learning import TeacherInput
from judges.base import JudgeContext
from judges.llm import LlmJudge
from openclaw_rl.settings import LlmJudgeSettings, Settings
from policy_client import PolicyClient
from policy_client.chat import renderer_for
from rlmath.signals import teacher_messages
from store.client import Store, StoreAddress
from store.turns import TurnTokens
from tests.conftest import start_engine
from tests.helpers import running_valkey
from tests.learning.conftest import ScriptedJudge

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
HINT = "Answer in one word."
RESPONSE_IDS = [9, 10, 11, 12, 13]


@pytest.fixture(scope="module")
def valkey_url(tmp_path_factory):
    with running_valkey(tmp_path_factory.mktemp("valkey")) as port:
        yield f"redis://127.0.0.1:{port}/0"


@pytest.fixture(scope="module")
def teacher_url(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """An engine serving the tiny model with perturbed weights: another model on the same tokenizer."""
    folder = tmp_path_factory.mktemp("teacher") / "tiny-teacher"
    shutil.copytree(tiny_model, folder)
    weights = load_file(folder / "model.safetensors")
    gen = torch.Generator().manual_seed(1234)
    save_file(
        {k: v + 0.05 * torch.randn(v.shape, generator=gen, dtype=v.dtype) for k, v in weights.items()},
        folder / "model.safetensors",
    )
    proc, url = start_engine(folder, folder.parent)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def _requests_done(url: str) -> int:
    return httpx.get(f"{url}/get_server_info", timeout=10).json()["requests_done"]


async def test_teacher_logprobs_come_from_the_teacher_server(tmp_path, tiny_model, engine_url, teacher_url, valkey_url):
    settings = Settings(
        data_dir=tmp_path,
        redis={"url": valkey_url},
        policy={"server_urls": [engine_url], "tokenizer_path": str(tiny_model)},
        learning={"teacher": {"url": teacher_url, "max_concurrency": 2}},
    )
    store = Store.connect(StoreAddress(valkey_url, 3600))
    turn_ids = [f"turn-teacher-{i}" for i in range(3)]
    for turn_id in turn_ids:
        await store.turns.save(
            TurnTokens(
                turn_id=turn_id,
                prompt_ids=[1, 2, 3],
                response_ids=RESPONSE_IDS,
                response_logprobs=[-1.0] * len(RESPONSE_IDS),
                weight_version="0",
                finish_reason="stop",
                response_text="Paris",
                temperature=1.0,
            ),
        )
        await store.requests.save(turn_id, StoredChatRequest(messages=MESSAGES))
    policy_before, teacher_before = _requests_done(engine_url), _requests_done(teacher_url)
    acts = LearningActivities(settings)
    try:
        results = await asyncio.gather(*(acts.teacher_logprobs(TeacherInput(turn_id=t, hint=HINT)) for t in turn_ids))
        stored = await store.turns.teacher_logprobs(results[0].key)
    finally:
        await acts.aclose()
        await store.aclose()
    assert all(r.tokens == len(RESPONSE_IDS) for r in results)
    assert _requests_done(teacher_url) - teacher_before == 3
    assert _requests_done(engine_url) == policy_before  # the policy was not asked

    enhanced = renderer_for(str(tiny_model)).render(teacher_messages(MESSAGES, HINT), None)
    ids = enhanced + RESPONSE_IDS
    async with PolicyClient([teacher_url]) as teacher, PolicyClient([engine_url]) as policy:
        from_teacher = await teacher.score(ids, len(enhanced))
        from_policy = await policy.score(ids, len(enhanced))
    assert stored == pytest.approx(from_teacher, abs=1e-5)
    assert max(abs(a - b) for a, b in zip(from_teacher, from_policy)) > 1e-3  # the two models do differ


async def test_judge_votes_wait_for_the_judges_own_budget():
    ctx = JudgeContext(response="Paris.", next_state_role="user", next_state="SLOW thanks")
    with ScriptedJudge(["\\boxed{1}"], delays={"SLOW": 0.6}) as server:
        for budget, at_least, below in ((1, 1.8, None), (3, None, 1.5)):
            cfg = LlmJudgeSettings(url=server.url, max_concurrency=budget)
            judge = LlmJudge(cfg, Settings())
            started = time.monotonic()
            try:
                votes = await asyncio.gather(*(judge.prm(ctx) for _ in range(3)))
            finally:
                await judge.aclose()
            elapsed = time.monotonic() - started
            assert votes == ["\\boxed{1}"] * 3
            if at_least is not None:
                assert elapsed >= at_least, elapsed  # one vote at a time: three delays in a row
            if below is not None:
                assert elapsed < below, elapsed  # all three together


async def test_with_per_user_adapters_the_teacher_is_the_users_own_adapter(tmp_path, tiny_model, valkey_url):
    """OPD's teacher is the same model under the hint: with per-user adapters, the user's adapter (scored by the base
    instead, OPD would pull every adapter back towards the base). The engine has not loaded it (a restart): the
    activity loads it from its folder first. A user with no adapter yet is scored by the base."""
    from contracts.chat import tenant_of
    from store.adapters import AdapterRef
    from tests.engine.test_lora_serving import write_adapter

    folder = write_adapter(tiny_model, tmp_path / "adapters" / "u-ines-v3", seed=5)
    proc, url = start_engine(tiny_model, tmp_path)  # its data dir holds the adapter: a folder it may load from
    settings = Settings(
        data_dir=tmp_path,
        redis={"url": valkey_url},
        policy={"server_urls": [url], "tokenizer_path": str(tiny_model)},
        training={"adapters": "per_user", "lora": {"enabled": True, "rank": 4}},
    )
    store = Store.connect(StoreAddress(valkey_url, 3600))
    acts = LearningActivities(settings)
    try:
        await store.adapters.publish(tenant_of("ines"), AdapterRef(name="u-ines-v3", path=str(folder), version=3))
        for user in ("ines", "omar"):
            await store.turns.save(
                TurnTokens(
                    turn_id=f"turn-{user}", prompt_ids=[1, 2, 3], response_ids=RESPONSE_IDS,
                    response_logprobs=[-1.0] * len(RESPONSE_IDS), weight_version="3", finish_reason="stop",
                    response_text="Paris", temperature=1.0,
                ),
            )  # fmt: skip
            await store.requests.save(f"turn-{user}", StoredChatRequest(messages=MESSAGES))
        stored = {}
        for user in ("ines", "omar"):
            result = await acts.teacher_logprobs(TeacherInput(turn_id=f"turn-{user}", hint=HINT, user_id=user))
            stored[user] = await store.turns.teacher_logprobs(result.key)
        enhanced = renderer_for(str(tiny_model)).render(teacher_messages(MESSAGES, HINT), None)
        async with PolicyClient([url]) as policy:
            adapter = await policy.score(enhanced + RESPONSE_IDS, len(enhanced), lora_path="u-ines-v3")
            base = await policy.score(enhanced + RESPONSE_IDS, len(enhanced))
    finally:
        await acts.aclose()
        await store.aclose()
        proc.terminate()
        proc.wait(timeout=30)
    assert stored["ines"] == pytest.approx(adapter, abs=1e-5)
    assert stored["omar"] == pytest.approx(base, abs=1e-5)
    assert max(abs(a - b) for a, b in zip(adapter, base)) > 1e-3  # the adapter does change the scores
