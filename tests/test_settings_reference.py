"""docs/settings-reference.md is what the settings tree generates, and every setting there says what it does."""

from __future__ import annotations

from pathlib import Path

from openclaw_rl.settings_reference import render

PAGE = Path(__file__).resolve().parents[1] / "docs" / "settings-reference.md"


def test_the_page_is_generated_from_the_current_settings():
    assert PAGE.read_text() == render(), (
        "docs/settings-reference.md is stale: .venv/bin/python -m openclaw_rl.settings_reference > "
        "docs/settings-reference.md"
    )


def test_every_setting_is_documented():
    rows = [line for line in render().splitlines() if line.startswith("| `")]
    assert len(rows) > 100
    undocumented = [r.split("|")[1].strip() for r in rows if r.rstrip().endswith("|  |")]
    assert not undocumented, f"settings without a docstring: {undocumented}"
