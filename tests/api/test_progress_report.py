"""Did it get better for me? A user's progress report through the whole stack (contracts.progress): half of the
user's judged turns are held out of training (they never become samples), training publishes a new version from the
rest, `openclaw-rl users report` has the new version answer the held-out turns again and an LLM judge (a scripted
stand-in on the real wire format) compare both orders; `GET /v1/me/progress` shows the report, the export holds it,
and the forget removes it, the held-out turns and the report's workflow.

The stand-in judge prefers, in either position, an answer the user was never served: so every judged turn is a win
for the new version unless its new answer is one already served (a tie), never a loss; a judge that ignored the
order would make every turn a tie instead.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx
import pytest
import redis

from activities.learning import HELD_OUT
from contracts.chat import tenant_of
from store import keys
from tests.api.conftest import chat_stack_env, create_key
from tests.api.test_user_data import store_hits, users_cli
from tests.helpers import RunningStack, workflow_exists
from tests.learning.conftest import ScriptedJudge, flat, pairwise_judge

pytestmark = pytest.mark.timeout(900)

SERVED: set[str] = set()
PAIRWISE: list[tuple[str, str]] = []


def prefer_unserved(a: str, b: str, conversation: str) -> str:
    PAIRWISE.append((a, b))
    a_new, b_new = flat(a) not in SERVED, flat(b) not in SERVED
    return "A" if a_new and not b_new else "B" if b_new and not a_new else "tie"


@pytest.fixture(scope="module")
def stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    with ScriptedJudge(["\\boxed{0}"], decide=pairwise_judge(prefer_unserved)) as judge:
        env = chat_stack_env(
            tmp_path_factory.mktemp("progress") / "data",
            tiny_model,
            OPENCLAW_RL_LEARNING__JUDGE=json.dumps({"type": "llm", "url": judge.url, "timeout_s": 20}),
            OPENCLAW_RL_EVAL__PROGRESS__HELD_OUT_SHARE="0.5",
            OPENCLAW_RL_TRAINING__AUTO_START="true",
            OPENCLAW_RL_TRAINING__BATCH_SIZE="2",
            OPENCLAW_RL_TRAINING__WAIT_S="1",
        )
        s = RunningStack(env).start()
        yield s
        s.stop()


def chat(stack: RunningStack, key: str, session: str, history: list[dict]) -> str:
    r = httpx.post(
        f"{stack.api}/v1/chat/completions",
        json={"messages": history, "max_tokens": 8},
        headers={"Authorization": f"Bearer {key}", "X-Session-Id": session},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    text = r.json()["choices"][0]["message"]["content"]
    SERVED.add(flat(text))
    return text


def progress(stack: RunningStack, key: str) -> dict:
    r = httpx.get(f"{stack.api}/v1/me/progress", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def served_version(stack: RunningStack) -> int:
    return int(json.loads(stack.cli("train", "status", "--json"))["version"])


def test_held_out_turns_train_nothing_and_the_report_compares_the_new_version_with_the_old(stack):
    user = f"pia-{uuid.uuid4().hex[:6]}"
    key = create_key(stack, user)
    before = progress(stack, key)
    assert before["latest"] is None and before["held_out_share"] == 0.5 and "POST /v1/me/progress" in before["note"]

    # Sessions of three messages (two judged turns each) until some turns are held out and training has published.
    deadline = time.monotonic() + 420
    n = 0
    while True:
        n += 1
        history = [{"role": "user", "content": f"tell me about topic {n}"}]
        for follow_up in ("go on", "thanks"):
            history += [{"role": "assistant", "content": chat(stack, key, f"s{n}", history)}]
            history += [{"role": "user", "content": f"{follow_up} ({n})"}]
        chat(stack, key, f"s{n}", history)
        if progress(stack, key)["held_out_turns"] >= 2 and served_version(stack) >= 1:
            break
        assert time.monotonic() < deadline, f"after {n} sessions: {progress(stack, key)}"

    cli = users_cli(stack, "report", user)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    print(cli.stdout)  # what a user sees (pytest -s)
    view = progress(stack, key)
    report = view["latest"]
    assert report is not None, (cli.stdout, view)
    assert report["judge"] == "llm" and int(report["served_version"]) >= 1
    assert report["judged"] >= 1 and report["tenant"] == tenant_of(user)
    first = next(c for c in report["comparisons"] if c["against"] == "first")
    assert first["wins"] + first["ties"] + first["losses"] == first["turns"] >= 1
    assert first["losses"] == 0, report  # the judge never prefers an answer already served
    assert 0.0 <= first["low"] <= first["win_rate"] <= first["high"] <= 1.0
    assert len(PAIRWISE) == 2 * report["judged"]  # both orders of every judged turn
    assert f"progress of {user}: version {report['served_version']} serving" in cli.stdout
    assert "plot: " in cli.stdout
    png = Path(cli.stdout.split("plot: ")[1].split()[0])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert view["history"][0]["served_version"] == report["served_version"]

    # Held-out turns never became samples: their judgements say why, and no sample names them.
    exported = httpx.get(f"{stack.api}/v1/me/data", headers={"Authorization": f"Bearer {key}"}, timeout=120).json()
    held_ids = {t["turn_id"] for t in exported["held_out_turns"]}
    assert len(held_ids) == view["held_out_turns"] >= 2
    reasons = {t["turn_id"]: t["judgement"]["result"]["reason"] for t in exported["turns"] if t.get("judgement")}
    assert all(reasons.get(t) == HELD_OUT for t in held_ids if t in reasons)
    assert not held_ids & {s["turn_id"] for s in exported["samples"]}
    assert exported["progress_reports"][0]["served_version"] == report["served_version"]

    # A second request computes again; the cached view does not.
    r = httpx.post(f"{stack.api}/v1/me/progress", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 202 and r.json()["workflow_id"] == f"progress/{tenant_of(user)}"
    assert workflow_exists(stack, f"progress/{tenant_of(user)}")
    cached = users_cli(stack, "report", user, "--cached", "--json")
    assert cached.returncode == 0 and json.loads(cached.stdout)["tenant"] == tenant_of(user)

    # The forget takes the held-out turns, the reports and the report's workflow with everything else.
    time.sleep(3)  # let the report started above finish writing (the forget sweeps twice anyway)
    gone = httpx.delete(f"{stack.api}/v1/me/data", headers={"Authorization": f"Bearer {key}"}, timeout=300)
    assert gone.status_code == 200, gone.text
    r = redis.Redis.from_url(stack.redis)
    tenant = tenant_of(user)
    assert not r.exists(keys.user_held_out(tenant)) and not r.exists(keys.user_progress(tenant))
    assert not store_hits(stack, [f"topic {n}"]), "a held-out turn's words are still in the store"
    assert not workflow_exists(stack, f"progress/{tenant}")
