"""records/trained.jsonl: which samples went into which version, appended and fsynced, never pruned.

Two kinds of line:
- a durable checkpoint's (`"durable": true`): every sample trained into the versions since the previous durable
  checkpoint (`from_version`, exclusive) up to `version`, written when the training workflow confirms the
  checkpoint. A sample counts as trained once such a line names it: after a crash, the samples trained since the
  last confirmed checkpoint are trained again, and only the line of the checkpoint that holds them names them, so a
  sample never appears in two durable lines.
- a step's (runs that wrote a checkpoint at every step): one line per saved step.
Either names, under `"missing"`, the batches' entries that were gone from their stream when the step read them
(dropped, never trained). A line is written once per version (checked and appended under the exclusive lock).

Sample ids name their session, and so their user (by pseudonym, or by id for a session started before ids were
pseudonyms: control.user_lookup.is_users_sample matches either): once a user is forgotten (control.user_data) their
ids are written as `forgotten:<digest>` instead, in the lines already there and in any line still to come (a step
that had the samples claimed when the user was forgotten). The digests are kept in records/forgotten-samples.txt.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

TRAINED_LOG = "trained.jsonl"
FORGOTTEN_SAMPLES = "forgotten-samples.txt"
_LOCK = ".records.lock"
_TAIL_BYTES = 64 * 1024


@contextlib.contextmanager
def records_lock(records_dir: Path, exclusive: bool = False) -> Iterator[None]:
    """Appenders to the records/ files hold it shared, a forget rewriting them holds it exclusive: a line appended
    while a file is rewritten would be lost with the old file. A trained.jsonl line, written once, holds it exclusive
    from its check to its append (`_append_once`)."""
    Path(records_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(records_dir) / _LOCK, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _digest(sample_id: str) -> str:
    return hashlib.sha256(sample_id.encode()).hexdigest()[:32]


def redacted_id(sample_id: str) -> str:
    return f"forgotten:{_digest(sample_id)[:16]}"


def _forgotten(records_dir: Path) -> set[str]:
    try:
        return set((Path(records_dir) / FORGOTTEN_SAMPLES).read_text().split())
    except FileNotFoundError:
        return set()


def _redact(ids: list[str], forgotten: set[str]) -> list[str]:
    return [redacted_id(i) if _digest(i) in forgotten else i for i in ids]


def rewrite_atomically(path: Path, lines: Iterable[str]) -> None:
    """Replace `path` by `lines` (each ending in a newline): a crash leaves the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(lines)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def forget_samples(records_dir: Path, sample_ids: Iterable[str]) -> int:
    """Redact `sample_ids` in trained.jsonl, now and in every line written from now on; returns the lines changed.
    The caller holds `records_lock(records_dir, exclusive=True)`."""
    return forget_digests(records_dir, {_digest(i) for i in sample_ids})


def forget_digests(records_dir: Path, digests: Iterable[str]) -> int:
    """`forget_samples` by the ids' digests (contracts.user_files.id_digest: how a forget names them to the trainer
    pool). The caller holds `records_lock(records_dir, exclusive=True)`."""
    records_dir = Path(records_dir)
    new = set(digests)
    if not new:
        return 0
    known = _forgotten(records_dir)
    if not new <= known:
        records_dir.mkdir(parents=True, exist_ok=True)
        rewrite_atomically(records_dir / FORGOTTEN_SAMPLES, [d + "\n" for d in sorted(known | new)])
    path = records_dir / TRAINED_LOG
    if not path.exists():
        return 0
    out, changed = [], 0
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        try:
            rec = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        before = (rec.get("sample_ids", []), rec.get("stale_ids", []))
        rec["sample_ids"], rec["stale_ids"] = _redact(before[0], new), _redact(before[1], new)
        if (rec["sample_ids"], rec["stale_ids"]) != before:
            changed += 1
            line = json.dumps(rec) + "\n"
        out.append(line)
    if changed:
        rewrite_atomically(path, out)
    return changed


