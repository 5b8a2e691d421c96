"""One typed settings tree for every process of the system.

Sources, highest priority first: explicit overrides, environment variables
(``OPENCLAW_RL_<SECTION>__<FIELD>``, plus the conventional ``TEMPORAL_ADDRESS``
and ``REDIS_URL``), an optional TOML file (``OPENCLAW_RL_CONFIG``), defaults.
Every child process of ``openclaw-rl up`` re-reads the same sources, so they all
resolve the same addresses without passing them around.
"""

from __future__ import annotations

import json
import os
import re
from enum import Enum
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from openclaw_rl.masking import mask_url, mask_urls

LOOPBACK = "127.0.0.1"
MASK = "**********"
"""What `Settings.masked()` shows in place of a secret (pydantic's own rendering of a SecretStr)."""


class Pool(str, Enum):
    """Typed worker pools; each polls its own Temporal task queue."""

    WORKFLOW = "workflow"  # hosts workflow code only (sessions, episodes, training loop)
    POLICY = "policy"  # generation and teacher log-prob scoring against policy servers
    JUDGE = "judge"  # PRM votes and hindsight hints
    TRAINER = "trainer"  # train steps and weight publication
    ENV = "env"  # general-agent environments in sandboxes (each episode's steps stay on one env worker)


POOL_METRICS_OFFSET = {Pool.WORKFLOW: 0, Pool.POLICY: 1, Pool.JUDGE: 2, Pool.ENV: 3, Pool.TRAINER: 4}
"""Each pool's port is `metrics.port_base` plus its offset (one process per pool on a host)."""


class MetricsSettings(BaseModel):
    """Prometheus metrics of the worker pools: the Temporal SDK's (task latencies, slots, polls) and ours
    (train steps, samples, policy version, loss; environments held; episode steps), one endpoint per pool."""

    port_base: int | None = Field(None, ge=1, le=65_000)
    """None: no endpoint. Else pool P serves /metrics on port_base + its offset (workflow 0, policy 1, judge 2,
    env 3, trainer 4)."""
    host: str = "127.0.0.1"
    """The address the endpoints bind (0.0.0.0 for a Prometheus elsewhere)."""

    def address(self, pool: Pool) -> str | None:
        if self.port_base is None:
            return None
        return f"{self.host}:{self.port_base + POOL_METRICS_OFFSET[pool]}"


class WandbSettings(BaseModel):
    """Weights & Biases, offline: the curves' points also go to W&B runs under `<data dir>/wandb/` (the `wandb`
    extra), never needing a login or the network; `wandb sync <run dir>` uploads one later."""

    enabled: bool = False
    """Write W&B offline runs beside the TensorBoard event files (which are always written)."""
    project: str = Field("openclaw-rl", min_length=1)
    """The W&B project the runs belong to (where `wandb sync` puts them)."""


class CurvesSettings(BaseModel):
    """Training's curves (activities.curves): TensorBoard event files under `<data dir>/tensorboard/`, always;
    W&B offline runs too when `wandb.enabled`. `openclaw-rl train curves` says where."""

    wandb: WandbSettings = Field(default_factory=WandbSettings)
    """Weights & Biases in offline mode."""


class ApiSettings(BaseModel):
    host: str = LOOPBACK
    """Interface the REST API binds to."""
    port: int = Field(8000, ge=1, le=65535)
    """Port of the OpenAI-compatible REST API."""
    model_name: str = "openclaw-rl-policy"
    """Model id listed by /v1/models; chat requests may name any model (they all reach the one policy)."""
    max_request_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    """Largest request body accepted; larger ones get HTTP 413 (OpenClaw sends ~60 KB plus the history)."""
    max_inflight_per_user: int = Field(64, ge=1)
    """Concurrent chat requests one user may have in flight; more get HTTP 429."""
    temporal_retry_s: float = Field(30.0, ge=0)
    """How long a chat request keeps retrying while Temporal is unreachable (e.g. restarting) before HTTP 503."""
    codec_token: SecretStr = SecretStr("")
    """The token the codec server (`/codec`, served while encryption at rest is on: it decrypts conversations)
    requires, as `Authorization: Bearer <token>` (the Temporal CLI's `--codec-auth`) or as the path segment
    `/codec/<token>/` (the endpoint `up` gives the embedded Web UI, which sends no header of its own). Empty:
    derived from the first encryption key (`openclaw-rl encryption codec-token` prints it)."""
    codec_hosts: list[str] = Field(default_factory=lambda: [LOOPBACK, "localhost", "::1"], min_length=1)
    """Host names the codec server answers to (the request's Host header, its port aside). Any other name is refused,
    even on this machine: a web page whose name was rebound to 127.0.0.1 (DNS rebinding) reads nothing. Add the
    name a proxy in front of the API is reached by."""
    codec_origins: list[str] | None = None
    """Browser origins that may call the codec server (its Origin header, and CORS). None: the embedded Web UI's,
    http://127.0.0.1:<temporal.ui_port> and http://localhost:<temporal.ui_port>. A request without an Origin (the
    Temporal CLI, curl: not a browser) passes this check; the token still applies."""

    @field_validator("codec_token")
    @classmethod
    def _codec_token_fits_a_path(cls, value: SecretStr) -> SecretStr:
        token = value.get_secret_value()
        if token and (len(token) < 16 or not token.replace("-", "").replace("_", "").isalnum() or not token.isascii()):
            raise ValueError("api.codec_token: use at least 16 letters, digits, '-' or '_' (it may travel in a path)")
        return value


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


class HeuristicJudgeSettings(BaseModel):
    """An offline judge that needs no LLM: explicit feedback in user replies, error markers in tool results.
    A baseline for offline use and tests, not the paper's judge."""

    type: Literal["heuristic"] = "heuristic"


