"""A stand-in for a remote GPU policy server: SGLang's native wire format, a fixed time per generated token.

For the scale benchmark (`openclaw-rl bench scale`): the 2 cores then measure the orchestration (API, Temporal,
workers, store), not a model. Requests overlap (asyncio sleeps), as a batched GPU serves them at once.

What it says: in a terminal episode (the prompt offers the `submit` tool) a `bash` call running `true`, then
`submit` once a tool result is in the prompt, so an episode ends in two steps; otherwise a short plain answer.

    python -m bench.standin_engine --port 30000 --ms-per-token 20 --tokenizer PATH
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import structlog
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict
from tokenizers import Tokenizer

from bench.threaded_server import ThreadedServer

log = structlog.get_logger(__name__)

CHAT_ANSWER = "Sure. Here is a short answer."
END_TOKEN = "<|im_end|>"


class StandinConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokenizer_path: Path
    """A folder with tokenizer.json (the tiny model's: `engine.tiny_qwen3.ensure_tiny_model`)."""
    ms_per_token: float = 20.0
    """Generation time per output token, as a GPU decoding one sequence of a batch would take."""


def tool_call(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def answer_for(prompt: str) -> str:
    """What the stand-in says to `prompt` (chat: plain text; a terminal episode: one cheap command, then submit)."""
    if '"submit"' not in prompt:
        return CHAT_ANSWER
    if "<tool_response>" in prompt:
        return tool_call("submit")
    return tool_call("bash", command="true")


class StandinEngine:
    def __init__(self, config: StandinConfig):
        self.config = config
        self.tokenizer = Tokenizer.from_file(str(config.tokenizer_path / "tokenizer.json"))
        self.end = self.tokenizer.token_to_id(END_TOKEN)
        self.weight_version = "0"
        self.requests = 0
        self.app = self._app()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def answer(self, req: dict) -> dict:
        """The /generate answer for one request, in SGLang's shape (tests/fixtures/sglang_generate_response.json)."""
        ids = req.get("input_ids") or self.encode(req.get("text") or "")
        text = answer_for(self.tokenizer.decode(ids, skip_special_tokens=False))
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
        meta: dict = {
            "id": f"standin-{self.requests}",
            "finish_reason": finish,
            "prompt_tokens": len(ids),
            "completion_tokens": len(out),
            "weight_version": self.weight_version,
            "cached_tokens": 0,
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

    def _app(self) -> FastAPI:
        app = FastAPI()
        path = str(self.config.tokenizer_path)

        @app.post("/generate")
        async def generate(request: Request):
            req = await request.json()
            body = self.answer(req)
            # The fixed time per token: a sleep, so concurrent requests overlap like one batch on a GPU.
            await asyncio.sleep(body["meta_info"]["completion_tokens"] * self.config.ms_per_token / 1000)
            if not req.get("stream"):
                return body

            async def sse():
                yield f"data: {json.dumps(body)}\n\n"
                yield "data: [DONE]\n\n"

            return StreamingResponse(sse(), media_type="text/event-stream")

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
    args = p.parse_args(argv)
    engine = StandinEngine(StandinConfig(tokenizer_path=args.tokenizer, ms_per_token=args.ms_per_token))
    log.info("stand-in engine", port=args.port, ms_per_token=args.ms_per_token)
    uvicorn.run(engine.app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
