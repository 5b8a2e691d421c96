from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import redis
from fastapi import Request

from bench.threaded_server import ThreadedServer
from tests.api.conftest import chat_stack_env, create_key  # noqa: F401  (re-exported for the tests)
from tests.helpers import RunningStack, free_port


class ScriptedJudge:
    """An OpenAI-compatible judge server speaking the real wire format, with scripted answers.

    Stands in for a GPU LLM. `answers` cycles per request; a next state containing
    a key of `delays` makes the answer wait that many seconds first. `decide`: an answer from the request's
    messages instead, where it returns one (None: the cycle's).
    """

    def __init__(
        self,
        answers: list[str],
        delays: dict[str, float] | None = None,
        decide: Callable[[list[dict]], str | None] | None = None,
    ):
        from fastapi import FastAPI

        self.answers, self.delays, self.decide = answers, delays or {}, decide
        self.requests: list[dict] = []
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> dict:
            body = await request.json()
            self.requests.append(body)
            user = body["messages"][-1]["content"]
            for marker, delay in self.delays.items():
                if marker in user:
                    await asyncio.sleep(delay)
            decided = self.decide(body["messages"]) if self.decide is not None else None
            text = decided if decided is not None else self.answers[(len(self.requests) - 1) % len(self.answers)]
            return {
                "id": f"cmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "judge"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
            }

        self.port = free_port()
        self.http = ThreadedServer(app, self.port)

    @property
    def url(self) -> str:
        return self.http.url

    def __enter__(self) -> "ScriptedJudge":
        self.http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.stop()


def flat(text: str) -> str:
    return " ".join(text.split())


def pairwise_judge(pick: Callable[[str, str, str], str]) -> Callable[[list[dict]], str]:
    """A ScriptedJudge `decide` for the pairwise prompt (judges.prompts): `pick(a, b, conversation)` says `A`, `B`
    or `tie`; PRM votes say helpful (+1), hint votes say no hint."""

    def decide(messages: list[dict]) -> str:
        system, user = messages[0]["content"], messages[-1]["content"]
        if "compare two responses" in system:
            a, b = user.split("## Response A\n", 1)[1].split("\n\n## Response B\n", 1)
            return f"\\boxed{{{pick(a, b, user)}}}"
        if "(PRM) evaluating" in system:
            return "Helpful. \\boxed{1}"
        return "No hindsight. \\boxed{-1}"  # hint votes

    return decide


def chat(stack: RunningStack, key: str, sid: str, messages: list[dict], max_tokens: int = 8) -> dict:
    r = httpx.post(
        f"{stack.api}/v1/chat/completions",
        json={"messages": messages, "max_tokens": max_tokens},
        headers={"Authorization": f"Bearer {key}", "X-Session-Id": sid},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]


def wait_judged(stack: RunningStack, key: str, sid: str, indices: list[int], timeout: float = 90.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        log = httpx.get(
            f"{stack.api}/v1/sessions/{sid}/turns", headers={"Authorization": f"Bearer {key}"}, timeout=30
        ).json()
        turns = {t["index"]: t for t in log["turns"]}
        if all(turns.get(i, {}).get("judgement") for i in indices):
            return [turns[i] for i in sorted(turns)]
        if time.monotonic() > deadline:
            raise AssertionError(f"turns {indices} not judged within {timeout}s: {log}")
        time.sleep(0.3)


def samples_of(stack: RunningStack, session_key: str) -> list:
    from store.samples import decode_sample

    r = redis.Redis.from_url(stack.redis)
    out = [decode_sample(fields) for _, fields in r.xrange("oc:samples:personal")]
    # Sample ids are `<session workflow id>@<first run id>#<turn>`: a reused session id starts a new run chain.
    return [s for s in out if s.sample_id.split("#")[0].split("@")[0] == session_key]


@pytest.fixture(scope="module")
def heuristic_stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    env = chat_stack_env(tmp_path_factory.mktemp("learn") / "data", tiny_model, OPENCLAW_RL_SESSION__IDLE_TIMEOUT_S="8")
    stack = RunningStack(env).start()
    yield stack
    stack.stop()