class LlmJudgeSettings(BaseModel):
    """The paper's judge: an LLM prompted with appendix C.1 (PRM) and C.2 (hints)."""

    type: Literal["llm"] = "llm"
    url: str | None = None
    """Base URL of the judge server. None: the policy servers themselves."""
    api: Literal["openai", "native"] = "openai"
    """`openai`: POST {url}/v1/chat/completions (SGLang, vLLM, any OpenAI-compatible server).
    `native`: render the judge prompt here and POST {url}/generate (SGLang's native API, the embedded engine)."""
    model: str = "default"
    """Model name sent to an OpenAI-compatible judge."""
    api_key: SecretStr = SecretStr("")
    """Bearer key for the judge endpoint, if it needs one."""
    tokenizer_path: Path | None = None
    """`native` only: local tokenizer + chat template of the judge model. None: the policy's."""
    temperature: float = Field(0.6, ge=0, le=2)
    """Sampling temperature of each vote (the reference's 0.6)."""
    prm_max_tokens: int = Field(4096, ge=16)
    """Most tokens a PRM vote may write."""
    hint_max_tokens: int = Field(8192, ge=16)
    """Most tokens a hint vote may write."""
    timeout_s: float = Field(120.0, gt=0)
    """Upper bound on one vote; a vote that times out counts as no vote."""
    max_concurrency: int = Field(8, ge=1, le=4096)
    """Votes one judge worker process has in flight at the judge endpoint; more wait their turn (its own budget,
    apart from the policy's and the teacher's)."""
    vision: bool = False
    """The endpoint accepts images (OpenAI `image_url` content): GUI step votes get the screenshots; else the page's
    element listing. `openai` api only; the judge worker reads the PNGs from the data directory."""


