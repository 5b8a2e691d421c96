"""The `generate` activity (policy pool): one chat turn's completion from the policy.

The prompt is rendered and tokenized here, once; the response's token ids and
rollout log-probs are exactly what the policy server produced. Tokens are
published to a Redis stream as they come, which serves two readers: the API
relays them to a streaming client, and a retried attempt (the worker died
mid-generation) resumes from them, so the client never sees a token taken back.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Literal

import redis.asyncio as aioredis
import structlog
from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from openclaw_rl import redis_keys
from openclaw_rl.settings import Settings
from openclaw_rl.turn_data import TurnTokens, save_turn_tokens
from policy_client import PolicyClient
from policy_client.chat import renderer_for
from policy_client.chat_output import ToolCall, parse_completion
from policy_client.client import PolicyRequestError, PolicyUnavailableError
from policy_client.wire import SamplingParams

log = structlog.get_logger(__name__)

STREAM_TTL_S = 24 * 3600
"""Token streams are only a relay and a resume checkpoint; the turn's data outlives them."""


class ErrorType:
    """ApplicationError types the API maps to HTTP statuses (never matched on message text)."""

    PROMPT_TOO_LONG = "PromptTooLong"
    INVALID_REQUEST = "InvalidRequest"
    POLICY_UNAVAILABLE = "PolicyUnavailable"
    REQUEST_MISSING = "RequestMissing"


class ChatSampling(BaseModel):
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = None
    """None: session.default_max_tokens, capped by the context left."""
    stop: list[str] = Field(default_factory=list)


class StoredChatRequest(BaseModel):
    """What the client sent that the prompt is rendered from (kept in Redis, by turn id)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None


class GenerateInput(BaseModel):
    turn_id: str
    sampling: ChatSampling
    stream: bool = True
    """Publish tokens as they come (the client streams). False: one plain generation, published whole at the end;
    a retry then starts over, which no client can notice since it saw nothing yet."""


class GenerateOutput(BaseModel):
    content: str
    reasoning: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: Literal["stop", "length", "tool_calls"]
    prompt_tokens: int
    completion_tokens: int
    weight_version: str | None = None
    attempt: int = 1
    resumed_at: int = 0
    """Tokens kept from earlier attempts that died mid-generation."""


# Publish only while this attempt owns the stream: a stale attempt that lost its
# lease (heartbeat timeout) but is still running must not interleave tokens.
_PUBLISH = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('XADD', KEYS[1], '*', 'a', ARGV[1], 'ids', ARGV[2], 'lps', ARGV[3], 'text', ARGV[4], 'done', ARGV[5])
return 1
"""


class _Checkpoint(BaseModel):
    ids: list[int] = Field(default_factory=list)
    lps: list[float] = Field(default_factory=list)
    text: str = ""
    finish: str | None = None
    """Set when an earlier attempt published the whole answer and died before returning it."""


