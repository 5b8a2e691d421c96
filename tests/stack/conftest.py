from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def hosts_root():
    """The several-hosts harness's root folder (stack/hosts.py refuses one under /tmp: hosts mount their own /tmp)."""
    folder = Path(tempfile.mkdtemp(prefix="openclaw-rl-hosts-test-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