class TeacherSettings(BaseModel):
    """A frozen teacher that scores the response under the hint-enhanced context (the reference's choice).

    It must share the policy's tokenizer: its log-probs are compared with the rollout's token by token.
    """

    url: str
    """Base URL of the teacher server (an SGLang server or router, or an embedded engine)."""
    api: Literal["native"] = "native"
    """SGLang's native API: POST {url}/generate with return_logprob and logprob_start_len, the log-probs of the
    given token ids. An OpenAI-compatible /v1/completions (echo + logprobs) is not offered: servers differ in how
    they tokenize and scale prompt log-probs (none applies the sampling temperature), so the teacher term would
    not compare like with like."""
    api_key: SecretStr = SecretStr("")
    """Bearer key for the teacher endpoint, if it needs one."""
    max_concurrency: int = Field(8, ge=1, le=4096)
    """Scoring calls one policy worker process has in flight at the teacher; more wait their turn."""
    timeout_s: float = Field(300.0, gt=0)
    """Upper bound on one scoring call."""
    max_attempts: int = Field(4, ge=1, le=20)
    """Tries per call when the failure can succeed on retry (connection errors, timeouts, 5xx)."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"learning.teacher.url must be an http(s) URL, got {value!r}")
        return value.rstrip("/")


class LearningSettings(BaseModel):
    """How next-state signals become training samples (paper section 4)."""

    enabled: bool = True
    """Judge paired turns and publish samples. False: serve and record only."""
    method: Literal["binary", "opd", "combined"] = "combined"
    """binary RL, hindsight-guided OPD, or both (the paper's best)."""
    w_binary: float = 1.0
    """Weight of the scalar reward in the combined advantage."""
    w_opd: float = 1.0
    """Weight of the teacher-minus-rollout log-prob term."""
    prm_votes: int | None = Field(None, ge=1, le=16)
    """Parallel PRM votes per turn. None: 3 for binary, 1 for combined (the reference)."""
    hint_votes: int = Field(1, ge=1, le=16)
    """Parallel hint votes per turn (OPD and combined)."""
    judge: HeuristicJudgeSettings | LlmJudgeSettings | None = Field(None, discriminator="type")
    """None: `heuristic` when the policy is the built-in tiny model (an LLM judge over noise yields no signal),
    else `llm` on the policy servers."""
    teacher: TeacherSettings | None = None
    """A frozen teacher server. None: the current policy scores its own answer under the hint (the paper). The
    older `teacher_url = "..."` is read as `teacher.url`."""
    vote_timeout_s: float = Field(180.0, gt=0)
    """Upper bound on one vote activity attempt (judge worker liveness)."""
    source: str = "personal"
    """Sample stream of the personal agent (general agents publish to their own)."""

    @model_validator(mode="before")
    @classmethod
    def _teacher_url_is_teacher(cls, data: Any) -> Any:
        """Config files and env vars written before `teacher` existed name only `teacher_url`."""
        if not isinstance(data, dict) or "teacher_url" not in data:
            return data
        data = dict(data)
        url = data.pop("teacher_url")
        if data.get("teacher") is not None:
            raise ValueError("set learning.teacher.url or the older learning.teacher_url, not both")
        if url:
            data["teacher"] = {"url": url}
        return data

    def votes_for_prm(self) -> int:
        return self.prm_votes or (3 if self.method == "binary" else 1)


class LoraSettings(BaseModel):
    """Low-rank adapters instead of full fine-tuning (torch backend): a single consumer GPU can train a 4-8B policy."""

    enabled: bool = False
    """Train adapters (the base frozen) instead of every weight."""
    rank: int = Field(16, ge=1, le=1024)
    """The adapters' rank r: parameters per adapted matrix r x (in + out)."""
    alpha: int = Field(32, ge=1)
    """LoRA's scale numerator: the adapter's update is multiplied by alpha / rank."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the adapters' input while training."""
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    """Every attention and MLP projection by default."""


class WeightSyncSettings(BaseModel):
    """How a new policy version reaches the servers (SGLang's weight-update routes)."""

    mode: Literal["auto", "memory", "disk", "distributed"] = "auto"
    """How a version reaches the servers (never waiting for a durable checkpoint). memory: handed over from the
    trainer's memory in the served dtype (`/update_weights_from_tensor`: shared memory from a CPU trainer, CUDA IPC
    handles on one GPU), for servers on the trainer's machine (the embedded engines). distributed: broadcast over a
    process group (`/init_weights_update_group` + `/update_weights_from_distributed`), for servers elsewhere. disk:
    the weights alone, in the served dtype, written to `checkpoints/serve/v<version>` and loaded by every server
    (`/update_weights_from_disk`). auto: memory for the embedded engines, else disk. memory and distributed fall
    back to disk on any failure."""
    backend: Literal["auto", "nccl", "gloo"] = "auto"
    """Process-group backend: auto is nccl when the trainer and servers have CUDA, gloo on CPU."""
    bucket_mb: float = Field(256.0, gt=0)
    """Tensors are broadcast in buckets of about this many MiB (one update call per bucket)."""
    wire_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """The dtype floating-point weights travel in. auto: bfloat16 when the trainer trains in bf16 on CUDA (the
    servers serve bf16 there and would round to it anyway: the same values, half the bytes of fp32 weights), else the
    weights' own dtype. float32 for servers that serve fp32."""
    master_addr: str = LOOPBACK
    """Address of the trainer as the servers reach it (the group's rendezvous)."""
    master_port: int | None = Field(None, ge=1, le=65535)
    """Rendezvous port; None: a free port picked when the group is set up."""
    timeout_s: float = Field(120.0, gt=0)
    """Upper bound on setting the group up and on one bucket's broadcast; past it the update falls back to disk."""


class MegatronSettings(BaseModel):
    """The megatron backend's parallel layout (training.backend = megatron): more than one process runs as a
    torchrun job the trainer pool starts, drives and ends; with nnodes > 1 the pool's node is node 0 and every other
    node runs `openclaw-rl megatron-node`. Ranks are laid out as megatron's: tensor parallel innermost, then data,
    then pipeline stages."""

    tensor_parallel: int = Field(1, ge=1)
    """Tensor-parallel size (megatron's --tensor-model-parallel-size)."""
    pipeline_parallel: int = Field(1, ge=1)
    """Pipeline-parallel size (--pipeline-model-parallel-size): stages of an equal number of layers (it must divide
    the model's layers); a step runs GPipe over the micro-batches (training.micro_batch_tokens)."""
    nproc_per_node: int = Field(1, ge=1)
    """Processes (GPUs) per node; world size = nproc_per_node x nnodes = TP x PP x DP."""
    nnodes: int = Field(1, ge=1)
    """Nodes of the torchrun job."""
    node_rank: int = Field(0, ge=0)
    """This node's rank in the job: 0 where the trainer pool runs, 1..nnodes-1 for each `megatron-node`."""
    master_addr: str = LOOPBACK
    """torchrun's rendezvous host (node 0)."""
    master_port: int | None = Field(None, ge=1, le=65535)
    """torchrun's rendezvous port; None: a free one (single node only)."""
    distributed_optimizer: bool = True
    """megatron's distributed optimizer (optimizer state sharded over data-parallel ranks)."""

    @model_validator(mode="after")
    def _layout_fits(self) -> "MegatronSettings":
        world = self.nproc_per_node * self.nnodes
        if world % (self.tensor_parallel * self.pipeline_parallel):
            raise ValueError(
                f"world size {world} (nproc_per_node x nnodes) is not a multiple of tensor_parallel x "
                f"pipeline_parallel = {self.tensor_parallel * self.pipeline_parallel}"
            )
        if self.nnodes > 1 and self.master_port is None:
            raise ValueError("a multi-node megatron job needs training.megatron.master_port (every node must agree)")
        return self


class StreamSettings(BaseModel):
    """How one sample stream trains, where the streams differ (the paper: personal agents without a KL term,
    general agents with 0.01)."""

    kl_coef: float | None = Field(None, ge=0)
    """k3 KL to the initial policy for this stream's samples; None: `training.kl_coef`."""
    advantage_scale: float = Field(1.0, ge=0)
    """This stream's advantages are multiplied by it: its weight beside the others in a mixed batch."""


GENERAL_AGENT_STREAMS = ("terminal", "toolcall", "swe", "gui")
GENERAL_AGENT_KL = 0.01
"""The paper's KL coefficient for general-agent streams (a plugin setting's stream takes it too)."""


class CheckpointSettings(BaseModel):
    """When durable checkpoints are written and how much disk they may take.

    A version is published from the trainer's memory; a durable checkpoint holds everything a restarted trainer
    resumes from. A sample counts as trained once a durable checkpoint that contains it exists: after a crash the
    samples trained since the last one are trained again (never lost, never counted twice)."""

    every_versions: int = Field(20, ge=1)
    """A durable checkpoint at least every this many versions..."""
    every_s: float = Field(900.0, gt=0)
    """...and once this many seconds have passed since the last one (whichever comes first). A checkpoint of a 1.7B
    model with AdamW state is ~20 GB: every 15 minutes is a small share of a disk's bandwidth, and a crash re-trains
    at most that much."""
    keep: int = Field(2, ge=1)
    """Durable checkpoints kept (the newest ones; a checkpoint saved on request is kept for good). `keep_versions`
    is read as this."""
    budget_gb: float | None = Field(None, gt=0)
    """Most disk the durable checkpoints may take together; older ones are pruned to fit the next. None: what the
    data disk has, less `disk_reserve_gb`."""
    disk_reserve_gb: float = Field(2.0, ge=0)
    """Disk left free for everything else on the data disk (the store's append-only file, Temporal's database,
    logs): a checkpoint that would eat into it is not written, and training pauses with the reason."""


class TrainingSettings(BaseModel):
    """The training workflow: batches from the sample streams, train steps, weight publication."""

    batch_size: int = Field(16, ge=1, le=4096)
    """Samples per optimizer step (the reference: one step per 16 samples)."""
    backend: Literal["torch", "megatron"] = "torch"
    """torch: Hugging Face model, CPU or one GPU. megatron: megatron-core GPTModel (the `megatron` extra), in the
    trainer pool's process for one device, or a torchrun job with tensor and data parallelism (training.megatron)."""
    source_weights: dict[str, float] = Field(default_factory=lambda: {"personal": 1.0})
    """Sample streams drained, and each one's share of a batch."""
    lr: float = Field(1e-5, gt=0)
    """AdamW learning rate (paper: 1e-5 personal, 1e-6 general agents)."""
    kl_coef: float = Field(0.0, ge=0)
    """k3 KL to the frozen initial policy, for streams `streams` does not set (0 in the reference's personal
    scripts)."""
    streams: dict[str, StreamSettings] = Field(
        default_factory=lambda: {s: StreamSettings(kl_coef=GENERAL_AGENT_KL) for s in GENERAL_AGENT_STREAMS}
    )
    """Per sample stream: its KL coefficient and advantage scale. Default: the paper's 0.01 KL for the general-agent
    settings; personal samples take `kl_coef` (0). A frozen copy of the initial policy is held only when a stream
    that is trained (`source_weights`) has a KL term."""
    entropy_coef: float = Field(0.0, ge=0)
    """Weight of the entropy bonus in the loss (0: the entropy is only a metric, estimated on a few positions)."""
    clip_low: float = Field(0.2, gt=0, lt=1)
    """PPO clipping below: a token's ratio counts down to 1 - clip_low (the paper: 0.2)."""
    clip_high: float = Field(0.28, gt=0)
    """PPO clipping above, decoupled (the paper: 0.28): a token's ratio counts up to 1 + clip_high."""
    tis_cap: float | None = Field(None, ge=1)
    """Truncated importance sampling: weight each token by min(pi_train / pi_rollout, cap) and clip around the
    trainer's own log-probs. None (the reference's default): the rollout log-probs are the old policy."""
    micro_batch_tokens: int = Field(8192, ge=16)
    """Tokens per forward/backward; larger batches are accumulated."""
    compile: bool | None = None
    """torch.compile each decoder layer (torch backend): the layers' elementwise work fused (1.21x a 1.7B step on a
    GPU), for a first step that waits for the compilation (15-20 s there) and an occasional recompile for a new
    shape of batch. None: on CUDA only."""
    pack_samples: bool = True
    """Run a micro-batch's samples one after another in one row, each attending only to itself (torch backend): no
    padding, so short and long answers together cost their tokens, not their count times the longest."""
    activation_checkpointing: bool = False
    """Recompute each layer's activations in the backward instead of keeping them (torch backend): long samples and
    larger models fit (a 4B model beside its engine on one 80 GB GPU), for about a third more compute per step."""
    optimizer_offload: bool = False
    """Keep AdamW's state in CPU memory between steps, on the GPU only for the update itself (torch backend): the
    trainer then holds only its weights on the GPU while the engine serves."""
    engine_memory_during_step: Literal["keep", "kv_cache", "all"] = "keep"
    """For a trainer sharing its GPU with the embedded engine (a 4B model on one 80 GB GPU): what the engine gives
    back while a train step runs (`/release_memory_occupation`) and takes again right after. kv_cache: its KV and
    prefix caches; all: its weights too (kept in CPU memory). Generation waits meanwhile (requests queue, none is
    refused), so keep is the default: serving then never waits for training."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """bf16: mixed precision (bf16 autocast over fp32 weights and optimizer state). auto: bf16 on CUDA, fp32 on
    CPU."""
    max_staleness: int = Field(4, ge=0)
    """Samples generated more than this many versions ago are dropped (and counted)."""
    checkpoint: CheckpointSettings = Field(default_factory=CheckpointSettings)
    """Durable checkpoints (weights, optimizer and trainer state): a new version never waits for one."""
    steps_per_run: int = Field(50, ge=1)
    """Train steps per workflow run before it continues as new."""
    wait_s: float = Field(20.0, gt=0)
    """How long one claim waits for samples before the workflow checks its signals again."""
    auto_start: bool = True
    """`up` starts the policy's TrainingWorkflow (the loop closes by itself)."""
    heartbeat_timeout_s: float = Field(30.0, gt=0)
    """A train step, weight publication or checkpoint export that stops heartbeating this long is retried (a step
    from the last checkpoint)."""
    weight_sync: WeightSyncSettings = Field(default_factory=WeightSyncSettings)
    """How each new version reaches the policy servers."""
    megatron: MegatronSettings = Field(default_factory=MegatronSettings)
    """Parallel layout of the megatron backend."""
    lora: LoraSettings = Field(default_factory=LoraSettings)
    """Each version then holds the merged weights (what the servers load) and the adapter (`adapter/`)."""
    adapters: Literal["shared", "per_user"] = "shared"
    """shared: every user's samples train one policy (the paper's personal agent is one person's). per_user: each
    user's samples train that user's own LoRA adapter on the shared, frozen base (trainers/user_adapters.py, one
    trainer scheduling users in turn); each version publishes the adapters that changed to every policy server
    (`/load_lora_adapter`) and the user's turns are served by theirs. Needs `lora.enabled` and personal samples
    only."""

    @model_validator(mode="before")
    @classmethod
    def _keep_versions_is_checkpoint_keep(cls, data: Any) -> Any:
        """Settings written before durable checkpoints had a cadence name `keep_versions`."""
        if not isinstance(data, dict) or "keep_versions" not in data:
            return data
        data = dict(data)
        keep = data.pop("keep_versions")
        checkpoint = dict(data.get("checkpoint") or {})
        if "keep" in checkpoint:
            raise ValueError("set training.checkpoint.keep or the older training.keep_versions, not both")
        data["checkpoint"] = {**checkpoint, "keep": keep}
        return data

    @model_validator(mode="after")
    def _lora_needs_torch(self) -> "TrainingSettings":
        if self.lora.enabled and self.backend != "torch":
            raise ValueError("training.lora applies to the torch backend; megatron trains every weight")
        if self.adapters == "per_user":
            if not self.lora.enabled:
                raise ValueError("training.adapters = per_user trains LoRA adapters: set training.lora.enabled")
            others = sorted(s for s in self.source_weights if s != "personal")
            if others:
                raise ValueError(
                    f"training.adapters = per_user trains users' own samples only; drop {others} from "
                    "training.source_weights"
                )
        return self


class SandboxLimits(BaseModel):
    """Limits of every command an agent runs (envs.sandbox)."""

    memory_mb: int = Field(2048, ge=64)
    """Address space of every process (RLIMIT_AS): a larger allocation fails inside the sandbox."""
    processes: int = Field(128, ge=8)
    """Processes and threads of the sandbox's uid at once (RLIMIT_NPROC): a fork bomb stops here."""
    cpu_s: int = Field(60, ge=1)
    """CPU seconds per process (RLIMIT_CPU)."""
    file_size_mb: int = Field(256, ge=1)
    """Largest file a process may write (RLIMIT_FSIZE), captured output included."""
    workspace_disk_mb: int = Field(1024, ge=1)
    """Bytes one workspace may hold, all files together (and the size of its private /tmp, a tmpfs in bwrap mode).
    Measured while a command runs and after it: past it the command is killed, the files it wrote are removed
    (largest first) until the workspace is back under, and the command fails with the reason; the episode goes on."""
    disk_mb: int = Field(16384, ge=1)
    """Bytes all of this env worker's workspaces may hold together; a command that takes them past it is stopped
    the same way."""
    disk_reserve_mb: int = Field(512, ge=0)
    """Free space kept on the workspaces' file system: a command that writes while less is free is stopped the
    same way (this guards the machine against every worker on it together)."""
    wall_s: float = Field(30.0, gt=0)
    """Wall-clock limit of one command; past it the whole process tree is killed."""
    output_chars: int = Field(16_000, ge=256)
    """Characters of stdout and of stderr kept per command (head and tail; the middle is elided)."""


class SandboxSettings(BaseModel):
    mode: Literal["bwrap", "unsandboxed"] = "bwrap"
    """bwrap: bubblewrap namespaces per command (the env pool refuses to start without them). unsandboxed: commands
    run as this user with rlimits only; only for machines without namespaces, and only when asked for."""
    root: Path = Path("/tmp/openclaw-rl-sandboxes")
    """Where episode workspaces live; every sandbox uid must be able to traverse its parents."""
    limits: SandboxLimits = Field(default_factory=SandboxLimits)


class AgentSettingConfig(BaseModel):
    """One general-agent setting (terminal, toolcall): its episodes and how they are judged."""

    max_steps: int = Field(10, ge=1, le=200)
    """Policy steps per episode (paper: terminal 10, SWE 20, GUI 30; tool-call 16 in the reference)."""
    samples_per_task: int = Field(8, ge=1, le=64)
    """Episodes per task group (the paper: 8)."""
    prm_votes: int = Field(1, ge=0, le=16)
    """PRM votes per step (paper: 1; GUI 3). 0: outcome-only rewards."""
    temperature: float = Field(1.0, ge=0)
    """The policy's sampling temperature in these episodes (log-probs are scored at it)."""
    max_tokens: int = Field(1024, ge=1)
    """Most tokens the policy writes in one step."""
    task_dirs: list[Path] = Field(default_factory=list)
    """Extra task folders (terminal: Terminal-Bench/Harbor layout) beside the shipped ones."""


class ToolCallSettingConfig(AgentSettingConfig):
    """The toolcall setting (envs.toolcall): generated math problems with a python tool, and BFCL v4 entries."""

    # Defaults on the class, not in EnvsSettings' factory: settings given in the environment build the model from
    # its own defaults.
    max_steps: int = Field(16, ge=1, le=200)

    math_count: int = Field(200, ge=0, le=100_000)
    """Generated math problems served (`math/0` ... `math/<math_count - 1>`, the same on every machine)."""
    bfcl: bool = True
    """Serve BFCL v4 multi-turn entries too (`bfcl/<id>`; needs the bfcl-eval package)."""
    tool_bonus: float = Field(0.0, ge=0.0, lt=1.0)
    """Math: the outcome of a wrong answer after at least one python run (the reference's shaping; 0: plain 1/0)."""


class SweSettingConfig(AgentSettingConfig):
    """The swe setting (envs.swe): task_dirs holds SWE-bench-style instance files (*.jsonl) or folders of them."""

    max_steps: int = Field(20, ge=1, le=200)


class GuiSettingConfig(AgentSettingConfig):
    """The gui setting (envs.gui): MiniWoB++ pages in the env worker's headless Chromium."""

    max_steps: int = Field(30, ge=1, le=200)
    prm_votes: int = Field(3, ge=0, le=16)
    """The paper: 3 votes a GUI step."""

    time_limit_s: float = Field(600.0, gt=0)
    """The least time an episode gets on the task's own timer (MiniWoB++ tasks allow 7-30 s, meant for people)."""
    settle_s: float = Field(0.3, ge=0, le=10)
    """Pause after each action before the page is read again (animations, event handlers)."""
    tree_chars: int = Field(6000, ge=200)
    """Most characters of the page's element listing the agent reads per state."""
    chromium: str = "chromium"
    """The browser: a name on PATH or a path (Debian's `chromium`)."""
    chromedriver: str = "chromedriver"
    """Its driver, same version (Debian's `chromium-driver`)."""


PLUGIN_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
"""What a plugin setting may be called: it names episodes, task ids' setting and a sample stream."""


class PluginSettingConfig(AgentSettingConfig):
    """A setting an environment plugin brings (`envs.plugins`): the keys every setting has, its factory when the
    settings name it, and the plugin's own keys (passed to the factory as `PluginContext.options`)."""

    model_config = ConfigDict(extra="allow")

    factory: str | None = None
    """`module:attribute` of the plugin's factory; None: an installed entry point (group `openclaw_rl.envs`)."""


class ClientEpisodeSettings(BaseModel):
    """Episodes an outside agent drives through the API (`POST /v1/episodes`): its model calls, tools and end."""

    enabled: bool = True
    """Let outside agents open episodes (`POST /v1/episodes`); off: 403 with the reason."""
    idle_timeout_s: float = Field(600.0, gt=0, le=86_400)
    """An episode with no call from its client for this long is abandoned: it fails and trains nothing."""
    max_steps: int = Field(50, ge=1, le=200)
    """Model calls per free-form episode (a task episode has its setting's limit)."""
    max_group: int = Field(16, ge=1, le=64)
    """Episodes one request may open together (a group: standardised together, as the paper's 8 per task)."""
    outcome_min: float = 0.0
    """The lowest outcome a client may post for a free-form episode."""
    outcome_max: float = 1.0
    """The bounds of an outcome a client posts for a free-form episode."""
    prm_votes: int = Field(1, ge=0, le=16)
    """PRM votes per step of a free-form episode (a task episode has its setting's)."""

    @model_validator(mode="after")
    def _bounds(self) -> "ClientEpisodeSettings":
        if not self.outcome_min < self.outcome_max:
            raise ValueError(f"outcome_min ({self.outcome_min}) must be below outcome_max ({self.outcome_max})")
        return self


class EnvsSettings(BaseModel):
    """General-agent episodes: the env pool, its sandbox, and each setting."""

    client: ClientEpisodeSettings = Field(default_factory=ClientEpisodeSettings)
    """Episodes driven by outside agents through the API."""

    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    terminal: AgentSettingConfig = Field(default_factory=lambda: AgentSettingConfig(max_steps=10))
    toolcall: ToolCallSettingConfig = Field(default_factory=ToolCallSettingConfig)
    swe: SweSettingConfig = Field(default_factory=SweSettingConfig)
    gui: GuiSettingConfig = Field(default_factory=GuiSettingConfig)
    """GUI (envs.gui): MiniWoB++ tasks in headless Chromium (the paper: 30 steps, 3 votes a step)."""
    envs_per_worker: int = Field(16, ge=1, le=4096)
    """Environments one env worker holds at once; a full worker stops taking new episodes (the others take them)."""
    episode_attempts: int = Field(3, ge=1, le=10)
    """An episode whose env worker is lost restarts from the beginning on another worker, this many times in all."""
    env_lost_after_s: float = Field(30.0, gt=0)
    """A step not picked up or not heartbeating this long means its env worker is gone."""
    step_timeout_s: float = Field(600.0, gt=0)
    """Upper bound on one env step (a step runs its commands one by one, each with the sandbox's wall limit)."""
    plugins: dict[str, PluginSettingConfig] = Field(default_factory=dict)
    """Settings that environment plugins bring, by name (`[envs.plugins.<name>]`): an installed plugin's own
    settings, or `factory = "module:attribute"` for one that is not installed as an entry point (envs.plugins)."""

    @field_validator("plugins")
    @classmethod
    def _plugin_names(cls, plugins: dict[str, PluginSettingConfig]) -> dict[str, PluginSettingConfig]:
        for name in plugins:
            if not PLUGIN_NAME.fullmatch(name):
                raise ValueError(f"plugin setting {name!r}: a name is lowercase letters, digits and _ (at most 32)")
            if name in GENERAL_AGENT_STREAMS:
                raise ValueError(f"plugin setting {name!r}: that is a built-in setting's name")
        return plugins

    def builtin(self) -> list[str]:
        # Every built-in setting is a field of its own config type, so a new one needs no change here.
        return [k for k, v in self.__dict__.items() if isinstance(v, AgentSettingConfig)]

    def setting(self, name: str) -> AgentSettingConfig:
        """A built-in setting's config, or a plugin's (`envs.plugins`; its defaults when it has none there)."""
        cfg = getattr(self, name, None) if not name.startswith("_") else None
        if isinstance(cfg, AgentSettingConfig):
            return cfg
        if PLUGIN_NAME.fullmatch(name) and name not in self.builtin():
            return self.plugin(name)
        raise ValueError(f"unknown agent setting {name!r}: one of {', '.join(self.builtin())} or a plugin's")

    def plugin(self, name: str) -> PluginSettingConfig:
        return self.plugins.get(name) or PluginSettingConfig()


class TemporalSettings(BaseModel):
    address: str | None = Field(None, validation_alias=AliasChoices("address", "TEMPORAL_ADDRESS"))
    """An existing Temporal cluster (host:port). None: `up` starts the embedded dev server."""
    namespace: str = "default"
    """Temporal namespace for every workflow of the system."""
    port: int = Field(7233, ge=1, le=65535)
    """gRPC port of the embedded dev server."""
    ui_port: int = Field(8233, ge=1, le=65535)
    """Web UI port of the embedded dev server."""
    headless: bool = False
    """Start the embedded dev server without its Web UI."""
    task_queue_prefix: str = "openclaw-rl"
    """Task queues are named <prefix>-<pool>."""
    worker_pollers: int = Field(20, ge=2, le=200)
    """Long polls each worker keeps open per task kind (workflow, activity). A task that finds no poll waiting is
    written to the task queue's table and read back later; with the SDK's 5, 16 chat sessions at once had one task
    per turn go that way (chat benchmark: p50 925 -> 749 ms at 20). An open poll costs nothing but a connection."""
    api_key: SecretStr = Field(SecretStr(""), validation_alias=AliasChoices("api_key", "TEMPORAL_API_KEY"))
    """Temporal Cloud (or a cluster behind an API-key proxy): sent as `Authorization: Bearer`; turns TLS on."""
    tls: bool = False
    """Connect with TLS (system roots unless `tls_ca_path`); on by itself when a key or a client certificate is set."""
    tls_ca_path: Path | None = None
    """PEM of the CA that signed the server's certificate (a self-hosted cluster's own CA)."""
    tls_cert_path: Path | None = None
    """PEM client certificate for mTLS (Temporal Cloud's certificate auth, or a cluster that requires it)."""
    tls_key_path: Path | None = None
    """PEM private key of `tls_cert_path`."""
    tls_server_name: str | None = None
    """The name to verify on the server's certificate, when it differs from the address's host."""
    max_payload_bytes: int = Field(2 * 1024 * 1024, ge=64 * 1024)
    """The largest payload the Temporal server takes (its dynamic config `limit.blobSize.error`, 2 MiB unless the
    cluster sets another). A client-driven episode's call that would travel bigger (a tool's arguments, as encoded,
    encrypted included) gets HTTP 413 from the API before it is sent; Temporal would refuse it with an error."""

    def target(self) -> str:
        return self.address or f"{LOOPBACK}:{self.port}"

    @model_validator(mode="after")
    def _security_needs_a_cluster(self) -> "TemporalSettings":
        if (self.tls_cert_path is None) != (self.tls_key_path is None):
            raise ValueError("temporal.tls_cert_path and tls_key_path go together: set both or neither")
        if self.address is None and self.uses_tls:
            raise ValueError(
                "temporal.tls, api_key and certificates apply to an existing cluster: set temporal.address "
                "(TEMPORAL_ADDRESS); the embedded dev server listens on loopback without TLS"
            )
        return self

    @property
    def uses_tls(self) -> bool:
        return bool(self.tls or self.api_key.get_secret_value() or self.tls_cert_path or self.tls_ca_path)

    @property
    def embedded(self) -> bool:
        return self.address is None

    def task_queue(self, pool: Pool | str) -> str:
        return f"{self.task_queue_prefix}-{Pool(pool).value}"


class RedisSettings(BaseModel):
    url: str | None = Field(None, validation_alias=AliasChoices("url", "REDIS_URL"))
    """An existing Redis-compatible server (redis://host:port/db). None: `up` starts the embedded valkey server."""
    port: int = Field(6379, ge=1, le=65535)
    """Port of the embedded valkey server."""
    appendfsync: Literal["always", "everysec", "no"] = "everysec"
    """fsync policy of the embedded server's append-only file (AOF).

    `everysec` (the default): every write reaches the file (the kernel's page cache) before its reply is sent, and
    the file is fsynced once a second in the background. A crash of the valkey process alone loses no acknowledged
    write, with two exceptions: while a background fsync is slow (a busy disk) valkey holds writes back for up to
    2 s and replies first, and a write answered in the instant a write to a full disk failed lives only in memory
    until a write succeeds again; a crash of the machine (power, kernel) loses the last ~1-2 s of acknowledged writes.
    A full disk makes valkey refuse writes (`MISCONF`: the API answers 503 `storage_full`, reads go on); it retries
    its file every second and accepts writes again once there is room, with nothing restarted.
    `always`: fsync before every reply, so not even a machine crash loses an acknowledged write; but valkey exits on
    the first failed write (a full disk ends the store until it is restarted with room; `up` warns) and every write
    waits for the disk. `no`: the kernel flushes when it likes (about every 30 s on Linux): a machine crash loses
    that much."""
    password: SecretStr = SecretStr("")
    """The embedded server requires it (`requirepass`) and every client sends it; for `url`, used when the URL
    carries no credentials of its own."""
    maxmemory_mb: int = Field(1024, ge=0)
    """Memory limit of the embedded server (0: none). What happens at the limit is `maxmemory_policy`."""
    maxmemory_policy: Literal["noeviction", "volatile-lru", "volatile-ttl"] = "noeviction"
    """At the limit: `noeviction` refuses writes (new turns get a 503 with the reason; reads, training and expiry
    go on and free room) and never drops anything; `volatile-*` drop the oldest expiring data (audit records, old
    turn data) first. No policy here can evict samples waiting for training or API keys: they carry no TTL, and
    the `allkeys-*` policies, which could, are not offered."""
    data_ttl_s: int = Field(30 * 24 * 3600, ge=3600)
    """How long per-turn and per-step data (requests, token data, teacher log-probs, judgements, idempotency keys,
    episode steps, record streams) is kept: longer than any training lag, as long as the audit should reach back."""

    def target(self) -> str:
        """The URL clients connect with, the password in it (show it only through `masking.mask_url`)."""
        url = self.url or f"redis://{LOOPBACK}:{self.port}/0"
        secret = self.password.get_secret_value()
        if not secret:
            return url
        scheme, sep, rest = url.partition("://")
        if not sep or "@" in rest.split("/", 1)[0]:
            return url  # the URL's own credentials win
        return f"{scheme}://:{quote(secret, safe='')}@{rest}"

    @property
    def embedded(self) -> bool:
        return self.url is None


class EvalSettings(BaseModel):
    """Evaluation of policy versions on held-out sets, on a Temporal Schedule (docs/evaluation.md)."""

    every_versions: int = Field(10, ge=0)
    """Evaluate the newest published version each time versions cross a multiple of N (N, 2N, ... or the first
    version past it). 0: off (`up` then deletes the schedule)."""
    check_every_s: float = Field(300.0, ge=1)
    """How often the schedule looks for a version to evaluate (a version crossed between two checks is evaluated at
    the next)."""
    personalization: list[Literal["student", "teacher"]] = Field(default_factory=lambda: ["student"])
    """The personalization benchmark's held-out problems to evaluate, by setting, with its rule scorer."""
    personalization_problems: int = Field(36, ge=1, le=100)
    """Held-out problems per personalization setting (the benchmark's table uses the first 36)."""
    user_sets: dict[str, Path] = Field(default_factory=dict)
    """Your own evaluation sets: name -> JSONL file (one `{"messages", "expected", "match"}` object a line)."""
    max_tokens: int = Field(256, ge=1)
    """Most tokens of each answer."""
    temperature: float = Field(0.0, ge=0, le=2)
    """Sampling temperature of the answers (0: greedy, the same answers for the same weights)."""
    concurrency: int = Field(8, ge=1, le=256)
    """Answers generated at once (the engine batches them), and episodes of an episode set running at once."""
    episodes: list[str] = Field(default_factory=list)
    """General-agent settings whose held-out tasks run as episodes (`episodes-<setting>`): `terminal` (the agents
    benchmark's counting tasks, count-0600 on), `toolcall` (its math problems, math/2400 on) or any setting named in
    `held_out_tasks`. Off by default: they hold sandboxes and the engine for whole episodes."""
    episode_tasks: int = Field(8, ge=1, le=1000)
    """Held-out tasks per episode set (the first ones of the setting's split)."""
    episode_samples: int = Field(1, ge=1, le=64)
    """Episodes per held-out task (at the setting's sampling temperature)."""
    held_out_tasks: dict[str, list[str]] = Field(default_factory=dict)
    """A setting's held-out task ids, in place of its built-in split (or for a setting without one)."""

    @field_validator("user_sets")
    @classmethod
    def _set_names(cls, sets: dict[str, Path]) -> dict[str, Path]:
        for name in sets:
            if not EVAL_SET_NAME.fullmatch(name):
                raise ValueError(f"eval set {name!r}: a name is lowercase letters, digits, - and _ (at most 40)")
        return sets


EVAL_SET_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
"""What a user's evaluation set may be called: it names TensorBoard tags and a search attribute's value."""


class LogSettings(BaseModel):
    level: Literal["debug", "info", "warning", "error"] = "info"
    """Lowest level printed."""
    json_lines: bool = False
    """One JSON object per line instead of human-readable lines."""


class Settings(BaseSettings):
    """The whole configuration of an OpenClaw-RL deployment."""

    model_config = SettingsConfigDict(
        env_prefix="OPENCLAW_RL_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    data_dir: Path = Field(Path("~/.openclaw-rl"))
    """Where every embedded service keeps its state (SQLite, append-only file, models, logs)."""
    api_key_pepper: SecretStr = SecretStr("")
    """Extra secret mixed into stored API-key hashes."""
    encryption_keys: SecretStr = SecretStr("")
    """Conversation data encrypted at rest (openclaw_rl/encryption.py): `id:base64key[,id:base64key...]`, AES-256
    keys (`openclaw-rl encryption new-key` makes one). The first encrypts every Temporal payload and the user content
    the store keeps; all of them decrypt (rotation: put the new key first, drop an old one once nothing written
    under it is retained). Empty: stored in the clear (`up` says so). Every process must have the same keys."""
    api: ApiSettings = Field(default_factory=ApiSettings)
    engine: EngineSettings = Field(default_factory=EngineSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    router: RouterSettings = Field(default_factory=RouterSettings)
    session: SessionSettings = Field(default_factory=SessionSettings)
    learning: LearningSettings = Field(default_factory=LearningSettings)
    training: TrainingSettings = Field(default_factory=TrainingSettings)
    envs: EnvsSettings = Field(default_factory=EnvsSettings)
    temporal: TemporalSettings = Field(default_factory=TemporalSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)
    """Evaluation of policy versions on a schedule (docs/evaluation.md)."""
    curves: CurvesSettings = Field(default_factory=CurvesSettings)
    """Training's curves: TensorBoard always, Weights & Biases offline as an option."""

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser().absolute()

    @field_validator("encryption_keys")
    @classmethod
    def _keys_parse(cls, value: SecretStr) -> SecretStr:
        from openclaw_rl.encryption import Keyring

        Keyring.parse(value.get_secret_value())  # a malformed keys setting stops start-up, naming the key id
        return value

    def keyring(self):
        """The `Keyring` of `encryption_keys`, or None when encryption at rest is off."""
        from openclaw_rl.encryption import Keyring

        return Keyring.parse(self.encryption_keys.get_secret_value())

    def codec_token(self) -> str | None:
        """The token the codec server requires (`api.codec_token`, else derived from the first encryption key); None
        when encryption at rest is off (no codec server)."""
        keyring = self.keyring()
        if keyring is None:
            return None
        return self.api.codec_token.get_secret_value() or keyring.derive("codec-token")

    def codec_origins(self) -> list[str]:
        """The browser origins the codec server answers (`api.codec_origins`, else the embedded Web UI's)."""
        if self.api.codec_origins is not None:
            return self.api.codec_origins
        port = self.temporal.ui_port
        return [f"http://{LOOPBACK}:{port}", f"http://localhost:{port}"]

    @model_validator(mode="after")
    def _policy_servers_fit(self) -> "Settings":
        if self.policy.router_url and not self.policy.server_urls:
            raise ValueError(
                "policy.router_url needs policy.server_urls: the servers behind the router, each of which must "
                "receive every weight update"
            )
        last = self.engine.port + self.engine.replicas - 1
        if last > 65535:
            raise ValueError(
                f"engine.replicas={self.engine.replicas} from engine.port={self.engine.port} runs past 65535"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, _ConventionalEnv(settings_cls), env_settings]
        config_file = os.environ.get("OPENCLAW_RL_CONFIG")
        if config_file:
            path = Path(config_file).expanduser()
            if not path.is_file():
                raise ConfigError(f"OPENCLAW_RL_CONFIG points at {path}, which is not a readable file")
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    # --- derived paths: one place for the data directory's layout ---
    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def temporal_db(self) -> Path:
        return self.data_dir / "temporal" / "temporal.sqlite"

    @property
    def redis_dir(self) -> Path:
        return self.data_dir / "redis"

    @property
    def tiny_model_dir(self) -> Path:
        return self.models_dir / "tiny-qwen3"

    def served_model_path(self) -> Path:
        """The checkpoint the embedded engine serves."""
        return self.engine.model_path.expanduser().absolute() if self.engine.model_path else self.tiny_model_dir

    def policy_urls(self) -> list[str]:
        """The policy servers, each of which must receive every weight update: the configured SGLang servers, or
        the embedded engines."""
        return [u.rstrip("/") for u in self.policy.server_urls] or self.engine_urls()

    def engine_urls(self) -> list[str]:
        """The embedded engines `up` starts, one per replica on consecutive ports."""
        host = _connect_host(self.engine.host)
        return [f"http://{host}:{port}" for port in self.engine_ports()]

    def engine_ports(self) -> list[int]:
        return [self.engine.port + i for i in range(self.engine.replicas)]

    def traffic_urls(self) -> list[str]:
        """Where generation, teacher and judge calls go: the router when there is one, else the servers."""
        if self.policy.router_url:
            return [self.policy.router_url.rstrip("/")]
        if self.embedded_router:
            return [self.embedded_router_url()]
        return self.policy_urls()

    def embedded_router_url(self) -> str:
        return f"http://{LOOPBACK}:{self.router.port}"

    @property
    def embedded_engine(self) -> bool:
        return not self.policy.server_urls

    @property
    def embedded_router(self) -> bool:
        """`up` starts the sglang-router in front of several embedded engines."""
        return self.embedded_engine and self.engine.replicas > 1

    def policy_api_key(self) -> SecretStr:
        """The key the policy servers in `policy_urls()` expect: the embedded engine's own, or the configured one."""
        return self.engine.api_key if self.embedded_engine else self.policy.api_key

    def engine_weight_roots(self, served: Path) -> list[Path]:
        """Folders the engine serving `served` may load weight updates from (see `engine.weight_roots`).

        The checkpoints folder is named beside the data directory because roots are compared after resolving
        symlinks: a checkpoints folder linked to another disk stays allowed.
        """
        if self.engine.weight_roots is not None:
            return [p.expanduser().absolute() for p in self.engine.weight_roots]
        return [self.data_dir, self.checkpoints_dir, Path(served).expanduser().absolute()]

    def tokenizer_path(self) -> Path:
        if self.policy.tokenizer_path:
            return self.policy.tokenizer_path.expanduser().absolute()
        return self.served_model_path()

    def judge(self) -> HeuristicJudgeSettings | LlmJudgeSettings:
        """The judge in use: the configured one, else chosen from the policy (see `learning.judge`)."""
        if self.learning.judge is not None:
            return self.learning.judge
        if self.embedded_engine and (self.served_model_path() / "openclaw-rl-tiny.json").is_file():
            return HeuristicJudgeSettings()
        return LlmJudgeSettings()

    @property
    def checkpoints_dir(self) -> Path:
        return self.data_dir / "checkpoints"

    @property
    def records_dir(self) -> Path:
        return self.data_dir / "records"

    def context_length(self) -> int:
        if self.policy.context_length:
            return self.policy.context_length
        if self.embedded_engine:
            return self.engine.max_total_tokens
        try:
            config = json.loads((self.tokenizer_path() / "config.json").read_text())
            return int(config["max_position_embeddings"])
        except (OSError, ValueError, KeyError, TypeError):
            return self.engine.max_total_tokens

    def masked(self) -> dict[str, Any]:
        """Effective settings as plain data, secrets masked, for `openclaw-rl config`.

        SecretStr fields dump as the mask already; credentials inside URL-valued fields (user:password@ and
        secret-named query parameters) are masked wherever they are, so a new URL field needs no entry here.
        """
        data = mask_urls(self.model_dump(mode="json"))
        address = data["temporal"]["address"]
        if address:  # host:port without a scheme, which mask_urls does not recognise as a URL
            data["temporal"]["address"] = mask_url(address)
        return data


class ConfigError(ValueError):
    """Settings that cannot describe a working deployment."""


class _ConventionalEnv(PydanticBaseSettingsSource):
    """TEMPORAL_ADDRESS and REDIS_URL: the names every Temporal/Redis user already sets."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover - unused
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if os.environ.get("TEMPORAL_ADDRESS"):
            out["temporal"] = {"address": os.environ["TEMPORAL_ADDRESS"]}
        if os.environ.get("REDIS_URL"):
            out["redis"] = {"url": os.environ["REDIS_URL"]}
        return out


def _connect_host(bind_host: str) -> str:
    return LOOPBACK if bind_host in ("0.0.0.0", "::", "") else bind_host


def load_settings(**overrides: Any) -> Settings:
    return Settings(**overrides)
