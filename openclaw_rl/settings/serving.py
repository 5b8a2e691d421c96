"""Serving: the embedded engine, the router in front of several, the policy servers, chat sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from openclaw_rl.settings.service import LOOPBACK


class EngineSettings(BaseModel):
    host: str = LOOPBACK
    """Interface the embedded policy engine binds to."""
    port: int = Field(30000, ge=1, le=65535)
    """Port of the embedded engine (SGLang's default port)."""
    model_path: Path | None = None
    """Local Hugging Face checkpoint to serve. None: the built-in tiny Qwen3 model, created in the data directory
    on first run."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the engine runs the model; auto picks CUDA when present."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Weights dtype; auto is float32 on CPU and bfloat16 on CUDA."""
    max_batch_size: int = Field(16, ge=1, le=1024)
    """Most requests decoded together in one batch."""
    batch_window_ms: float = Field(2.0, ge=0, le=1000)
    """How long the scheduler waits for more requests once one arrived, to batch them together."""
    max_total_tokens: int = Field(32768, ge=16)
    """Longest prompt plus response a request may have; longer requests get HTTP 400."""
    torch_threads: int | None = Field(None, ge=1)
    """CPU threads for torch. None: torch's default (every core), but one while a single row decodes on a CPU (a
    second thread only spins there, taking a core from the rest of the stack); a number: that many, always."""
    cpu_packed_linears: bool = True
    """On a CPU, run the model's linear layers through oneDNN with packed weights (engine/cpu_linears.py): 2-10x
    faster for a few rows at a time, at twice the memory of those weights."""
    cuda_graphs: bool = True
    """On CUDA, decode steps replay CUDA graphs (engine/graph_decode.py) over a fixed KV pool instead of the eager
    Hugging Face forward, whose kernel launches bound a step at any batch size. Prefill stays eager; a batch with a
    shared prefix, or a request longer than cuda_graph_max_tokens, decodes eagerly; a failed capture falls back to
    eager with a warning. No effect on a CPU. Off: every decode step runs eagerly."""
    cuda_graph_max_tokens: int = Field(4096, ge=16)
    """KV positions (prompt plus answer) per request the CUDA-graph pool holds. The pool takes max_batch_size x
    this x the model's KV bytes per token (Qwen3-1.7B in bf16: 112 KiB, so 16 x 4096 = 7.3 GB), allocated on the
    first decode step and freed by /release_memory_occupation (kv_cache)."""
    max_new_tokens_cap: int = Field(8192, ge=1)
    """Most tokens one request may ask to generate; more get HTTP 400. A long request holds a batch slot for its
    whole length. 8192 lets the LLM judge's default hint budget (learning.judge.hint_max_tokens) through."""
    max_request_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    """Largest request body accepted; larger ones get HTTP 413, before the body is read when Content-Length says
    so (a prompt of max_total_tokens ids is well under 1 MiB of JSON)."""
    api_key: SecretStr = SecretStr("")
    """Bearer key every request but /health must carry (`Authorization: Bearer <key>`), as SGLang's --api-key.
    Empty: no key asked (fine on loopback; set one when the engine listens on another interface)."""
    weight_roots: list[Path] | None = None
    """Folders /update_weights_from_disk may load checkpoints from (symlinks resolved first); other paths get
    HTTP 400. None: the data directory (its checkpoints folder included) and the served model's folder."""
    max_loras: int = Field(128, ge=1)
    """LoRA adapters resident at once (POST /load_lora_adapter; /generate's lora_path names one). Loading one more
    evicts the least recently used adapter no running request uses; when all are in use the load is refused."""
    tenant_slot_share: float = Field(0.5, gt=0, le=1)
    """Largest fraction of max_batch_size one tenant (the X-Openclaw-Tenant header; none: the system bucket) may
    hold while other tenants have requests waiting; rounded up. A tenant alone may use every slot."""
    max_queued_per_tenant: int = Field(64, ge=1)
    """Most requests one tenant may have waiting for a slot; more get HTTP 503 with Retry-After. The system bucket
    (requests without the tenant header: judges, teacher, training) is not bounded."""
    prefix_cache_mb: float | None = Field(None, ge=0)
    """Memory budget of the prefix cache (KV of token prefixes shared across requests and a session's turns,
    evicted least recently used first); 0 disables it. Emptied on every weight update and by POST /flush_cache.
    None: 512 on a CPU; on CUDA the KV of 65,536 tokens of the served model (7 GiB at Qwen3-1.7B's shape, five
    11K-token OpenClaw prompts), at most 15% of the GPU. A fixed 512 held no OpenClaw prompt of a 1.7B model
    (1.2 GB each), so every request prefilled it again."""
    prefill_chunk_tokens: int = Field(512, ge=0)
    """A prompt with more tokens than this left to prefill is prefilled this many at a time, between decode steps
    of the running requests, so it never stalls them for its whole prefill; 0 prefills every prompt at once."""
    pause_lease_s: float | None = Field(5.0, gt=0)
    """A /pause_generation ends by itself once no /update_weights_from_distributed call has come for this long: a
    trainer cut off between its pause and its /continue_generation must not leave the engine serving nobody until
    it is back. A publication's buckets renew it (the trainer stages them before it pauses; one takes well under a
    second on a GPU, about 2 s for 256 MiB at 1 Gb/s); a slower bucket that outlasts it is still safe, since a
    version is committed whole between two forward passes. None: paused until told to continue, as SGLang."""
    replicas: int = Field(1, ge=1, le=64)
    """Embedded engines `up` starts, on consecutive ports from `port`. More than one: the sglang-router (`router`)
    fronts them; each gets every weight update, and the system keeps serving while one is down or restarting."""
    incremental_streaming_output: bool = False
    """SGLang's --incremental-streaming-output: every streamed event carries only the new tokens, log-probs and
    text. Off (SGLang's default): cumulative snapshots, unless a request asks with `X-Openclaw-Stream: incremental`
    (PolicyClient always does with this engine)."""


class RouterSettings(BaseModel):
    """The sglang-router `up` starts in front of the embedded engines when engine.replicas > 1."""

    port: int = Field(30100, ge=1, le=65535)
    """Port the router serves on (loopback): every generation, teacher and judge call goes through it."""
    metrics_port: int = Field(30101, ge=1, le=65535)
    """The router's Prometheus exporter (loopback; the router always opens one, by default on 29000)."""
    policy: Literal["cache_aware", "round_robin", "power_of_two", "random"] = "cache_aware"
    """How the router picks an engine: cache_aware keeps requests that share a prefix (a session's turns) on one
    engine, so its prefix cache hits; round_robin spreads them evenly."""
    balance_abs_threshold: int | None = Field(None, ge=0)
    """cache_aware: requests in flight by which the busiest engine must lead the idlest (and by the relative
    threshold) before the router sends by load instead of by prefix. It should be about one engine's batch: with
    more, a system prompt that every session shares (it matches on every engine) keeps every session on the first
    engine that served it. None: the embedded engines' `engine.max_batch_size` when `up` starts the router in front
    of them, else SGLang's 64 (its servers batch that many and more)."""
    balance_rel_threshold: float = Field(1.5, ge=1.0)
    """cache_aware: the busiest engine's requests in flight over the idlest's that also triggers balancing."""
    health_check_interval_s: int = Field(5, ge=1, le=3600)
    """How often the router probes each engine's /health."""
    health_failure_threshold: int = Field(2, ge=1, le=100)
    """Failed probes in a row before the router stops sending an engine traffic (a dead engine is also taken out by
    the launcher as soon as it exits, and a request it fails is retried on another engine)."""
    ready_timeout_s: float = Field(60.0, gt=0)
    """How long `up` waits for the router to answer."""


class PolicySettings(BaseModel):
    server_urls: list[str] = Field(default_factory=list)
    """The policy servers (e.g. http://gpu1:30000): every weight update and cache flush goes to each of them.
    Empty: the embedded engines, started by `up`. Without `router_url`, generation spreads over them and skips one
    that is down."""
    router_url: str | None = None
    """An sglang-router in front of `server_urls`: generation, teacher and judge traffic goes to it, while weight
    updates and cache flushes still go to every server (the router does not forward them). It is called with
    `api_key`, as its workers are (the router's --api-key)."""
    server_down_s: float = Field(5.0, ge=0)
    """Without a router: a server that failed a call (connection refused, timeout, 5xx) is skipped this long while
    another one is up, so one dead server costs no request its retry delays."""
    tokenizer_path: Path | None = None
    """Local tokenizer + chat template used to render prompts on our side. None: the served model's path
    (embedded engine) or engine.model_path."""
    request_timeout_s: float = Field(300.0, gt=0)
    """Upper bound on one HTTP call to a policy server."""
    silence_probe_s: float = Field(5.0, gt=0)
    """A generation quiet this long (no answer, no stream event) asks whether the engine it may be waiting on is still
    in rotation (the router's view; without a router, whether its server answers /health): one that left, e.g. a
    host whose link is cut, would hold it until `request_timeout_s`, so it is sent again. A quiet call is never
    ended while every engine stays in rotation (policy_client/rotation.py)."""
    connect_timeout_s: float = Field(5.0, gt=0)
    """Upper bound on opening a connection to a policy server."""
    max_attempts: int = Field(4, ge=1, le=20)
    """Tries per call when the failure can succeed on retry (connection errors, timeouts, 5xx)."""
    backoff_s: float = Field(0.25, ge=0)
    """First retry delay; doubles each retry."""
    context_length: int | None = Field(None, ge=16)
    """Prompt plus response tokens the served model takes. None: engine.max_total_tokens for the embedded engine,
    else the checkpoint's max_position_embeddings."""
    api_key: SecretStr = SecretStr("")
    """Bearer key sent to server_urls and router_url on every call (their --api-key). Unused with the embedded engines,
    which are called with engine.api_key."""
    incremental_streaming: bool = False
    """server_urls run with SGLang's --incremental-streaming-output (streamed events carry only what is new, so a
    long answer streams in linear time). The embedded engine streams incrementally whatever this says."""


class SessionSettings(BaseModel):
    """How chat sessions become durable SessionWorkflows."""

    idle_timeout_s: float = Field(3600.0, gt=0)
    """A session with no request for this long ends; its last turn is closed without a next state."""
    turns_per_run: int = Field(200, ge=2)
    """Turns one workflow run holds before it continues as new (earlier, if Temporal suggests it)."""
    default_max_tokens: int = Field(1024, ge=1)
    """Response length when the request names none (capped by the engine's context)."""
    generate_heartbeat_s: float = Field(10.0, gt=0)
    """A generation whose worker stops heartbeating this long is retried on another worker, resuming from the
    tokens already produced."""
    generate_timeout_s: float = Field(900.0, gt=0)
    """Upper bound on one generation attempt."""
    stream_flush_ms: float = Field(20.0, ge=0)
    """Tokens produced within this window are published to the client's stream together."""
    prefix_link_ttl_s: int = Field(7 * 24 * 3600, ge=60)
    """How long a finished turn can be found by message-history prefix (requests with no session hint)."""
    side_call_markers: dict[str, str] = Field(
        default_factory=lambda: {
            "Pre-compaction memory flush": "memory_flush",
            "You are a context summarization assistant": "compaction_summary",
            "Write an Activity recap": "activity_recap",
        }
    )
    """Substring of the system prompt -> side-call kind. Side calls are served and recorded, never trained on."""
    internal_context_marker: str = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"
    """A user message containing this is client-injected context, not a user reply: it is never a next state and
    never part of the prefix link."""
