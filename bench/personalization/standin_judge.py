"""A stand-in for the LLM judge of the canary benchmark: an OpenAI-compatible server on the real wire format.

A GPU LLM cannot run here. This judge reads the prompts the stack sends (judges.prompts) and answers as a careful
LLM judge reading them would, in the paper's answer format:
- a PRM vote or a hint vote: the next state read by the heuristic judge's rules (a thanks, a correction and its
  directives);
- a pairwise comparison (a canary round, a progress report): the user's taste as their USER.md states it in the
  conversation's system prompt, and both responses scored by that taste with the benchmark's rule scorer; the
  higher score wins, equal scores tie. It never learns which version wrote which response.
So the judge is as good as the scorer that also measures the versions, but it sees only what an LLM judge sees.
"""

from __future__ import annotations

import asyncio
import re
import time

from fastapi import FastAPI, Request

from bench.personalization.users import USER_MD
from bench.threaded_server import ThreadedServer
from evals.personalization.scorer import RuleScorer
from judges.base import JudgeContext
from judges.heuristic import HeuristicJudge
from judges.prompts import HINT_SYSTEM, PAIRWISE_SYSTEM, PRM_SYSTEM
from openclaw_rl.ports import free_port

_NEXT_STATE = re.compile(r"\n\n## Next state \((user reply|tool result)\)\n")
_RESPONSES = re.compile(r"\n\n## Response A\n(.*)\n\n## Response B\n(.*)\Z", re.S)


def taste_of(conversation: str) -> str | None:
    """Whose USER.md the conversation's system prompt carries (None: it states no taste the judge knows)."""
    return next((taste for taste, text in USER_MD.items() if text in conversation), None)


class StandinJudge:
    def __init__(self) -> None:
        self.heuristic = HeuristicJudge()
        self.scorer = RuleScorer()
        self.counts = {"prm": 0, "hint": 0, "pairwise": 0, "pairwise_no_taste": 0}
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> dict:
            body = await request.json()
            text = await self.answer(body["messages"])
            return {
                "id": f"cmpl-{sum(self.counts.values())}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "judge"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }

        self.http = ThreadedServer(app, free_port())

    @property
    def url(self) -> str:
        return self.http.url

    async def answer(self, messages: list[dict]) -> str:
        system, user = messages[0]["content"], messages[-1]["content"]
        if system == PAIRWISE_SYSTEM:
            return self.pairwise(user)
        if system in (PRM_SYSTEM, HINT_SYSTEM):
            ctx = _judge_context(user)
            if system == PRM_SYSTEM:
                self.counts["prm"] += 1
                return await self.heuristic.prm(ctx)
            self.counts["hint"] += 1
            return await self.heuristic.hint(ctx)
        await asyncio.sleep(0)
        return "I cannot judge this. \\boxed{0}"

    def pairwise(self, prompt: str) -> str:
        self.counts["pairwise"] += 1
        found = _RESPONSES.search(prompt)
        taste = taste_of(prompt.split("\n\n## Response A\n", 1)[0])
        if found is None or taste is None:
            self.counts["pairwise_no_taste"] += taste is None
            return "The conversation does not say what this user wants. \\boxed{tie}"
        a, b = (self.scorer.score(taste, None, text).value for text in found.groups())  # type: ignore[arg-type]
        pick = "A" if a > b else "B" if b > a else "tie"
        return f"By the user's USER.md ({taste}): A scores {a:.2f}, B {b:.2f}. \\boxed{{{pick}}}"

    def __enter__(self) -> StandinJudge:
        self.http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.stop()


def _judge_context(prompt: str) -> JudgeContext:
    """The turn a PRM or hint prompt shows (judges.prompts.judge_user_message), read back."""
    head, _, rest = prompt.partition("## Assistant output (turn t)\n")
    parts = _NEXT_STATE.split(rest, maxsplit=1)
    if len(parts) != 3:
        return JudgeContext(response=rest, next_state_role="user", next_state="")
    response, label, next_state = parts
    return JudgeContext(response=response, next_state_role="tool" if label == "tool result" else "user",
                        next_state=next_state)  # fmt: skip
