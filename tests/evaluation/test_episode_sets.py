"""An episode set (`episodes-terminal`) against the real parts: a Temporal dev server, valkey, real sandboxes, and
the workflow, policy, judge and env pools' real registrations in this process; the policy is a scripted server
(tests.scripted_policy) reporting weight version 4, so the outcomes are known in advance.

The terminal setting's held-out split is the agents benchmark's counting tasks from `count-0600` on; the first two
are written to a task folder the env pool serves. The scripted policy solves `count-0600` and gives up on
`count-0601`: an evaluation of version 4 scores success 0.5 over 2 episodes, in the store and TensorBoard, with no
sample published, and changes nothing the second time. Weights that are not the evaluated version's record nothing.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import pytest_asyncio
import redis
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from control.evaluation import eval_config, run_evaluation
from envs.registry import UnknownSetting
from envs.sandbox import sandbox_problem
from envs.terminal import counting_tasks
from evals.base import EvalSetError
from evals.episodes import held_out_task_ids
from evals.registry import configured_sets
from openclaw_rl.settings import Pool, Settings
from openclaw_rl.temporal_client import ensure_search_attributes
from stack.preflight import find_temporal_binary
from store import keys
from store.client import Store
from tests.evaluation.test_scheduled_eval import _eventually, _scalars
from tests.helpers import running_valkey
from tests.scripted_policy import ScriptedPolicy, tool_call
from workers.pools import components_for
from workflows.evaluation import EvaluationWorkflow

SERVED = 4
SOLVED, GIVEN_UP = counting_tasks.task(600), counting_tasks.task(601)
SET = "episodes-terminal"


def test_the_terminal_split_is_the_counting_family_held_out_and_settings_can_replace_or_add_one():
    ids = held_out_task_ids("terminal", Settings())
    assert ids[:2] == ["count-0600", "count-0601"] and len(ids) == counting_tasks.TASKS - counting_tasks.HELD_OUT_FROM
    assert held_out_task_ids("toolcall", Settings())[0].startswith("math/")
    own = Settings(eval={"held_out_tasks": {"swe": ["pager__paginate-1"]}, "episodes": ["swe"]})
    assert held_out_task_ids("swe", own) == ["pager__paginate-1"]
    with pytest.raises(EvalSetError, match="no held-out split"):
        held_out_task_ids("gui", Settings())
    # the sets in settings order, and each episode set's episodes configured from its setting, without votes
    cfg = eval_config(own)
    assert configured_sets(own)[-1] == "episodes-swe" and cfg.episodes["swe"].prm_votes == 0
    assert cfg.episodes["swe"].max_steps == own.envs.swe.max_steps
    with pytest.raises(UnknownSetting):
        eval_config(own, sets=["episodes-nosuchsetting"])


def _script(prompt: str) -> str:
    """count-0600: the oracle's command, then submit; count-0601: submit with nothing written."""
    if SOLVED.instruction in prompt and prompt.count("<|im_start|>assistant") == 1:
        return tool_call("bash", command=f"{SOLVED.command} > {counting_tasks.ANSWER_FILE}")
    return tool_call("submit")


