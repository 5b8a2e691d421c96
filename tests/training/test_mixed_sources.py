"""One policy learns from several streams: a train step consumes personal and terminal samples at once.

The terminal samples are written by the real `publish_step_samples` activity (from
token data stored as `agent_step` stores it), so the step-sample wire format is the
one the trainer reads.
"""

from __future__ import annotations

import redis
from temporalio.testing import ActivityEnvironment

from activities.step_learning import StepLearningActivities
from activities.training import TrainingActivities
from contracts.episodes import PublishStepsInput, StepSampleRef
from contracts.training import ClaimInput, TrainInput
from store import keys
from store.samples import EpisodeStep
from store.turns import TurnTokens
from tests.helpers import store_at
from tests.training.test_train_step_activity import publish, settings_for, valkey  # noqa: F401 (fixture)


async def store_steps(port: int, episode_id: str, n: int) -> list[StepSampleRef]:
    store = store_at(port)
    refs = []
    for t in range(n):
        step_id = f"{episode_id}:a1:s{t}"
        await store.turns.save(
            TurnTokens(
                turn_id=step_id,
                prompt_ids=[151644, 872, 198, 100 + t],
                response_ids=[3838, 374, 1273],
                response_logprobs=[-11.0] * 3,
                weight_version="0",
                finish_reason="stop",
                temperature=1.0,
            ),
        )
        refs.append(
            StepSampleRef(
                episode_id=episode_id, step=t, step_id=step_id, reward=1.0 - t, advantage=0.5 - t, outcome=1.0
            )
        )
    await store.aclose()
    return refs


async def test_one_train_step_consumes_the_personal_and_terminal_streams(tmp_path, valkey, tiny_model):  # noqa: F811
    settings = settings_for(tmp_path, valkey, tiny_model)
    publish(valkey, 0, 4)
    refs = await store_steps(valkey, "episode/g1/0", 4)
    steps = StepLearningActivities(settings)
    env = ActivityEnvironment()
    inp = PublishStepsInput(setting="terminal", task_id="files-x", group_id="g1", judge_name="heuristic", steps=refs)
    first = await env.run(steps.publish_step_samples, inp)
    again = await env.run(steps.publish_step_samples, inp)  # a retried activity publishes nothing twice
    assert (first.published, first.duplicates) == (4, 0) and (again.published, again.duplicates) == (0, 4)
    assert redis.Redis(port=valkey).xlen(keys.sample_stream("terminal")) == 4
    store = store_at(valkey)
    published = [s for _, s in await store.samples.entries("terminal")]
    await store.aclose()
    # a step's sample says where it came from, and only that: no user, session or turn fields
    assert [s.provenance for s in published] == [
        EpisodeStep(
            episode_id="episode/g1/0",
            step=t,
            step_id=f"episode/g1/0:a1:s{t}",
            task_id="files-x",
            group_id="g1",
            outcome=1.0,
            judge="heuristic",
            votes=[],
        )
        for t in range(4)
    ]
    assert [s.advantages for s in published] == [[0.5 - t] * 3 for t in range(4)]

    acts = TrainingActivities(settings)
    claim = await env.run(
        acts.claim_batch,
        ClaimInput(consumer="t", batch_size=8, source_weights={"personal": 1.0, "terminal": 1.0}, wait_s=1.0),
    )
    assert {k: len(v) for k, v in claim.ids.items()} == {"personal": 4, "terminal": 4}
    summary = await env.run(acts.train_step, TrainInput(ids=claim.ids, version=0, max_staleness=4))
    assert summary.trained == 8 and summary.version == 1
    assert sorted(i for i in summary.sample_ids if i.startswith("episode/")) == [f"episode/g1/0#{t}" for t in range(4)]
    assert sum(i.startswith("session/") for i in summary.sample_ids) == 4
    await steps.aclose()
    await acts.aclose()


def _fill(port: int, counts: dict[str, int]) -> None:
    """`counts[source]` entries in each source's stream (the claim only reads ids, never the fields)."""
    r = redis.Redis(port=port)
    for src, n in counts.items():
        for i in range(n):
            r.xadd(keys.sample_stream(src), {"id": f"{src}#{i}"})


async def test_a_claim_keeps_the_batch_size_and_each_sources_share(tmp_path, valkey, tiny_model):  # noqa: F811
    """Redis applies COUNT per stream: one read over four full streams returned up to 4x the batch (15 for 8)."""
    acts = TrainingActivities(settings_for(tmp_path, valkey, tiny_model))
    env = ActivityEnvironment()
    _fill(valkey, {"terminal": 10, "toolcall": 10, "swe": 10, "gui": 10, "personal": 10})

    async def claim(consumer: str, weights: dict[str, float]) -> dict[str, int]:
        got = await env.run(
            acts.claim_batch, ClaimInput(consumer=consumer, batch_size=8, source_weights=weights, wait_s=0.5)
        )
        return {k: len(v) for k, v in got.ids.items()}

    assert await claim("a", {"terminal": 1, "toolcall": 1, "swe": 1, "gui": 1}) == {
        "terminal": 2,
        "toolcall": 2,
        "swe": 2,
        "gui": 2,
    }
    assert await claim("b", {"personal": 3, "terminal": 1}) == {"personal": 6, "terminal": 2}
    # a source with too little: the others fill the batch rather than leave it short
    assert await claim("c", {"swe": 1, "gui": 1, "empty": 1}) in ({"swe": 4, "gui": 4}, {"swe": 5, "gui": 3})
    await acts.aclose()
