import pytest
from pydantic import ValidationError

from openclaw_rl.settings import ConfigError, Pool, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for key in list(os.environ):
        if key.startswith("OPENCLAW_RL_") or key in ("TEMPORAL_ADDRESS", "REDIS_URL"):
            monkeypatch.delenv(key)


def test_defaults_are_the_documented_ports():
    s = load_settings()
    assert (s.api.port, s.engine.port, s.temporal.port, s.temporal.ui_port) == (8000, 30000, 7233, 8233)
    assert s.temporal.embedded and s.redis.embedded and s.embedded_engine
    assert s.policy_urls() == ["http://127.0.0.1:30000"]
    assert s.temporal.task_queue(Pool.JUDGE) == "openclaw-rl-judge"


def test_env_and_conventional_names_override(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENCLAW_RL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("OPENCLAW_RL_ENGINE__MAX_BATCH_SIZE", "4")
    monkeypatch.setenv("OPENCLAW_RL_POLICY__SERVER_URLS", '["http://gpu:30000/"]')
    monkeypatch.setenv("TEMPORAL_ADDRESS", "temporal.prod:7233")
    monkeypatch.setenv("REDIS_URL", "redis://cache:6379/2")
    s = load_settings()
    assert s.data_dir == tmp_path and s.engine.max_batch_size == 4
    assert s.policy_urls() == ["http://gpu:30000"] and not s.embedded_engine
    assert s.temporal.target() == "temporal.prod:7233" and not s.temporal.embedded
    assert s.redis.target() == "redis://cache:6379/2"


def test_toml_file_is_read_and_env_wins(monkeypatch, tmp_path):
    cfg = tmp_path / "openclaw-rl.toml"
    cfg.write_text("[api]\nport = 9100\n[engine]\nmax_batch_size = 8\n")
    monkeypatch.setenv("OPENCLAW_RL_CONFIG", str(cfg))
    monkeypatch.setenv("OPENCLAW_RL_ENGINE__MAX_BATCH_SIZE", "2")
    s = load_settings()
    assert s.api.port == 9100 and s.engine.max_batch_size == 2


def test_missing_config_file_and_bad_values_explain_themselves(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENCLAW_RL_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="not a readable file"):
        load_settings()
    monkeypatch.delenv("OPENCLAW_RL_CONFIG")
    monkeypatch.setenv("OPENCLAW_RL_ENGINE__MAX_BATCH_SIZE", "0")
    with pytest.raises(ValidationError, match="max_batch_size"):
        load_settings()