@pytest.fixture(scope="module")
def shared_tmp():
    """Under /tmp, readable by all: the sandbox's uid copies the workspace from the task folder, and traverses
    the sandbox root's parents (pytest's own tmp folders are 0700)."""
    root = Path(f"/tmp/oc-eval-episodes-{uuid.uuid4().hex[:8]}")
    tasks = root / "tasks"
    tasks.mkdir(parents=True)
    for t in (SOLVED, GIVEN_UP):
        counting_tasks.write_task(t, tasks)
    for d, _, _ in os.walk(root):
        os.chmod(d, 0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest_asyncio.fixture(scope="module")
async def rig(tiny_model, shared_tmp, tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval-episodes")
    with ScriptedPolicy(tiny_model, _script) as policy, running_valkey(folder) as redis_port:
        policy.weight_version = str(SERVED)
        env = await WorkflowEnvironment.start_local(
            data_converter=pydantic_data_converter, dev_server_existing_path=str(find_temporal_binary())
        )
        try:
            settings = Settings(
                data_dir=folder / "data",
                engine={"model_path": str(tiny_model)},
                policy={"server_urls": [policy.url], "tokenizer_path": str(tiny_model)},
                redis={"url": f"redis://127.0.0.1:{redis_port}/0"},
                temporal={"address": env.client.service_client.config.target_host,
                          "task_queue_prefix": f"evep-{uuid.uuid4().hex[:8]}"},
                learning={"judge": {"type": "heuristic"}},
                envs={"terminal": {"task_dirs": [str(shared_tmp / "tasks")], "max_steps": 3},
                      "sandbox": {"root": str(shared_tmp / "sandboxes")}, "env_lost_after_s": 10},
                eval={"every_versions": 2, "check_every_s": 3600, "personalization": [], "episodes": ["terminal"],
                      "episode_tasks": 2, "episode_samples": 1},
            )  # fmt: skip
            await ensure_search_attributes(env.client, settings.temporal.namespace)
            workers, closers = [], []
            for pool in (Pool.WORKFLOW, Pool.POLICY, Pool.JUDGE, Pool.ENV):
                parts = components_for(pool, settings)
                closers += parts.closers
                tuner = {"tuner": parts.shared_tuner} if parts.shared_tuner else {}
                workers.append(Worker(
                    env.client, task_queue=settings.temporal.task_queue(pool), workflows=parts.workflows,
                    activities=parts.activities, graceful_shutdown_timeout=timedelta(seconds=2), **tuner,
                ))  # fmt: skip
                if parts.own_queue:  # the env pool's: every call after env_open goes to the worker holding the env
                    workers.append(Worker(
                        env.client, task_queue=parts.own_queue, activities=parts.activities,
                        max_concurrent_activities=parts.own_queue_slots or 100,
                        graceful_shutdown_timeout=timedelta(seconds=2),
                    ))  # fmt: skip
            runs = [asyncio.create_task(w.run()) for w in workers]
            store = Store.from_settings(settings)
            await store.policy.announce(SERVED, "checkpoints/policy-4")
            yield env.client, settings, store, policy
            await store.aclose()
            for w in workers:
                await w.shutdown()
            for close in closers:
                await close()
            await asyncio.gather(*runs, return_exceptions=True)
        finally:
            await env.shutdown()


def _samples(settings: Settings) -> dict[str, int]:
    """Every sample stream's length."""
    r = redis.Redis.from_url(settings.redis.url)
    return {k.decode(): r.xlen(k) for k in r.scan_iter(match=keys.sample_stream("*"))}


@pytest.mark.timeout(240)
@pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")
async def test_held_out_episodes_score_the_version_once_and_publish_no_sample(rig):
    client, settings, store, policy = rig
    before = _samples(settings)

    result = await run_evaluation(client, settings)
    assert result.skipped is None and result.version == SERVED, result
    [scores] = result.scores
    assert scores.set == SET and scores.metrics == {"success": 0.5} and scores.count == 2
    assert scores.served_version == str(SERVED)
    assert any(SOLVED.instruction in p for p in policy.prompts) and any(
        GIVEN_UP.instruction in p for p in policy.prompts
    )

    assert [(s.version, s.set, s.metrics) for s in await store.evals.all()] == [(SERVED, SET, {"success": 0.5})]
    assert _scalars(settings.data_dir)[f"eval/{SET}/success"] == [(SERVED, 0.5)]
    assert _samples(settings) == before  # evaluation episodes train nothing

    again = await run_evaluation(client, settings)
    assert again.skipped == f"version {SERVED} was evaluated already" and again.scores == []

    # deterministic: the history with its child task groups replays on the workflow's code
    async def listed():
        found = [w async for w in client.list_workflows("WorkflowType = 'EvaluationWorkflow'")]
        return found if len(found) == 2 else None

    for run in await _eventually(listed, what="both evaluations in visibility"):
        history = await client.get_workflow_handle(run.id, run_id=run.run_id).fetch_history()
        await Replayer(workflows=[EvaluationWorkflow], data_converter=pydantic_data_converter).replay_workflow(history)


@pytest.mark.timeout(240)
@pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")
async def test_episodes_on_other_weights_than_the_version_record_nothing(rig):
    client, settings, store, _ = rig
    before, samples = await store.evals.all(), _samples(settings)
    await store.policy.announce(SERVED + 2, "checkpoints/policy-6")  # published, but the servers still answer as 4
    moved = await run_evaluation(client, settings)
    assert moved.version == SERVED + 2 and moved.skipped == f"version {SERVED + 2} moved on" and moved.scores == []
    assert await store.evals.all() == before and _samples(settings) == samples
