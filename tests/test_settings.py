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


def test_replicas_sit_behind_the_embedded_router_and_get_every_weight_update(monkeypatch):
    monkeypatch.setenv("OPENCLAW_RL_ENGINE__REPLICAS", "3")
    monkeypatch.setenv("OPENCLAW_RL_ENGINE__PORT", "31000")
    monkeypatch.setenv("OPENCLAW_RL_ROUTER__PORT", "31500")
    s = load_settings()
    assert s.embedded_router and s.engine_ports() == [31000, 31001, 31002]
    assert s.policy_urls() == [f"http://127.0.0.1:{p}" for p in (31000, 31001, 31002)]  # weight updates
    assert s.traffic_urls() == ["http://127.0.0.1:31500"]  # generation, teacher, judge
    single = load_settings(engine={"replicas": 1})
    assert not single.embedded_router and single.traffic_urls() == single.policy_urls()
    with pytest.raises(ValidationError, match="runs past 65535"):
        load_settings(engine={"port": 65535, "replicas": 2})


def test_an_external_router_takes_traffic_and_the_servers_take_updates():
    s = load_settings(
        policy={"router_url": "http://router:30000/", "server_urls": ["http://gpu1:30000", "http://gpu2:30000/"]}
    )
    assert s.traffic_urls() == ["http://router:30000"]
    assert s.policy_urls() == ["http://gpu1:30000", "http://gpu2:30000"]
    assert not s.embedded_engine and not s.embedded_router
    with pytest.raises(ValidationError, match="router_url needs policy.server_urls"):
        load_settings(policy={"router_url": "http://router:30000"})
    plain = load_settings(policy={"server_urls": ["http://gpu1:30000", "http://gpu2:30000"]})
    assert plain.traffic_urls() == plain.policy_urls() == ["http://gpu1:30000", "http://gpu2:30000"]


def test_teacher_url_in_an_older_config_file_becomes_the_teacher_section(monkeypatch, tmp_path):
    cfg = tmp_path / "old.toml"
    cfg.write_text('[learning]\nteacher_url = "http://teacher:30000/"\n')
    monkeypatch.setenv("OPENCLAW_RL_CONFIG", str(cfg))
    s = load_settings()
    assert s.learning.teacher is not None and s.learning.teacher.url == "http://teacher:30000"
    assert s.learning.teacher.api == "native" and s.learning.teacher.max_concurrency == 8
    assert "teacher_url" not in s.masked()["learning"]
    monkeypatch.setenv("OPENCLAW_RL_LEARNING__TEACHER_URL", "http://env-teacher:30000")  # env wins, same mapping
    assert load_settings().learning.teacher.url == "http://env-teacher:30000"
    monkeypatch.delenv("OPENCLAW_RL_CONFIG")
    monkeypatch.delenv("OPENCLAW_RL_LEARNING__TEACHER_URL")
    assert load_settings(learning={"teacher_url": None}).learning.teacher is None


def test_teacher_and_judge_settings_explain_bad_values():
    with pytest.raises(ValidationError, match="not both"):
        load_settings(learning={"teacher_url": "http://a:1", "teacher": {"url": "http://b:2"}})
    with pytest.raises(ValidationError, match="must be an http"):
        load_settings(learning={"teacher": {"url": "teacher:30000"}})
    with pytest.raises(ValidationError, match="max_concurrency"):
        load_settings(learning={"teacher": {"url": "http://t:1", "max_concurrency": 0}})
    with pytest.raises(ValidationError, match="api"):
        load_settings(learning={"teacher": {"url": "http://t:1", "api": "openai"}})
    with pytest.raises(ValidationError, match="max_concurrency"):
        load_settings(learning={"judge": {"type": "llm", "max_concurrency": 0}})
    s = load_settings(
        learning={
            "teacher": {"url": "http://t:1", "api_key": "teach-secret", "max_concurrency": 4, "timeout_s": 9},
            "judge": {"type": "llm", "url": "http://j:1", "max_concurrency": 2},
        }
    )
    assert s.learning.teacher.max_concurrency == 4 and s.judge().max_concurrency == 2
    assert "teach-secret" not in str(s.masked())


def test_one_agent_setting_given_in_the_environment_keeps_that_setting_s_own_defaults(monkeypatch):
    """Settings in the environment build the setting's model from its class defaults: they must be the setting's
    (before, OPENCLAW_RL_ENVS__GUI__SETTLE_S alone turned GUI episodes into 10 steps with 1 vote)."""
    monkeypatch.setenv("OPENCLAW_RL_ENVS__TOOLCALL__MATH_COUNT", "3000")
    monkeypatch.setenv("OPENCLAW_RL_ENVS__TOOLCALL__BFCL", "false")
    monkeypatch.setenv("OPENCLAW_RL_ENVS__GUI__SETTLE_S", "0.1")
    monkeypatch.setenv("OPENCLAW_RL_ENVS__SWE__PRM_VOTES", "2")
    envs = load_settings().envs
    assert (envs.toolcall.math_count, envs.toolcall.bfcl, envs.toolcall.max_steps) == (3000, False, 16)
    assert (envs.gui.settle_s, envs.gui.max_steps, envs.gui.prm_votes) == (0.1, 30, 3)
    assert (envs.swe.prm_votes, envs.swe.max_steps, envs.terminal.max_steps) == (2, 20, 10)


def test_canaries_need_per_user_adapters_and_a_judge_that_compares(monkeypatch):
    monkeypatch.setenv("OPENCLAW_RL_EVAL__CANARY__ENABLED", "true")
    with pytest.raises(ValidationError, match="training.adapters = per_user"):
        load_settings()
    monkeypatch.setenv("OPENCLAW_RL_TRAINING__ADAPTERS", "per_user")
    monkeypatch.setenv("OPENCLAW_RL_TRAINING__LORA__ENABLED", "true")
    monkeypatch.setenv("OPENCLAW_RL_LEARNING__JUDGE", '{"type": "heuristic"}')
    with pytest.raises(ValidationError, match="every comparison is a tie"):
        load_settings()
    monkeypatch.setenv("OPENCLAW_RL_LEARNING__JUDGE", '{"type": "llm", "url": "http://judge:30000"}')
    assert load_settings().eval.canary.enabled
