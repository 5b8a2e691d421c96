"""Evaluation on a schedule, against the real parts: a Temporal dev server, valkey, an engine serving the tiny model
(as version 4) and the workflow and policy pools' real registrations, in this process.

The eval schedule triggers an EvaluationWorkflow that scores version 4 on the personalization benchmark's held-out
problems and a user's JSONL set; the scores are in the store (`eval list`), in TensorBoard event files and on the
workflow's search attributes. The same version again, a version that crossed no multiple of N since the last
evaluated one, a version the engine does not serve and a set file with a bad line each change nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from activities.eval_curves import eval_curves_dir
from cli.eval import eval_command
from contracts.evaluation import EvalInput, EvalResult, eval_schedule_id
from control.evaluation import ensure_eval_schedule, eval_config, run_evaluation
from openclaw_rl.settings import Pool, Settings
from openclaw_rl.temporal_client import ensure_search_attributes
from stack.preflight import find_temporal_binary
from store.client import Store
from tests.helpers import CLI, REPO, free_port, running_valkey, wait_http
from workers.pools import components_for
from workflows.evaluation import EvaluationWorkflow

pytestmark = pytest.mark.timeout(240)

SERVED = 4
ALWAYS = '{"messages": [{"role": "user", "content": "Say anything."}], "expected": "[\\\\s\\\\S]*", "match": "regex"}'
NEVER = '{"messages": [{"role": "user", "content": "Say hello."}], "expected": "zq-never-zq", "match": "exact"}'


@pytest.fixture(scope="module")
def engine_port(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """An engine whose weights are labelled version 4, as after the trainer published it."""
    port, folder = free_port(), tmp_path_factory.mktemp("eval-engine")
    with open(folder / "engine.log", "wb") as log:
        proc = subprocess.Popen(
            CLI + ["engine", "--model", str(tiny_model), "--port", str(port), "--weight-version", str(SERVED)],
            env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "OPENCLAW_RL_DATA_DIR": str(folder),
                 "OPENCLAW_RL_ENGINE__TORCH_THREADS": "1"},
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
        )  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/health", timeout=120, proc=proc)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest_asyncio.fixture(scope="module")
async def rig(tiny_model, engine_port, tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval")
    user_set = folder / "mine.jsonl"
    user_set.write_text(f"{ALWAYS}\n{NEVER}\n")
    with running_valkey(folder) as redis_port:
        env = await WorkflowEnvironment.start_local(
            data_converter=pydantic_data_converter, dev_server_existing_path=str(find_temporal_binary())
        )
        try:
            settings = Settings(
                data_dir=folder / "data",
                engine={"model_path": str(tiny_model), "port": engine_port},
                redis={"url": f"redis://127.0.0.1:{redis_port}/0"},
                temporal={"address": env.client.service_client.config.target_host,
                          "task_queue_prefix": f"eval-{uuid.uuid4().hex[:8]}"},
                eval={"every_versions": 2, "check_every_s": 3600, "personalization_problems": 2, "max_tokens": 12,
                      "user_sets": {"mine": str(user_set)}},
            )  # fmt: skip
            await ensure_search_attributes(env.client, settings.temporal.namespace)
            workers = []
            for pool in (Pool.WORKFLOW, Pool.POLICY):
                parts = components_for(pool, settings)
                workers.append((Worker(
                    env.client, task_queue=settings.temporal.task_queue(pool),
                    workflows=parts.workflows, activities=parts.activities,
                ), parts))  # fmt: skip
            runs = [asyncio.create_task(w.run()) for w, _ in workers]
            store = Store.from_settings(settings)
            await store.policy.announce(SERVED, "checkpoints/policy-4")
            yield env.client, settings, store, user_set
            await store.aclose()
            for w, parts in workers:
                await w.shutdown()
                for close in parts.closers:
                    await close()
            await asyncio.gather(*runs, return_exceptions=True)
        finally:
            await env.shutdown()


async def _eventually(check, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not (got := await check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)
    return got


def _scalars(data_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(eval_curves_dir(data_dir)))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


async def test_the_schedule_evaluates_the_served_version_and_its_scores_show_everywhere(rig, capsys):
    client, settings, store, _ = rig
    handle = await ensure_eval_schedule(client, settings)
    again = await ensure_eval_schedule(client, settings)  # `up` a second time: updated in place, not duplicated
    assert handle is not None and again is not None and handle.id == again.id == eval_schedule_id("openclaw-rl-policy")
    listed = [s.id async for s in await client.list_schedules()]
    assert listed.count(handle.id) == 1

    await handle.trigger()
    desc = await _eventually(lambda: _with_action(handle), what="the schedule to start an evaluation")
    run_id = desc.info.recent_actions[0].action.workflow_id
    assert run_id.startswith("eval/openclaw-rl-policy/scheduled")
    result: EvalResult = await client.get_workflow_handle(run_id, result_type=EvalResult).result()

    assert result.skipped is None and result.version == SERVED
    by_set = {s.set: s for s in result.scores}
    assert sorted(by_set) == ["personalization-student", "user-mine"]
    assert by_set["user-mine"].metrics == {"accuracy": 0.5} and by_set["user-mine"].count == 2
    student = by_set["personalization-student"]
    assert student.count == 2 and 0.0 <= student.metrics["score"] <= 1.0 and student.served_version == str(SERVED)

    # eval list: the store's record of version 4
    capsys.readouterr()
    assert await eval_command(argparse.Namespace(eval_command="list", json=True), settings) == 0
    listed_scores = json.loads(capsys.readouterr().out)
    assert {(s["version"], s["set"]) for s in listed_scores} == {
        (SERVED, "personalization-student"),
        (SERVED, "user-mine"),
    }
    assert await eval_command(argparse.Namespace(eval_command="list", json=False), settings) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["version", "personalization-student", "user-mine"]
    assert table[1].split()[0] == str(SERVED) and table[1].split()[2] == "0.500"

    # the curves: eval/<set>/<metric> at step = version
    points = _scalars(settings.data_dir)
    assert points["eval/user-mine/accuracy"] == [(SERVED, 0.5)]
    assert points["eval/personalization-student/score"] == [(SERVED, pytest.approx(student.metrics["score"]))]

    # the Web UI's search: this version's evaluations, by set
    query = (
        f"WorkflowType = 'EvaluationWorkflow' AND OpenclawPolicyVersion = {SERVED} AND OpenclawEvalSet = 'user-mine'"
    )

    async def found():
        return [w.id async for w in client.list_workflows(query)]

    assert await _eventually(found, what="the evaluation in visibility") == [run_id]

    # deterministic: its history replays on the workflow's code
    history = await client.get_workflow_handle(run_id).fetch_history()
    await Replayer(workflows=[EvaluationWorkflow], data_converter=pydantic_data_converter).replay_workflow(history)


async def _with_action(handle):
    desc = await handle.describe()
    return desc if desc.info.recent_actions else None


async def test_the_same_version_again_or_one_off_the_cadence_changes_nothing(rig):
    client, settings, store, _ = rig
    before, points = await store.evals.all(), _scalars(settings.data_dir)
    assert before, "runs after the scheduled evaluation"

    again = await run_evaluation(client, settings)
    assert again.skipped == f"version {SERVED} was evaluated already" and again.scores == []

    await store.policy.announce(SERVED + 1, "checkpoints/policy-5")
    off_cadence = await client.execute_workflow(
        EvaluationWorkflow.run,
        EvalInput(config=eval_config(settings)),
        id=f"eval-test-{uuid.uuid4().hex[:8]}",
        task_queue=settings.temporal.task_queue(Pool.WORKFLOW),
    )
    assert off_cadence.skipped == f"version {SERVED + 1}: no multiple of 2 crossed since version {SERVED}"

    # Version 6 is published but the engine still serves 4: its answers would not be version 6's.
    await store.policy.announce(SERVED + 2, "checkpoints/policy-6")
    moved = await run_evaluation(client, settings, sets=["personalization-student"])
    assert moved.skipped == f"version {SERVED + 2} moved on"

    assert await store.evals.all() == before and _scalars(settings.data_dir) == points


async def test_a_user_set_with_a_bad_line_fails_with_the_line_and_the_reason(rig, capsys):
    client, settings, store, user_set = rig
    user_set.write_text(ALWAYS + '\n{"messages": [{"role": "user", "content": "2+2?"}], "expected": 4}\n')
    with pytest.raises(WorkflowFailureError):
        await run_evaluation(client, settings, sets=["user-mine"], version=SERVED + 10)
    args = argparse.Namespace(eval_command="run", sets=["user-mine"], version=SERVED + 10, json=False)
    capsys.readouterr()
    assert await eval_command(args, settings) == 1
    err = capsys.readouterr().err
    assert f"{user_set} line 2: expected: Input should be a valid string" in err, err
    assert SERVED + 10 not in {s.version for s in await store.evals.all()}
