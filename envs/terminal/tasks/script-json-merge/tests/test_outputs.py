"""Checks for script-json-merge (run with cwd /app)."""

import json
from pathlib import Path

APP = Path.cwd()
EXPECTED = {
    "name": "shop",
    "debug": False,
    "server": {"host": "0.0.0.0", "port": 443, "tls": {"enabled": True, "cert": "/etc/ssl/shop.pem"}},
    "features": ["search"],
    "database": {"host": "db.prod.internal", "port": 5432, "pool": {"min": 1, "max": 50}},
    "owners": "ops",
    "region": "eu-west",
}


def merged() -> dict:
    return json.loads((APP / "merged.json").read_text())


def test_top_level_overrides():
    m = merged()
    assert (m["name"], m["debug"], m["region"], m["owners"]) == ("shop", False, "eu-west", "ops")


def test_nested_objects_merged():
    m = merged()
    assert m["server"] == EXPECTED["server"]
    assert m["database"] == EXPECTED["database"]


def test_arrays_replaced():
    assert merged()["features"] == ["search"]


def test_exact_and_inputs_untouched():
    assert merged() == EXPECTED
    assert json.loads((APP / "config/prod.json").read_text())["database"] == {
        "host": "db.prod.internal",
        "pool": {"max": 50},
    }
