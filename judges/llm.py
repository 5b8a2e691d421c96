"""The paper's judge: an LLM behind an OpenAI-compatible or SGLang-native endpoint."""

from __future__ import annotations

import asyncio

import httpx

from judges.base import JudgeCallError, JudgeContext, PairwiseContext, StepJudgeContext
from judges.prompts import HINT_SYSTEM, PRM_SYSTEM, messages, pairwise_messages, step_messages
from openclaw_rl.settings import LlmJudgeSettings, Settings
from policy_client import PolicyClient
from policy_client.chat import renderer_for
from policy_client.wire import SamplingParams


class LlmJudge:
    name = "llm"

    def __init__(self, cfg: LlmJudgeSettings, settings: Settings):
        self.cfg = cfg
        # No judge server of its own: the policy's traffic URLs (its router when there is one).
        self.urls = [cfg.url.rstrip("/")] if cfg.url else settings.traffic_urls()
        # The embedded engine speaks only SGLang's native API.
        self.api = "native" if (cfg.url is None and settings.embedded_engine) else cfg.api
        headers = (
            {"Authorization": f"Bearer {cfg.api_key.get_secret_value()}"} if cfg.api_key.get_secret_value() else {}
        )
        self.http = httpx.AsyncClient(timeout=cfg.timeout_s, headers=headers)
        self.native = (
            PolicyClient(
                self.urls,
                request_timeout_s=cfg.timeout_s,
                max_attempts=1,
                api_key=(cfg.api_key if cfg.url else settings.policy_api_key()).get_secret_value(),
            )
            if self.api == "native"
            else None
        )
        self.tokenizer_path = str(cfg.tokenizer_path or settings.tokenizer_path())
        # The judge endpoint's own budget per worker process, apart from the policy's and the teacher's.
        self.slots = asyncio.Semaphore(cfg.max_concurrency)

    async def prm(self, ctx: JudgeContext) -> str:
        return await self._complete(messages(PRM_SYSTEM, ctx), self.cfg.prm_max_tokens)

    async def hint(self, ctx: JudgeContext) -> str:
        return await self._complete(messages(HINT_SYSTEM, ctx), self.cfg.hint_max_tokens)

    async def step(self, ctx: StepJudgeContext) -> str:
        # Images only where they can go: an OpenAI-compatible endpoint said to accept them (native renders text).
        images = self.cfg.vision and self.native is None
        return await self._complete(step_messages(ctx, images=images), self.cfg.prm_max_tokens)

    async def pairwise(self, ctx: PairwiseContext) -> str:
        return await self._complete(pairwise_messages(ctx), self.cfg.prm_max_tokens)

    async def _complete(self, msgs: list[dict], max_tokens: int) -> str:
        async with self.slots:
            return await self._complete_now(msgs, max_tokens)

    async def _complete_now(self, msgs: list[dict], max_tokens: int) -> str:
        if self.native is not None:
            ids = renderer_for(self.tokenizer_path).render(msgs)
            gen = await self.native.generate(
                ids, SamplingParams(temperature=self.cfg.temperature, max_new_tokens=max_tokens), return_logprob=False
            )
            return gen.text
        body = {
            "model": self.cfg.model,
            "messages": msgs,
            "temperature": self.cfg.temperature,
            "max_tokens": max_tokens,
            "stream": False,
        }
        try:
            resp = await self.http.post(f"{self.urls[0]}/v1/chat/completions", json=body)
        except httpx.HTTPError as exc:
            raise JudgeCallError(f"judge endpoint unreachable: {exc}") from exc
        if resp.status_code >= 400:
            raise JudgeCallError(f"judge endpoint answered {resp.status_code}: {resp.text[:300]}")
        try:
            return resp.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise JudgeCallError(f"judge answer is not a chat completion: {resp.text[:300]}") from exc

    async def aclose(self) -> None:
        await self.http.aclose()
        if self.native is not None:
            await self.native.aclose()
