"""What `up` leaves on disk and prints: a private data directory, no credentials, a warning for an empty pepper.

Unit-level: the launcher's own banner and state writers and the data-directory helper, with no stack started.
"""

from __future__ import annotations

import json
import os
import stat

import pytest
from structlog.testing import capture_logs

from openclaw_rl.settings import Settings
from stack.launcher import Stack
from stack.preflight import check_data_dir

REDIS_PASSWORD = "s3cret-redis-pw"
POLICY_PASSWORD = "p0licy-pw"
PEPPER = "pepper-value-9f3a"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """Settings read the environment: none of the caller's configuration may leak into these tests."""
    for name in list(os.environ):
        if name.startswith("OPENCLAW_RL_") or name in ("REDIS_URL", "TEMPORAL_ADDRESS"):
            monkeypatch.delenv(name)
    old = os.umask(0o022)  # the usual umask, under which a plain mkdir makes a world-readable folder
    yield
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def settings(tmp_path, pepper: str = "", **kw) -> Settings:
    return Settings(data_dir=tmp_path / "data", api_key_pepper=pepper, **kw)


def banner_and_state(s: Settings, capsys) -> tuple[str, str]:
    """What `up` prints once up and what it writes to stack.json, through the launcher's own code."""
    stack = Stack(s)
    s.data_dir.mkdir(parents=True, exist_ok=True)
    stack._write_state("up")
    stack._announce()
    return capsys.readouterr().out, stack.state_path.read_text()


@pytest.mark.parametrize(
    "url, host",
    [
        (f"redis://:{REDIS_PASSWORD}@redis.internal:6379/0", "redis.internal:6379"),
        (f"rediss://default:{REDIS_PASSWORD}@cache.example.com:6380/2", "cache.example.com:6380"),
        (f"redis://redis.internal:6379/0?password={REDIS_PASSWORD}", "redis.internal:6379"),
    ],
)
def test_the_redis_password_is_in_neither_the_banner_nor_stack_json(tmp_path, capsys, url, host):
    s = settings(tmp_path, PEPPER, redis={"url": url})
    assert s.redis.target() == url  # the services still get the real URL
    out, state = banner_and_state(s, capsys)
    assert "openclaw-rl is up" in out
    for text in (out, state):
        assert REDIS_PASSWORD not in text
        assert host in text and "****" in text
    assert host in json.loads(state)["urls"]["redis"]


def test_policy_server_credentials_are_masked_too(tmp_path, capsys):
    s = settings(
        tmp_path,
        PEPPER,
        policy={"server_urls": [f"http://trainer:{POLICY_PASSWORD}@gpu-1:30000", "http://gpu-2:30000"]},
    )
    out, state = banner_and_state(s, capsys)
    for text in (out, state):
        assert POLICY_PASSWORD not in text and "gpu-1:30000" in text and "http://gpu-2:30000" in text
    assert json.loads(state)["urls"]["policy"] == "http://trainer:****@gpu-1:30000,http://gpu-2:30000"


def test_the_banner_warns_when_the_pepper_is_empty_and_not_when_set(tmp_path, capsys):
    empty, _ = banner_and_state(settings(tmp_path), capsys)
    assert "WARNING: api_key_pepper is empty" in empty and "OPENCLAW_RL_API_KEY_PEPPER" in empty
    assert empty.rstrip().endswith("Press Ctrl-C to stop.")
    peppered, _ = banner_and_state(settings(tmp_path, PEPPER), capsys)
    assert "api_key_pepper" not in peppered and PEPPER not in peppered


def test_the_data_directory_is_created_private(tmp_path):
    data = tmp_path / "nested" / "data"
    check_data_dir(data)
    assert data.is_dir() and mode(data) == 0o700


def test_the_stack_makes_its_folders_in_the_data_directory_private(tmp_path):
    s = settings(tmp_path)
    (s.data_dir / "logs").mkdir(parents=True)  # a folder from an earlier run, made under the old code
    os.chmod(s.data_dir / "logs", 0o755)
    Stack(s).prepare_data_dir()
    folders = [s.data_dir, s.logs_dir, s.temporal_db.parent, s.redis_dir, s.models_dir, s.checkpoints_dir]
    assert {str(f): oct(mode(f)) for f in folders} == {str(f): oct(0o700) for f in folders}


def test_an_existing_open_data_directory_is_tightened_and_that_is_logged(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, 0o755)
    (data / "kept.txt").write_text("x")
    with capture_logs() as logs:
        check_data_dir(data)
    assert mode(data) == 0o700 and (data / "kept.txt").read_text() == "x"
    tightened = [e for e in logs if e.get("path") == str(data)]
    assert tightened and tightened[0]["log_level"] == "warning" and tightened[0]["was"] == "0755"
    with capture_logs() as again:  # already private: nothing to say
        check_data_dir(data)
    assert not [e for e in again if e.get("path") == str(data)]


@pytest.mark.parametrize(
    "url, shown",
    [
        ("redis://:s3cret@host:6379/0", "redis://:****@host:6379/0"),
        ("redis://user:s3cret@host:6379/0", "redis://user:****@host:6379/0"),
        ("redis://s3cret@host:6379", "redis://****@host:6379"),  # a lone user name may be a token
        ("rediss://default:s3c@r/et@host:6380", "rediss://default:****@host:6380"),  # unescaped @ and / in it
        ("redis://host:6379/0?password=s3cret&db=1", "redis://host:6379/0?password=****&db=1"),
        ("user:s3cret@temporal:7233", "user:****@temporal:7233"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("127.0.0.1:7233", "127.0.0.1:7233"),
        ("http://gpu-1:30000/v1?model=x#top", "http://gpu-1:30000/v1?model=x#top"),
    ],
)
def test_mask_url(url, shown):
    from stack.services import mask_url

    assert mask_url(url) == shown
