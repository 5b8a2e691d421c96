"""Whether a folder holds the built tiny model is read from its marker; a damaged marker means build it again."""

from __future__ import annotations

import json

import pytest

from engine.tiny_qwen3 import FORMAT_VERSION, tiny_model_built


@pytest.mark.parametrize(
    ("marker", "built"),
    [
        (None, False),
        (json.dumps({"format": FORMAT_VERSION}), True),
        (json.dumps({"format": "an older one"}), False),
        ('{"format": ', False),  # cut short
        ("[1, 2]", False),
    ],
)
def test_the_marker_decides(tmp_path, marker, built):
    if marker is not None:
        (tmp_path / "openclaw-rl-tiny.json").write_text(marker)
    assert tiny_model_built(tmp_path) is built
