"""General-agent episodes: the env pool, its sandbox and limits, each setting, episodes driven by outside agents."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from openclaw_rl.settings.training import GENERAL_AGENT_STREAMS


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
