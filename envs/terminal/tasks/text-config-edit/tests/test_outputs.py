"""Checks for text-config-edit (run with cwd /app)."""

import configparser
from pathlib import Path

APP = Path.cwd()
UNCHANGED = [
    "# Service configuration -- managed by ops, keep comments",
    "host = 127.0.0.1",
    "workers = 4",
    "host = db.internal",
    "enabled = yes",
    "ttl = 300",
]


def config() -> configparser.ConfigParser:
    c = configparser.ConfigParser()
    c.read(APP / "config.ini")
    return c


def test_server_port():
    assert config()["server"]["port"] == "8080"


def test_database_port_kept_and_debug_off():
    c = config()
    assert c["database"]["port"] == "5432"
    assert c["database"]["debug"] == "false"


def test_log_level_enabled():
    assert config()["server"].get("log_level") == "warning"
    assert "# log_level" not in (APP / "config.ini").read_text()


def test_other_lines_kept():
    lines = (APP / "config.ini").read_text().splitlines()
    for line in UNCHANGED:
        assert line in lines, line
    assert lines[0] == UNCHANGED[0]
    assert len(lines) == 15
