"""records/trained.jsonl: which samples went into which version, appended and fsynced, never pruned.

Two kinds of line:
- a durable checkpoint's (`"durable": true`): every sample trained into the versions since the previous durable
  checkpoint (`from_version`, exclusive) up to `version`, written when the training workflow confirms the
  checkpoint. A sample counts as trained once such a line names it: after a crash, the samples trained since the
  last confirmed checkpoint are trained again, and only the line of the checkpoint that holds them names them, so a
  sample never appears in two durable lines.
- a step's (runs that wrote a checkpoint at every step): one line per saved step.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

TRAINED_LOG = "trained.jsonl"
_TAIL_BYTES = 64 * 1024


def _already(path: Path, version: int, key: str, value: Any) -> bool:
    """A line for `version` with the same `key` near the end: a retried write finds its own line there."""
    try:
        with open(path, "rb") as f:
            start = f.seek(max(0, f.seek(0, 2) - _TAIL_BYTES))
            tail = f.read().decode("utf-8", errors="replace").splitlines()[1 if start else 0 :]
    except FileNotFoundError:
        return False
    for prev in tail:
        try:
            rec = json.loads(prev)
        except ValueError:
            continue
        if rec.get("version") == version and rec.get(key) == value:
            return True
    return False


def _append(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def record_step(
    records_dir: Path, version: int, from_version: int, batch: str, sample_ids: list[str], stale_ids: list[str]
) -> None:
    """A saved step's line, once (a retried step whose checkpoint was already saved finds its line)."""
    path = Path(records_dir) / TRAINED_LOG
    if _already(path, version, "batch", batch):
        return
    record = {
        "version": version,
        "from_version": from_version,
        "batch": batch,
        "sample_ids": sample_ids,
        "stale_ids": stale_ids,
        "at": round(time.time(), 3),
    }
    _append(path, record)


def record_durable(
    records_dir: Path,
    version: int,
    from_version: int,
    batches: list[dict[str, Any]],
) -> None:
    """A confirmed durable checkpoint's line, once: `batches` are the trained batches it holds, each with its
    `version`, `batch` digest, `sample_ids` and `stale_ids`."""
    path = Path(records_dir) / TRAINED_LOG
    digests = [b["batch"] for b in batches]
    if _already(path, version, "batches", digests):
        return
    record = {
        "version": version,
        "from_version": from_version,
        "durable": True,
        "versions": [b["version"] for b in batches],
        "batches": digests,
        "sample_ids": [i for b in batches for i in b["sample_ids"]],
        "stale_ids": [i for b in batches for i in b.get("stale_ids", [])],
        "at": round(time.time(), 3),
    }
    _append(path, record)