class GenerateActivities:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.redis = aioredis.from_url(settings.redis.target())
        self.policy = PolicyClient.from_settings(settings)
        self._publish = self.redis.register_script(_PUBLISH)
        self._context_limit: int | None = None
        renderer_for(str(settings.tokenizer_path()))  # load the tokenizer now, not on the first turn

    @activity.defn(name="generate")
    async def generate(self, inp: GenerateInput) -> GenerateOutput:
        attempt = activity.info().attempt
        raw = await self.redis.get(redis_keys.chat_request(inp.turn_id))
        if raw is None:
            raise ApplicationError(f"chat request of turn {inp.turn_id} is not in Redis", type=ErrorType.REQUEST_MISSING, non_retryable=True)
        req = StoredChatRequest.model_validate_json(raw)
        renderer = renderer_for(str(self.settings.tokenizer_path()))
        try:
            prompt_ids = await asyncio.to_thread(renderer.render, req.messages, req.tools)
        except Exception as exc:  # a template error is the request's fault: retrying cannot help
            raise ApplicationError(f"the messages cannot be rendered with the model's chat template: {exc}", type=ErrorType.INVALID_REQUEST, non_retryable=True) from exc

        stream_key, owner_key = redis_keys.token_stream(inp.turn_id), redis_keys.stream_owner(inp.turn_id)
        done = _Checkpoint()
        if inp.stream:  # a non-streaming client reads no stream, and a retry of it may start over
            await self.redis.set(owner_key, str(attempt), ex=STREAM_TTL_S)
            done = await self._checkpoint(stream_key)
        budget = 0 if done.finish else await self._budget(inp.sampling, len(prompt_ids) + len(done.ids))
        params = SamplingParams(
            temperature=inp.sampling.temperature,
            top_p=inp.sampling.top_p,
            max_new_tokens=budget,
            stop=inp.sampling.stop or None,
            stop_token_ids=_stop_ids(renderer.tokenizer),
        )
        new_ids: list[int] = []
        new_lps: list[float] = []
        published = len(done.ids)
        finish = done.finish or "length"
        weight_version = None
        last_flush = time.monotonic()
        flush_s = self.settings.session.stream_flush_ms / 1000
        sent_text = done.text
        beat = asyncio.ensure_future(_heartbeat_every(self.settings.session.generate_heartbeat_s / 3))
        try:
            if budget > 0 and not inp.stream:
                gen = await self.policy.generate(prompt_ids + done.ids, params)
                new_ids, new_lps, weight_version = gen.output_ids, gen.output_logprobs, gen.weight_version
                finish = "length" if gen.finish_reason is None or gen.finish_reason.type == "length" else "stop"
            elif budget > 0:
                async for snap in self.policy.generate_stream(prompt_ids + done.ids, params):
                    new_ids, new_lps = snap.output_ids, snap.output_logprobs
                    weight_version = snap.weight_version or weight_version
                    if snap.finish_reason is not None:
                        finish = "length" if snap.finish_reason.type == "length" else "stop"
                    if time.monotonic() - last_flush >= flush_s and len(done.ids) + len(new_ids) > published:
                        sent_text = await self._publish_upto(inp.turn_id, attempt, renderer, done, new_ids, new_lps, published, sent_text, final=None)
                        published = len(done.ids) + len(new_ids)
                        last_flush = time.monotonic()
        except PolicyRequestError as exc:
            raise ApplicationError(f"the policy server refused the request: {exc.reason}", type=ErrorType.INVALID_REQUEST, non_retryable=True) from exc
        except PolicyUnavailableError as exc:
            raise ApplicationError(str(exc), type=ErrorType.POLICY_UNAVAILABLE) from exc
        finally:
            beat.cancel()

        ids, lps = done.ids + new_ids, done.lps + new_lps
        if inp.stream and not done.finish:
            await self._publish_upto(inp.turn_id, attempt, renderer, done, new_ids, new_lps, published, sent_text, final=finish)
        text = renderer.decode(ids, skip_special_tokens=True)
        await save_turn_tokens(
            self.redis,
            TurnTokens(
                turn_id=inp.turn_id, prompt_ids=prompt_ids, response_ids=ids, response_logprobs=lps, weight_version=weight_version,
                finish_reason=finish, resumed_at=len(done.ids), response_text=text, temperature=inp.sampling.temperature,
            ),
        )
        if inp.stream:
            await self.redis.expire(stream_key, STREAM_TTL_S)
        parsed = parse_completion(text, call_id_prefix=inp.turn_id[:12])
        if parsed.tool_calls and finish == "stop":
            finish = "tool_calls"
        if done.ids:
            log.info("generation resumed after a failed attempt", turn_id=inp.turn_id, attempt=attempt, kept_tokens=len(done.ids))
        return GenerateOutput(
            content=parsed.content,
            reasoning=parsed.reasoning,
            tool_calls=parsed.tool_calls,
            finish_reason=finish,
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(ids),
            weight_version=weight_version,
            attempt=attempt,
            resumed_at=len(done.ids),
        )

    async def _publish_upto(self, turn_id: str, attempt: int, renderer: Any, done: _Checkpoint, new_ids: list[int], new_lps: list[float], published: int, sent_text: str, *, final: str | None) -> str:
        """Publish the tokens after `published`; `final` is the finish reason on the last chunk."""
        ids = done.ids + new_ids
        text = renderer.decode(ids, skip_special_tokens=True)
        if not final:
            text = text.rstrip("\ufffd")  # a multi-byte character still incomplete
        delta = text[len(sent_text):] if text.startswith(sent_text) else ""
        chunk_ids = ids[published:]
        chunk_lps = (done.lps + new_lps)[published:]
        if not (chunk_ids or delta or final):
            return sent_text
        ok = await self._publish(
            keys=[redis_keys.token_stream(turn_id), redis_keys.stream_owner(turn_id)],
            args=[str(attempt), json.dumps(chunk_ids), json.dumps(chunk_lps), delta, final or "0"],
        )
        if not ok:
            raise ApplicationError(f"attempt {attempt} of turn {turn_id} lost its stream to a newer attempt")
        return sent_text + delta

    async def _checkpoint(self, stream_key: str) -> _Checkpoint:
        """Tokens published by earlier attempts; a finished stream is never resumed twice."""
        cp = _Checkpoint()
        for _, fields in await self.redis.xrange(stream_key):
            cp.ids += json.loads(fields[b"ids"])
            cp.lps += json.loads(fields[b"lps"])
            cp.text += fields[b"text"].decode()
            if fields[b"done"] != b"0":
                cp.finish = fields[b"done"].decode()
        return cp

    async def _budget(self, sampling: ChatSampling, used: int) -> int:
        limit = await self._context()
        if used >= limit:
            raise ApplicationError(
                f"the prompt is {used} tokens; the model's context is {limit} tokens. Shorten the history or start a new session.",
                type=ErrorType.PROMPT_TOO_LONG,
                non_retryable=True,
            )
        wanted = sampling.max_tokens or self.settings.session.default_max_tokens
        return max(0, min(wanted, limit - used))

    async def _context(self) -> int:
        if self._context_limit is None:
            self._context_limit = self.settings.context_length()
        return self._context_limit


async def _heartbeat_every(interval_s: float) -> None:
    """Tell Temporal this attempt is alive; a killed worker stops, and the turn is retried elsewhere."""
    while True:
        activity.heartbeat()
        await asyncio.sleep(interval_s)


def _stop_ids(tokenizer: Any) -> list[int]:
    """End-of-turn tokens of the chat template, whatever the server's generation config says."""
    ids = []
    for tok in ("<|im_end|>", "<|endoftext|>"):
        tid = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id:
            ids.append(tid)
    return ids