def _last_lines(path: Path, count: int = 8) -> list[str]:
    """The file's last `count` whole lines (fewer in a shorter file), however long a line is (a durable checkpoint's
    line lists every sample id of its batches: over 64 KiB at batch 64 and 20 versions)."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        window = _TAIL_BYTES
        while True:
            start = f.seek(max(0, size - window))
            lines = f.read().decode("utf-8", errors="replace").splitlines()[1 if start else 0 :]
            if start == 0 or len(lines) >= count:
                return lines[-count:]
            window *= 4


def _already(path: Path, version: int, key: str, value: Any) -> bool:
    """A line for `version` with the same `key` near the end: a retried write (or a checkpoint confirmed again after
    its trainer was lost) finds its own line there."""
    try:
        tail = _last_lines(path)
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


def _missing(parts: list[dict[str, list[str]]]) -> dict[str, Any]:
    """`"missing": {source: [entry id, ...]}`, the batches' entries that were gone from their stream (dropped, never
    trained), on lines that have any: stream entry ids name no user, so a forget has nothing to redact there."""
    merged: dict[str, list[str]] = {}
    for part in parts:
        for src, ids in part.items():
            merged.setdefault(src, []).extend(ids)
    return {"missing": merged} if merged else {}


def _append_once(path: Path, record: dict[str, Any], key: str) -> bool:
    """Append `record` unless a line for its version with the same `key` is already there; False if it was.

    The check and the append hold the records lock exclusive: two writers of one line (a confirmation retried while
    its first attempt still runs) would otherwise both find no line and both append it, so its samples would be
    recorded twice. Exclusive also keeps out a forget rewriting the file (a shared lock would do for that alone)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with records_lock(path.parent, exclusive=True):
        if _already(path, record["version"], key, record[key]):
            return False
        forgotten = _forgotten(path.parent)
        if forgotten:
            record = {**record, **{k: _redact(record[k], forgotten) for k in ("sample_ids", "stale_ids")}}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
    return True


def record_step(
    records_dir: Path,
    version: int,
    from_version: int,
    batch: str,
    sample_ids: list[str],
    stale_ids: list[str],
    missing: dict[str, list[str]] | None = None,
) -> None:
    """A saved step's line, once (a retried step whose checkpoint was already saved finds its line)."""
    record = {
        "version": version,
        "from_version": from_version,
        "batch": batch,
        "sample_ids": sample_ids,
        "stale_ids": stale_ids,
        **_missing([missing or {}]),
        "at": round(time.time(), 3),
    }
    _append_once(Path(records_dir) / TRAINED_LOG, record, "batch")


def record_dropped(
    records_dir: Path, version: int, batch: str, stale_ids: list[str], missing: dict[str, list[str]] | None = None
) -> None:
    """A batch that made no version (every sample too stale to learn from, or gone from its stream), once: its ids on
    a line of their own (`"dropped": true`, no `sample_ids`) before the batch is acknowledged, so every published
    sample is named on disk as trained or as dropped with its reason, whatever becomes of the processes."""
    record = {
        "version": version,
        "dropped": True,
        "batch": batch,
        "sample_ids": [],
        "stale_ids": stale_ids,
        **_missing([missing or {}]),
        "at": round(time.time(), 3),
    }
    _append_once(Path(records_dir) / TRAINED_LOG, record, "batch")


def record_durable(
    records_dir: Path,
    version: int,
    from_version: int,
    batches: list[dict[str, Any]],
) -> None:
    """A confirmed durable checkpoint's line, once: `batches` are the trained batches it holds, each with its
    `version`, `batch` digest, `sample_ids`, `stale_ids` and `missing` entries."""
    digests = [b["batch"] for b in batches]
    record = {
        "version": version,
        "from_version": from_version,
        "durable": True,
        "versions": [b["version"] for b in batches],
        "batches": digests,
        "sample_ids": [i for b in batches for i in b["sample_ids"]],
        "stale_ids": [i for b in batches for i in b.get("stale_ids", [])],
        **_missing([b.get("missing") or {} for b in batches]),
        "at": round(time.time(), 3),
    }
    _append_once(Path(records_dir) / TRAINED_LOG, record, "batches")
