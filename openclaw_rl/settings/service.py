"""The services every process reaches: the API, Temporal, the store, metrics, curves and logs; the worker pools."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import AliasChoices, BaseModel, Field, SecretStr, field_validator, model_validator

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
    backlog_interval_s: float = Field(15.0, ge=1.0, le=600.0)
    """How often each worker process reads its pool's task-queue backlog from Temporal (DescribeTaskQueue, one
    call per task type) for `openclaw_task_queue_backlog` and its siblings (workers.backlog): the autoscalers'
    signal. Only while the pool serves metrics (`port_base` set)."""

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


class FairnessSettings(BaseModel):
    """Fair shares of the task queues (contracts.priorities): each user's chat and judging carries their pseudonym as
    Temporal's fairness key, each rollout's episodes the rollout's id, so one user's flood or one big rollout takes
    its share of a backlogged queue, not all of it. Needs a server with fairness on (`up`'s dev server has it;
    Temporal Cloud: the namespace's setting)."""

    enabled: bool = True
    """Send fairness keys. Off: every task of a rank shares one key, first come, first served (the comparison
    `openclaw-rl bench fairness` makes). Priority ranks are sent either way."""
    default_weight: float = Field(1.0, ge=0.001, le=1000.0)
    """A key's share of a backlogged queue, relative to the others' (the server clamps weights to 0.001..1000)."""
    weights: dict[str, float] = Field(default_factory=dict)
    """User id (or its pseudonym, as the OpenclawUser search attribute shows it) -> weight, for users who get more
    (or less) than `default_weight`. There are no plans in this system yet: a plan is a list of its users here."""

    def weight_of(self, *names: str) -> float:
        """The first of `names` (a user id, then its pseudonym) that has a weight, else the default."""
        return next((self.weights[n] for n in names if n in self.weights), self.default_weight)


class WorkerVersioningSettings(BaseModel):
    """Temporal Worker Versioning for the workflow pool (docs/operations.md, "Rolling out a new build")."""

    enabled: bool | None = None
    """The workflow worker polls as a version of a Worker Deployment: sessions, episodes and task groups stay on the
    build that started them (Pinned) until they end; the training, canary and rollout workflows move to the current
    build at their next continue-as-new. Off: one unversioned pool, whose new code must replay every open history.
    None: on with the embedded dev server, off with a cluster of your own (`temporal.address`; turn it on once the
    cluster has Worker Deployments, Temporal Server 1.28 or later, or Temporal Cloud)."""
    deployment_name: str = Field("openclaw-rl", min_length=1, max_length=200)
    """The Worker Deployment the workflow worker's builds belong to."""
    build_id: str | None = Field(None, min_length=1, max_length=200)
    """This build's id. None: derived from the workflow code (workflows/ and contracts/), so a build whose workflow
    code differs is a new version by itself and one whose code is the same is not."""
    make_current_on_start: bool | None = None
    """The workflow worker makes its build the current version once it polls (one box: a restart with new code is
    the roll-out, and what was pinned to the build before it moves to it). False where `openclaw-rl deploy promote`
    rolls builds out (a fleet: the new build starts beside the old one, which drains). None: true with the embedded
    dev server, false with a cluster of your own."""


class TemporalSettings(BaseModel):
    address: str | None = Field(None, validation_alias=AliasChoices("address", "TEMPORAL_ADDRESS"))
    """An existing Temporal cluster (host:port). None: `up` starts the embedded dev server."""
    namespace: str = "default"
    """Temporal namespace for every workflow of the system."""
    port: int = Field(7233, ge=1, le=65535)
    """gRPC port of the embedded dev server."""
    bind_host: str = LOOPBACK
    """The address the embedded dev server listens on (gRPC and Web UI): loopback, or a host's own address when
    workers on other hosts reach it (it has no auth: only on a private network)."""
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
    fairness: FairnessSettings = Field(default_factory=FairnessSettings)
    versioning: WorkerVersioningSettings = Field(default_factory=WorkerVersioningSettings)
    max_payload_bytes: int = Field(2 * 1024 * 1024, ge=64 * 1024)
    """The largest payload the Temporal server takes (its dynamic config `limit.blobSize.error`, 2 MiB unless the
    cluster sets another). A client-driven episode's call that would travel bigger (a tool's arguments, as encoded,
    encrypted included) gets HTTP 413 from the API before it is sent; Temporal would refuse it with an error."""

    def target(self) -> str:
        return self.address or f"{LOOPBACK}:{self.port}"

    def makes_current_on_start(self) -> bool:
        """Whether the workflow worker makes its own build current as it starts (one box), `versioning`'s default."""
        on = self.versioning.make_current_on_start
        return on if on is not None else self.address is None

    def versioned(self) -> bool:
        """Whether the workflow worker runs under Worker Versioning (`versioning.enabled`, or its default)."""
        return self.versioning.enabled if self.versioning.enabled is not None else self.address is None

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
    """An existing Redis-compatible server (redis://host:port/db, rediss:// for TLS, unix:///path), or a master
    found through Sentinel, which clients follow across a failover:
    `redis+sentinel://[:password@]host1:port1,host2:port2/<master-name>[/<db>]` (the password goes to the master
    and the sentinels alike; docs/operations.md, "Surviving the store's host"). None: `up` starts the embedded
    valkey server."""
    port: int = Field(6379, ge=1, le=65535)
    """Port of the embedded valkey server."""
    bind_host: str = LOOPBACK
    """The address the embedded valkey server listens on: loopback, or a host's own address when processes on
    other hosts reach it (set `password` then)."""
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
    min_replicas_acked: int = Field(0, ge=0, le=16)
    """Replicas that must hold a training sample before its publication counts (valkey's `WAIT` after the write):
    an acknowledged sample then survives a failover to one of them. 0: not waited for; replication is asynchronous
    and a failover loses what the replicas had not received yet. Fewer in `replica_ack_timeout_ms` fails the
    publication as the store being unavailable, and it is retried: with fewer than n replicas reachable, sample
    publication waits until there are n again. A promoted replica has one replica fewer than the master had: run
    n + 1 to go on publishing through a failover (docs/operations.md)."""
    replica_ack_timeout_ms: int = Field(1000, ge=1, le=60_000)
    """How long a sample's publication waits for `min_replicas_acked` replicas."""
    data_ttl_s: int = Field(30 * 24 * 3600, ge=3600)
    """How long per-turn and per-step data (requests, token data, teacher log-probs, judgements, idempotency keys,
    episode steps, record streams) is kept: longer than any training lag, as long as the audit should reach back."""

    @field_validator("url")
    @classmethod
    def _sentinel_url_reads(cls, value: str | None) -> str | None:
        from store.connection import is_sentinel_url, parse_sentinel_url  # here: the settings do not import the store

        if value and is_sentinel_url(value):
            try:
                parse_sentinel_url(value)
            except ValueError as exc:  # said at startup, not at the first call to the store
                raise ValueError(f"redis.url: {exc}") from None
        return value

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


class LogSettings(BaseModel):
    level: Literal["debug", "info", "warning", "error"] = "info"
    """Lowest level printed."""
    json_lines: bool = False
    """One JSON object per line instead of human-readable lines."""
