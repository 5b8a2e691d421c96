"""A binary judge's votes and its sample in one activity (`judge_and_publish`), against a real valkey and a judge
server speaking the real wire format: the votes make the record's summary, and the sample is published once however
often the activity is tried."""

from __future__ import annotations

import dataclasses

import pytest
import redis
from temporalio.testing import ActivityEnvironment

from activities.learning import LearningActivities
from contracts.chat import StoredChatRequest
from contracts.learning import JudgeAndPublishInput, JudgeSummary, Method, NextState, PublishInput, VotesInput
from openclaw_rl.settings import LlmJudgeSettings, Settings
from store import keys
from store.turns import TurnTokens
from tests.helpers import store_at
from tests.learning.conftest import ScriptedJudge
from tests.training.test_train_step_activity import valkey  # noqa: F401 (fixture)

ASKED = [{"role": "user", "content": "How do I list hidden files?"}]
REPLIED = [*ASKED, {"role": "assistant", "content": "ls -a"}, {"role": "user", "content": "that worked, thanks"}]


def _work(turn: str, session: str = "session/u/s") -> JudgeAndPublishInput:
    ns = NextState(role="user", request_key=keys.chat_request(f"{turn}-next"), message_index=2)
    return JudgeAndPublishInput(
        votes=VotesInput(turn_id=turn, next_state=ns, prm=3, vote_timeout_s=10, attempts=2),
        sample=PublishInput(
            sample_id=f"{session}#0",
            session_key=session,
            source="personal",
            method=Method.BINARY,
            user_id="u",
            session_id="s",
            turn_id=turn,
            turn_index=0,
            policy_version="0",
            has_next_state=True,
            judge=JudgeSummary(judge="scripted"),
        ),
    )


async def _turn(port: int, turn: str) -> None:
    store = store_at(port)
    await store.turns.save(
        TurnTokens(
            turn_id=turn, prompt_ids=[1, 2], response_ids=[3, 4], response_logprobs=[-1.0, -1.0],
            weight_version="0", finish_reason="stop", response_text="ls -a",
        )
    )  # fmt: skip
    await store.requests.save(turn, StoredChatRequest(messages=ASKED))
    await store.requests.save(f"{turn}-next", StoredChatRequest(messages=REPLIED))
    await store.aclose()


async def test_the_votes_make_the_summary_and_the_sample_is_published_once(tmp_path, valkey):  # noqa: F811
    with ScriptedJudge(["\\boxed{1}", "\\boxed{1}", "no box at all"]) as judge:
        settings = Settings(
            data_dir=tmp_path / "data",
            redis={"port": valkey},
            learning={"judge": LlmJudgeSettings(url=judge.url)},
        )
        acts = LearningActivities(settings)
        env = ActivityEnvironment()
        await _turn(valkey, "t0")
        done = await env.run(acts.judge_and_publish, _work("t0"))
        assert sorted(done.judge.prm_votes, key=str) == sorted([1, 1, None], key=str)
        assert (done.judge.eval_score, done.judge.judge, done.judge.failed_votes) == (1, "scripted", 0)
        assert "boxed{1}" in (done.judge.representative or "")
        assert done.result.published and done.result.reward == 1.0
        assert len(judge.requests) == 3 and "that worked, thanks" in str(judge.requests[0]["messages"])

        # A try after a lost answer finds the sample published: it asks the judge nothing and publishes nothing.
        retried = ActivityEnvironment()
        retried.info = dataclasses.replace(retried.info, attempt=2)
        again = await retried.run(acts.judge_and_publish, _work("t0"))
        assert len(judge.requests) == 3
        assert again.result.duplicate and not again.result.published
        store = store_at(valkey)
        assert await store.samples.length("personal") == 1
        await store.aclose()
        await acts.aclose()


async def test_an_accepted_hint_is_returned_unpublished_for_its_teacher_pass(tmp_path, valkey):  # noqa: F811
    hinted = "\\boxed{1} [HINT_START]Show the hidden files with ls -a, and say what -a does.[HINT_END]"
    with ScriptedJudge([hinted]) as judge:
        settings = Settings(
            data_dir=tmp_path / "data", redis={"port": valkey}, learning={"judge": LlmJudgeSettings(url=judge.url)}
        )
        acts = LearningActivities(settings)
        await _turn(valkey, "t1")
        work = _work("t1")
        work = work.model_copy(
            update={
                "votes": work.votes.model_copy(update={"prm": 1, "hints": 1}),
                "sample": work.sample.model_copy(update={"method": Method.COMBINED}),
            }
        )
        done = await ActivityEnvironment().run(acts.judge_and_publish, work)
        assert done.result is None and done.judge.hint and "ls -a" in done.judge.hint
        assert (done.judge.prm_votes, done.judge.hint_votes, len(judge.requests)) == ([1], 1, 2)
        store = store_at(valkey)
        assert await store.samples.length("personal") == 0  # published after the teacher pass, by publish_sample
        await store.aclose()
        await acts.aclose()


async def test_a_next_state_gone_from_the_store_is_no_votes_and_the_turn_is_still_recorded(tmp_path, valkey):  # noqa: F811
    """As when `judge_votes` failed for good: no vote, and the publish decides (judged 0), the judge never asked."""
    with ScriptedJudge(["\\boxed{1}"]) as judge:
        settings = Settings(
            data_dir=tmp_path / "data", redis={"port": valkey}, learning={"judge": LlmJudgeSettings(url=judge.url)}
        )
        acts = LearningActivities(settings)
        await _turn(valkey, "t2")
        redis.Redis(port=valkey).delete(keys.chat_request("t2-next"))  # expired
        done = await ActivityEnvironment().run(acts.judge_and_publish, _work("t2", session="session/u/gone"))
        assert (done.judge.prm_votes, done.judge.failed_votes, done.judge.eval_score) == ([None] * 3, 3, 0)
        assert judge.requests == [] and done.result is not None and done.result.reason
        await acts.aclose()


async def test_votes_that_fail_on_every_try_publish_the_sample_judged_on_none(tmp_path, valkey):  # noqa: F811
    """A vote phase that fails for a reason no retry mends (here the turn's stored request is unreadable) gets the
    tries judge_votes had; then the sample is published with no votes instead of being retried forever."""
    with ScriptedJudge(["\\boxed{1}"]) as judge:
        settings = Settings(
            data_dir=tmp_path / "data", redis={"port": valkey}, learning={"judge": LlmJudgeSettings(url=judge.url)}
        )
        acts = LearningActivities(settings)
        await _turn(valkey, "t3")
        redis.Redis(port=valkey).set(keys.chat_request("t3"), b"not a stored request")
        work = _work("t3", session="session/u/unreadable")
        env = ActivityEnvironment()
        with pytest.raises(Exception) as first:
            await env.run(acts.judge_and_publish, work)
        assert "ApplicationError" not in type(first.value).__name__  # retried by Temporal, not failed for good
        last = ActivityEnvironment()
        last.info = dataclasses.replace(last.info, attempt=3)
        done = await last.run(acts.judge_and_publish, work)
        assert (done.judge.prm_votes, done.judge.failed_votes) == ([None] * 3, 3)
        assert done.result is not None and not done.result.duplicate and judge.requests == []
        await acts.aclose()
