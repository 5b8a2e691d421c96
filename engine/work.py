"""A request's way through the engine: the `WorkItem` a /generate prompt becomes, its decoding state inside a batch
(`_Row`), and the `WorkResult` answers built from that state (the final one, progress snapshots, incremental
deltas, the answer of a request aborted before it started)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

from engine.weights import LoadedModel

if TYPE_CHECKING:
    from engine.lora_adapters import LoraAdapter
from policy_client.detok import IncrementalDetokenizer
from policy_client.wire import FinishReason, LogprobEntry, SamplingParams


@dataclass
class WorkItem:
    """One prompt of a /generate call, validated and tokenized."""

    input_ids: list[int]
    params: SamplingParams
    return_logprob: bool = False
    logprob_start_len: int = -1
    top_logprobs_num: int = 0
    rid: str = field(default_factory=lambda: uuid.uuid4().hex)
    on_progress: Callable[["WorkResult"], None] | None = None
    """Called (from the engine thread) after every decoded token; streaming uses it."""
    received_at: float = field(default_factory=time.time)
    tenant: str | None = None
    """Whose request this is, for fair sharing of engine slots; None: the shared system bucket (judges, teacher,
    training)."""
    incremental: bool = False
    """Streaming progress events carry only what is new (SGLang's incremental streaming output), not snapshots."""
    lora: "LoraAdapter | None" = None
    """The LoRA adapter this request decodes with (the /generate `lora_path`); None: the base model."""

    @property
    def lora_key(self) -> str | None:
        """The prefix cache's namespace of this request's KV: its adapter (name and load), None for the base."""
        return None if self.lora is None else self.lora.key


@dataclass
class WorkResult:
    rid: str
    text: str
    output_ids: list[int]
    prompt_tokens: int
    finish_reason: FinishReason | None
    weight_version: str
    output_token_logprobs: list[LogprobEntry] | None = None
    input_token_logprobs: list[LogprobEntry] | None = None
    output_top_logprobs: list[list[LogprobEntry]] | None = None
    input_top_logprobs: list[list[LogprobEntry] | None] | None = None
    e2e_latency: float = 0.0
    cached_tokens: int = 0
    completion_tokens: int | None = None
    """Tokens generated so far; None: len(output_ids) (an incremental event carries only the new ones)."""
    lora_path: str | None = None
    """The LoRA adapter that served it (None: the base model), and its version when its folder carries one."""
    lora_version: str | None = None

    def to_wire(self) -> dict:
        meta: dict = {
            "id": self.rid,
            "finish_reason": self.finish_reason.model_dump(exclude_none=True) if self.finish_reason else None,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": len(self.output_ids) if self.completion_tokens is None else self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "e2e_latency": round(self.e2e_latency, 6),
            "weight_version": self.weight_version,
        }
        if self.lora_path is not None:
            meta["lora_path"] = self.lora_path
            meta["lora_version"] = self.lora_version
        for name in ("output_token_logprobs", "input_token_logprobs", "output_top_logprobs", "input_top_logprobs"):
            value = getattr(self, name)
            if value is not None:
                meta[name] = value
        return {"text": self.text, "output_ids": list(self.output_ids), "meta_info": meta}


class _Row:
    """Decoding state of one request inside a batch."""

    def __init__(self, item: WorkItem, lm: LoadedModel):
        self.item = item
        self.lm = lm  # the weights its KV came from (an in-place update changes the batch's, not its past)
        self.params = item.params
        self.out: list[int] = []
        self.out_lps: list[LogprobEntry] = []
        self.out_tops: list[list[LogprobEntry]] = []
        self.text = ""
        self.finish: FinishReason | None = None
        self.stops = self.params.stop_strings()
        self.stop_ids = set(self.params.stop_token_ids or [])
        if not self.params.ignore_eos:
            self.stop_ids |= lm.eos_ids
        if self.params.max_new_tokens == 0:
            self.finish = FinishReason(type="length", length=0)
        # Text is followed token by token only when someone reads it before the end (stop strings, streaming).
        self.detok = (
            IncrementalDetokenizer(lm.tokenizer, self.params.skip_special_tokens)
            if (self.stops or item.on_progress)
            else None
        )
        self.hold = max((len(s) for s in self.stops), default=1) - 1  # text that may still become a stop string
        self.sent_ids = 0  # incremental streaming: what earlier progress events carried
        self.sent_text = 0
        self.cached_tokens = 0

    @property
    def done(self) -> bool:
        return self.finish is not None


def _lora_meta(item: WorkItem) -> dict:
    return {} if item.lora is None else {"lora_path": item.lora.name, "lora_version": item.lora.version}


def _decode_text(lm: LoadedModel, ids: list[int], skip_special: bool) -> str:
    return lm.tokenizer.decode(ids, skip_special_tokens=skip_special)  # type: ignore[attr-defined]


def _final_text(lm: LoadedModel, row: _Row) -> str:
    if row.finish and row.finish.type == "stop" and isinstance(row.finish.matched, str):
        return row.text  # trimmed at the stop string
    return _decode_text(lm, row.out, row.params.skip_special_tokens)  # once per request


def _result(lm: LoadedModel, row: _Row, inputs: tuple, prompt_len: int, start: float, final: bool) -> WorkResult:
    """The request's whole answer (the final one, or a cumulative snapshot)."""
    it = row.item
    if final:
        row.text = _final_text(lm, row)
    text = row.text
    return WorkResult(
        rid=it.rid,
        text=text,
        output_ids=list(row.out),
        prompt_tokens=prompt_len,
        finish_reason=row.finish if final or row.done else None,
        weight_version=lm.weight_version,
        output_token_logprobs=list(row.out_lps) if it.return_logprob else None,
        input_token_logprobs=inputs[0],
        output_top_logprobs=list(row.out_tops) if it.return_logprob and it.top_logprobs_num else None,
        input_top_logprobs=inputs[1],
        e2e_latency=time.time() - it.received_at,
        cached_tokens=row.cached_tokens,
        **_lora_meta(it),
    )


def _progress(lm: LoadedModel, row: _Row, inputs: tuple, prompt_len: int, start: float) -> WorkResult:
    """A progress event: the cumulative snapshot, or (incremental streaming) only what is new since the last one.

    Incremental text holds back what could still become a stop string, so the final delta completes the text the
    answer ends with (a delta once sent is never taken back)."""
    if not row.item.incremental:
        return _result(lm, row, inputs, prompt_len, start, final=False)
    it = row.item
    upto = len(row.text) - row.hold if row.stops else len(row.text)
    delta = row.text[row.sent_text : upto] if upto > row.sent_text else ""
    new = slice(row.sent_ids, len(row.out))
    row.sent_ids, row.sent_text = len(row.out), row.sent_text + len(delta)
    return WorkResult(
        rid=it.rid,
        text=delta,
        output_ids=row.out[new],
        prompt_tokens=prompt_len,
        finish_reason=None,
        weight_version=lm.weight_version,
        output_token_logprobs=row.out_lps[new] if it.return_logprob else None,
        input_token_logprobs=inputs[0],
        output_top_logprobs=row.out_tops[new] if it.return_logprob and it.top_logprobs_num else None,
        input_top_logprobs=inputs[1],
        e2e_latency=time.time() - it.received_at,
        cached_tokens=row.cached_tokens,
        completion_tokens=len(row.out),
        **_lora_meta(it),
    )


def aborted_before_start(item: WorkItem, lm: LoadedModel, message: str) -> WorkResult:
    """The answer of a request aborted while it waited for a slot: no tokens, finish_reason abort."""
    return WorkResult(
        rid=item.rid,
        text="",
        output_ids=[],
        prompt_tokens=len(item.input_ids),
        finish_reason=FinishReason(type="abort", message=message),
        weight_version=lm.weight_version,
        output_token_logprobs=[] if item.return_logprob else None,
        e2e_latency=time.time() - item.received_at,
        **_lora_meta(item),
    )


def merged_deltas(first: WorkResult, then: WorkResult) -> WorkResult:
    """Two incremental events as one: what both carry, in order."""

    def joined(a: list | None, b: list | None) -> list | None:
        return None if a is None or b is None else a + b

    return replace(
        then,
        text=first.text + then.text,
        output_ids=first.output_ids + then.output_ids,
        output_token_logprobs=joined(first.output_token_logprobs, then.output_token_logprobs),
        output_top_logprobs=joined(first.output_top_logprobs, then.output_top_logprobs),
    )


def final_delta(result: WorkResult, sent_ids: int, sent_text: int) -> WorkResult:
    """The last incremental event: what the final answer adds to the deltas already sent."""
    n = len(result.output_ids)
    return WorkResult(
        rid=result.rid,
        text=result.text[sent_text:],
        output_ids=result.output_ids[sent_ids:],
        prompt_tokens=result.prompt_tokens,
        finish_reason=result.finish_reason,
        weight_version=result.weight_version,
        output_token_logprobs=None if result.output_token_logprobs is None else result.output_token_logprobs[sent_ids:],
        input_token_logprobs=result.input_token_logprobs,
        output_top_logprobs=None if result.output_top_logprobs is None else result.output_top_logprobs[sent_ids:],
        input_top_logprobs=result.input_top_logprobs,
        e2e_latency=result.e2e_latency,
        cached_tokens=result.cached_tokens,
        completion_tokens=n,
        lora_path=result.lora_path,
        lora_version=result.lora_version,
    )
