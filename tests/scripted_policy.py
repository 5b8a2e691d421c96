"""A policy server that speaks SGLang's native wire format with scripted answers.

Stands in for a GPU LLM in tests and benchmarks: `/generate` takes `input_ids`,
decodes them with the real tokenizer, asks `answer(prompt_text)` what to say,
and returns the answer's token ids with log-probs in SGLang's shape (the same
fields as tests/fixtures/sglang_generate_response.json). `delay_s` makes every
generation wait, as a remote server would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from bench.threaded_server import ThreadedServer
from tests.helpers import free_port


class ScriptedPolicy:
    def __init__(self, tokenizer_path: Path, answer: Callable[[str], str], delay_s: float = 0.0):
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
        self.answer = answer
        self.delay_s = delay_s
        self.prompts: list[str] = []
        self.weight_version = "0"
        app = FastAPI()
        end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")

        def body_for(req: dict) -> dict:
            ids = req.get("input_ids") or self.tokenizer.encode(req.get("text", ""), add_special_tokens=False)
            prompt = self.tokenizer.decode(ids, skip_special_tokens=False)
            self.prompts.append(prompt)
            text = self.answer(prompt)
            params = req.get("sampling_params") or {}
            stops = params.get("stop") or []
            # The caller's stop strings end the answer where one first appears, trimmed, as SGLang does.
            hit = min(
                ((text.find(s), s) for s in ([stops] if isinstance(stops, str) else stops) if s and s in text),
                default=None,
            )
            if hit is not None:
                text = text[: hit[0]]
            out = self.tokenizer.encode(text, add_special_tokens=False) + ([] if hit else [end])
            limit = params.get("max_new_tokens") or len(out)
            out = out[:limit]
            if hit is not None and len(out) < limit:
                finish = {"type": "stop", "matched": hit[1]}
            elif out and out[-1] == end:
                finish = {"type": "stop", "matched": end}
            else:
                finish = {"type": "length", "length": limit}
            meta = {
                "id": f"scripted-{len(self.prompts)}",
                "finish_reason": finish,
                "prompt_tokens": len(ids),
                "completion_tokens": len(out),
                "weight_version": self.weight_version,
                "cached_tokens": 0,
                "e2e_latency": self.delay_s,
            }
            if req.get("return_logprob"):
                meta["output_token_logprobs"] = [[-0.5, t, None] for t in out]
                start = req.get("logprob_start_len", -1)
                meta["input_token_logprobs"] = (
                    [[None if i == 0 else -1.0, t, None] for i, t in enumerate(ids)][max(start, 0) :]
                    if start is not None and start >= 0
                    else []
                )
            return {"text": self.tokenizer.decode(out, skip_special_tokens=True), "output_ids": out, "meta_info": meta}

        @app.post("/generate")
        async def generate(request: Request):
            req = await request.json()
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            body = body_for(req)
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
            return {"model_path": str(tokenizer_path), "tokenizer_path": str(tokenizer_path), "is_generation": True}

        @app.get("/get_weight_version")
        async def weight_version() -> dict:
            return {"weight_version": self.weight_version}

        @app.post("/update_weights_from_disk")
        async def update(request: Request) -> dict:
            req = await request.json()
            self.weight_version = req.get("weight_version") or self.weight_version
            return {"success": True, "message": "scripted policy: weights noted", "num_paused_requests": 0}

        @app.post("/flush_cache")
        async def flush() -> dict:
            return {}

        self.port = free_port()
        self.http = ThreadedServer(app, self.port)

    @property
    def url(self) -> str:
        return self.http.url

    def __enter__(self) -> ScriptedPolicy:
        self.http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.stop()


def tool_call(name: str, **arguments: object) -> str:
    """The Qwen3/Hermes tool-call block a policy writes."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
