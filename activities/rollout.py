"""The rollout core: render a conversation, generate from the policy token-in/token-out, keep the tokens.

Chat turns use it through `generate`; agent episodes will use the same core, so
every sample's prompt ids, response ids and rollout log-probs are exactly what
the policy server produced, rendered once on our side.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field
from temporalio.exceptions import ApplicationError

from contracts.chat import ChatSampling
from contracts.errors import ErrorType
from openclaw_rl.settings import Settings
from policy_client import PolicyClient
from policy_client.chat import ChatRenderer, renderer_for
from policy_client.client import PolicyRequestError, PolicyUnavailableError
from policy_client.wire import SamplingParams
from store.adapters import AdapterRef
from store.client import Store
from store.turns import TurnTokens

OnTokens = Callable[[list[int], list[float]], Awaitable[None]]
"""Called with all tokens generated so far (ids, log-probs) each time the server streams more."""


class RolloutResult(BaseModel):
    ids: list[int] = Field(default_factory=list)
    logprobs: list[float] = Field(default_factory=list)
    finish: str = "length"
    """`stop` or `length`."""
    stop_sequence: str | None = None
    """The caller's stop string that ended generation (a Messages client is told which)."""
    weight_version: str | None = None


class Rollout:
    def __init__(self, settings: Settings, store: Store, policy: PolicyClient):
        self.settings = settings
        self.store = store
        self.policy = policy
        self.renderer: ChatRenderer = renderer_for(str(settings.tokenizer_path()))  # loaded now, not on the first turn
        self._context_limit: int | None = None

    async def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        try:
            return await asyncio.to_thread(self.renderer.render, messages, tools)
        except Exception as exc:  # a template error is the request's fault: retrying cannot help
            raise ApplicationError(
                f"the messages cannot be rendered with the model's chat template: {exc}",
                type=ErrorType.INVALID_REQUEST,
                non_retryable=True,
            ) from exc

    async def params(self, sampling: ChatSampling, used: int) -> SamplingParams:
        """Sampling parameters with the token budget the context leaves after `used` tokens."""
        return SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_new_tokens=await self._budget(sampling.max_tokens, used),
            stop=sampling.stop or None,
            stop_token_ids=_stop_ids(self.renderer.tokenizer),
        )

    async def generate(
        self,
        input_ids: list[int],
        params: SamplingParams,
        on_tokens: OnTokens | None = None,
        *,
        tenant: str | None = None,
        adapter: AdapterRef | None = None,
    ) -> RolloutResult:
        """One generation; streamed from the server when `on_tokens` wants tokens as they come.

        `tenant`: whose request it is, so the embedded engine shares its slots fairly between users (None: the
        shared system bucket). `adapter`: the user's own LoRA adapter (`training.adapters = per_user`); a server
        that lost it (restarted) loads it again from its folder, once, before the request is sent again."""
        if params.max_new_tokens <= 0:
            return RolloutResult()
        try:
            return await self._generate(input_ids, params, on_tokens, tenant, adapter)
        except PolicyRequestError as exc:
            if adapter is None or "is not loaded" not in exc.reason:  # refused before any token: safe to send again
                raise self._refused(exc) from exc
            from policy_client.weight_sync import WeightSyncClient

            async with WeightSyncClient.from_settings(self.settings) as client:
                await client.load_lora_adapter(adapter.name, adapter.path)
            try:
                return await self._generate(input_ids, params, on_tokens, tenant, adapter)
            except PolicyRequestError as again:
                raise self._refused(again) from again
            except PolicyUnavailableError as again:
                raise ApplicationError(str(again), type=ErrorType.POLICY_UNAVAILABLE) from again
        except PolicyUnavailableError as exc:
            raise ApplicationError(str(exc), type=ErrorType.POLICY_UNAVAILABLE) from exc

    @staticmethod
    def _refused(exc: PolicyRequestError) -> ApplicationError:
        return ApplicationError(
            f"the policy server refused the request: {exc.reason}", type=ErrorType.INVALID_REQUEST, non_retryable=True
        )

    async def _generate(
        self,
        input_ids: list[int],
        params: SamplingParams,
        on_tokens: OnTokens | None,
        tenant: str | None,
        adapter: AdapterRef | None,
    ) -> RolloutResult:
        lora = adapter.name if adapter is not None else None
        if on_tokens is None:
            gen = await self.policy.generate(input_ids, params, tenant=tenant, lora_path=lora)
            return RolloutResult(
                ids=gen.output_ids,
                logprobs=gen.output_logprobs,
                finish=_finish(gen.finish_reason),
                stop_sequence=_matched(gen.finish_reason),
                weight_version=str(adapter.version) if adapter is not None else gen.weight_version,
            )
        out = RolloutResult()
        async for snap in self.policy.generate_stream(input_ids, params, tenant=tenant, lora_path=lora):
            out.ids, out.logprobs = snap.output_ids, snap.output_logprobs
            out.weight_version = (
                str(adapter.version) if adapter is not None else snap.weight_version or out.weight_version
            )
            if snap.finish_reason is not None:
                out.finish = _finish(snap.finish_reason)
                out.stop_sequence = _matched(snap.finish_reason)
            await on_tokens(out.ids, out.logprobs)
        return out

    def decode(self, ids: list[int]) -> str:
        return self.renderer.decode(ids, skip_special_tokens=True)

    async def keep(self, tokens: TurnTokens) -> None:
        """Keep the token-level data under the turn's key: the judges, the teacher and the sample read it there."""
        await self.store.turns.save(tokens)

    async def _budget(self, max_tokens: int | None, used: int) -> int:
        if self._context_limit is None:
            self._context_limit = self.settings.context_length()
        limit = self._context_limit
        if used >= limit:
            raise ApplicationError(
                f"the prompt is {used} tokens; the model's context is {limit} tokens. "
                "Shorten the history or start a new session.",
                type=ErrorType.PROMPT_TOO_LONG,
                non_retryable=True,
            )
        wanted = max_tokens or self.settings.session.default_max_tokens
        if self.settings.embedded_engine:  # the engine refuses more than its cap: ask for at most that
            wanted = min(wanted, self.settings.engine.max_new_tokens_cap)
        return max(0, min(wanted, limit - used))


def _finish(reason: Any) -> str:
    return "length" if reason is None or reason.type == "length" else "stop"


def _matched(reason: Any) -> str | None:
    matched = getattr(reason, "matched", None)
    return matched if reason is not None and reason.type == "stop" and isinstance(matched, str) else None


def _stop_ids(tokenizer: Any) -> list[int]:
    """End-of-turn tokens of the chat template, whatever the server's generation config says."""
    ids = []
    for tok in ("<|im_end|>", "<|endoftext|>"):
        tid = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id:
            ids.append(tid)
    return ids
