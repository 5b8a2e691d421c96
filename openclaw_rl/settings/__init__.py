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
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from openclaw_rl.masking import mask_url, mask_urls
from openclaw_rl.settings.envs import (
    PLUGIN_NAME,
    AgentSettingConfig,
    ClientEpisodeSettings,
    EnvsSettings,
    GuiSettingConfig,
    PluginSettingConfig,
    SandboxLimits,
    SandboxSettings,
    SweSettingConfig,
    ToolCallSettingConfig,
)
from openclaw_rl.settings.evaluation import EVAL_SET_NAME, EvalSettings
from openclaw_rl.settings.learning import HeuristicJudgeSettings, LearningSettings, LlmJudgeSettings, TeacherSettings
from openclaw_rl.settings.service import (
    LOOPBACK,
    MASK,
    POOL_METRICS_OFFSET,
    ApiSettings,
    CurvesSettings,
    LogSettings,
    MetricsSettings,
    Pool,
    RedisSettings,
    TemporalSettings,
    WandbSettings,
)
from openclaw_rl.settings.serving import EngineSettings, PolicySettings, RouterSettings, SessionSettings
from openclaw_rl.settings.training import (
    GENERAL_AGENT_KL,
    GENERAL_AGENT_STREAMS,
    CheckpointSettings,
    LoraSettings,
    MegatronSettings,
    MismatchSettings,
    StreamSettings,
    TrainingSettings,
    WeightSyncSettings,
)


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
        if self.eval.canary.enabled:
            if self.training.adapters != "per_user":
                raise ValueError("eval.canary judges each user's adapter versions: set training.adapters = per_user")
            if isinstance(self.judge(), HeuristicJudgeSettings):
                raise ValueError(
                    "eval.canary needs a judge that compares two answers (learning.judge with type llm); without "
                    "one every comparison is a tie and no candidate would ever be promoted"
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


__all__ = [
    "AgentSettingConfig",
    "ApiSettings",
    "CheckpointSettings",
    "ClientEpisodeSettings",
    "ConfigError",
    "CurvesSettings",
    "EVAL_SET_NAME",
    "EngineSettings",
    "EnvsSettings",
    "EvalSettings",
    "GENERAL_AGENT_KL",
    "GENERAL_AGENT_STREAMS",
    "GuiSettingConfig",
    "HeuristicJudgeSettings",
    "LOOPBACK",
    "LearningSettings",
    "LlmJudgeSettings",
    "LogSettings",
    "LoraSettings",
    "MASK",
    "MegatronSettings",
    "MetricsSettings",
    "MismatchSettings",
    "PLUGIN_NAME",
    "POOL_METRICS_OFFSET",
    "PluginSettingConfig",
    "PolicySettings",
    "Pool",
    "RedisSettings",
    "RouterSettings",
    "SandboxLimits",
    "SandboxSettings",
    "SessionSettings",
    "Settings",
    "StreamSettings",
    "SweSettingConfig",
    "TeacherSettings",
    "TemporalSettings",
    "ToolCallSettingConfig",
    "TrainingSettings",
    "WandbSettings",
    "WeightSyncSettings",
    "load_settings",
]
