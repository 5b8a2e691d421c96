"""A stand-in for a remote GPU policy server: SGLang's native wire format, a fixed time per generated token.

For the scale benchmarks (`openclaw-rl bench scale`, `bench hosts --scale`): the 2 cores then measure the
orchestration (API, Temporal, workers, store), not a model. Requests overlap (asyncio sleeps), as a batched GPU
serves them at once, up to `max_running` at a time (SGLang's `--max-running-requests`: a GPU's batch is finite, so
a second server adds capacity); the rest wait their turn in arrival order.

Its prefix cache stands in for SGLang's radix cache: a request's `cached_tokens` is how much of its prompt, in whole
blocks, an earlier request on this server already began with. `/metrics` counts prompt and cached tokens under
SGLang's Prometheus names, so a router's session affinity shows as cache hits per server.

What it says: in a terminal episode (the prompt offers the `submit` tool) a `bash` call running `command` (`true`),
then `submit` once a tool result is in the prompt, so an episode ends in two steps; otherwise a short plain answer.

    python -m bench.standin_engine --port 30000 --ms-per-token 20 --tokenizer PATH [--max-running 4]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from collections import OrderedDict
from pathlib import Path

import structlog
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict
from tokenizers import Tokenizer

from bench.threaded_server import ThreadedServer

log = structlog.get_logger(__name__)

CHAT_ANSWER = "Sure. Here is a short answer."
END_TOKEN = "<|im_end|>"
CACHE_BLOCK = 16
"""Tokens per cached block (SGLang's radix cache shares at token granularity; blocks keep this one cheap)."""


class StandinConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokenizer_path: Path
    """A folder with tokenizer.json (the tiny model's: `engine.tiny_qwen3.ensure_tiny_model`)."""
    ms_per_token: float = 20.0
    """Generation time per output token, as a GPU decoding one sequence of a batch would take."""
    max_running: int | None = None
    """Requests generating at once (None: no limit); later ones queue, first come first served."""
    command: str = "true"
    """The command its terminal episodes run (`sleep 1`: an env step that takes time, not CPU)."""
    cache_blocks: int = 100_000
    """Prefix-cache blocks kept (least recently used go first)."""


class PrefixCache:
    """Which prompt prefixes this server has seen, by block: the stand-in's radix cache."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.blocks: OrderedDict[bytes, None] = OrderedDict()

    def lookup_and_insert(self, ids: list[int]) -> int:
        """Tokens of `ids` already cached (whole blocks from the start); the prompt's blocks are cached after."""
        h = hashlib.blake2b(digest_size=16)
        cached, hit = 0, True
        for start in range(0, len(ids) - len(ids) % CACHE_BLOCK, CACHE_BLOCK):
            h.update(json.dumps(ids[start : start + CACHE_BLOCK]).encode())
            key = h.copy().digest()
            if hit and key in self.blocks:
                cached += CACHE_BLOCK
                self.blocks.move_to_end(key)
                continue
            hit = False
            self.blocks[key] = None
            if len(self.blocks) > self.capacity:
                self.blocks.popitem(last=False)
        return cached


def tool_call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def answer_for(prompt: str, command: str = "true") -> str:
    """What the stand-in says to `prompt` (chat: plain text; a terminal episode: `command`, then submit)."""
    if '"submit"' not in prompt:
        return CHAT_ANSWER
    if "<tool_response>" in prompt:
        return tool_call("submit")
    return tool_call("bash", command=command)


class StandinEngine:
    def __init__(self, config: StandinConfig):
        self.config = config
        self.tokenizer = Tokenizer.from_file(str(config.tokenizer_path / "tokenizer.json"))
        self.end = self.tokenizer.token_to_id(END_TOKEN)
        self.weight_version = "0"
        self.requests = 0
        self.cache = PrefixCache(config.cache_blocks)
        self.totals = {"prompt_tokens": 0, "cached_tokens": 0, "generation_tokens": 0}
        self.running = 0
        self.waiting = 0
        self._slots = asyncio.Semaphore(config.max_running) if config.max_running else None
        self.app = self._app()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def answer(self, req: dict) -> dict:
        """The /generate answer for one request, in SGLang's shape (tests/fixtures/sglang_generate_response.json)."""
        ids = req.get("input_ids") or self.encode(req.get("text") or "")
        text = answer_for(self.tokenizer.decode(ids, skip_special_tokens=False), self.config.command)
        params = req.get("sampling_params") or {}
        stops = params.get("stop") or []
        stops = [stops] if isinstance(stops, str) else stops
        hit = min(((text.find(s), s) for s in stops if s and s in text), default=None)
        if hit is not None:  # the caller's stop string ends the answer, trimmed, as SGLang does
            text = text[: hit[0]]
        out = self.encode(text) + ([] if hit else [self.end])
        limit = params.get("max_new_tokens") or len(out)
        out = out[:limit]
        if hit is not None and len(out) < limit:
            finish: dict = {"type": "stop", "matched": hit[1]}
        elif out and out[-1] == self.end:
            finish = {"type": "stop", "matched": self.end}
        else:
            finish = {"type": "length", "length": limit}
        self.requests += 1
        cached = self.cache.lookup_and_insert(ids)
        self.totals["prompt_tokens"] += len(ids)
        self.totals["cached_tokens"] += cached
        self.totals["generation_tokens"] += len(out)
        meta: dict = {
            "id": f"standin-{self.requests}",
            "finish_reason": finish,
            "prompt_tokens": len(ids),
            "completion_tokens": len(out),
            "weight_version": self.weight_version,
            "cached_tokens": cached,
            "e2e_latency": len(out) * self.config.ms_per_token / 1000,
        }
        if req.get("return_logprob"):
            meta["output_token_logprobs"] = [[-0.5, t, None] for t in out]
            start = req.get("logprob_start_len", -1)
            meta["input_token_logprobs"] = (
                [[None if i == 0 else -1.0, t, None] for i, t in enumerate(ids)][start:]
                if start is not None and start >= 0
                else []
            )
        return {"text": self.tokenizer.decode(out, skip_special_tokens=True), "output_ids": out, "meta_info": meta}

    async def generate(self, req: dict) -> dict:
        """One request: a batch slot (waiting in arrival order when all are taken), then its fixed decode time."""
        if self._slots is None:
            return await self._decode(req)
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        try:
            return await self._decode(req)
        finally:
            self._slots.release()

    async def _decode(self, req: dict) -> dict:
        self.running += 1
        try:
            body = self.answer(req)
            # The fixed time per token: a sleep, so concurrent requests overlap like one batch on a GPU.
            await asyncio.sleep(body["meta_info"]["completion_tokens"] * self.config.ms_per_token / 1000)
            return body
        finally:
            self.running -= 1

    def metrics_text(self) -> str:
        """SGLang's Prometheus names for what the benchmarks read: tokens in and out, cache hits, the queue."""
        t = self.totals
        return "".join(
            f"{name} {value}\n"
            for name, value in (
                ("sglang:prompt_tokens_total", t["prompt_tokens"]),
                ("sglang:cached_tokens_total", t["cached_tokens"]),
                ("sglang:generation_tokens_total", t["generation_tokens"]),
                ("sglang:num_requests_total", self.requests),
                ("sglang:num_running_reqs", self.running),
                ("sglang:num_queue_reqs", self.waiting),
            )
        )

    def _app(self) -> FastAPI:
        app = FastAPI()
        path = str(self.config.tokenizer_path)

        @app.post("/generate")
        async def generate(request: Request):
            req = await request.json()
            body = await self.generate(req)
            if not req.get("stream"):
                return body

            async def sse():
                yield f"data: {json.dumps(body)}\n\n"
                yield "data: [DONE]\n\n"

            return StreamingResponse(sse(), media_type="text/event-stream")

        @app.get("/metrics")
        async def metrics() -> PlainTextResponse:
            return PlainTextResponse(self.metrics_text())

        @app.get("/health")
        @app.get("/health_generate")
        async def health() -> dict:
            return {}

        @app.get("/get_model_info")
        async def model_info() -> dict:
            return {"model_path": path, "tokenizer_path": path, "is_generation": True}

        @app.get("/get_server_info")
        async def server_info() -> dict:
            return {"model_path": path, "tokenizer_path": path, "version": "standin"}

        @app.get("/get_weight_version")
        async def weight_version() -> dict:
            return {"weight_version": self.weight_version}

        # Weight updates (from disk, tensors, a distributed group): accepted, and the version remembered.
        @app.post("/update_weights_from_disk")
        @app.post("/update_weights_from_tensor")
        @app.post("/update_weights_from_distributed")
        @app.post("/init_weights_update_group")
        @app.post("/destroy_weights_update_group")
        @app.post("/update_weight_version")
        async def update(request: Request) -> dict:
            try:
                req = await request.json()
            except ValueError:
                req = {}
            if isinstance(req, dict) and req.get("weight_version"):
                self.weight_version = str(req["weight_version"])
            return {"success": True, "message": "stand-in: weights noted", "num_paused_requests": 0}

        @app.post("/flush_cache")
        @app.get("/flush_cache")
        @app.post("/pause_generation")
        @app.post("/continue_generation")
        async def noop() -> dict:
            return {"success": True}

        return app


class StandinServer:
    """The stand-in on a port in a thread of this process (the benchmark's own, or a test's)."""

    def __init__(self, config: StandinConfig, port: int, host: str = "127.0.0.1"):
        self.engine = StandinEngine(config)
        self.port = port
        self.http = ThreadedServer(self.engine.app, port, host)

    @property
    def url(self) -> str:
        return self.http.url

    def __enter__(self) -> StandinServer:
        self.http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.stop()


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    p = argparse.ArgumentParser(prog="python -m bench.standin_engine", description=__doc__)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--ms-per-token", type=float, default=20.0)
    p.add_argument("--tokenizer", type=Path, required=True, help="a folder with tokenizer.json")
    p.add_argument("--max-running", type=int, help="requests generating at once (default: no limit)")
    p.add_argument("--command", default="true", help="what its terminal episodes run (default: true)")
    args = p.parse_args(argv)
    config = StandinConfig(
        tokenizer_path=args.tokenizer, ms_per_token=args.ms_per_token, max_running=args.max_running,
        command=args.command,
    )  # fmt: skip
    engine = StandinEngine(config)
    log.info("stand-in engine", port=args.port, ms_per_token=args.ms_per_token, max_running=args.max_running)
    uvicorn.run(engine.app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
