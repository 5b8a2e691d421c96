"""records/policy-<version>/<source>.jsonl: the judged-turn mirror, one line per judged turn (`JudgementRecord`).

The judge's output and hint are the user's words (the heuristic judge's hint is the user's own sentence), so with
encryption at rest on (`encryption_keys`) a line keeps in the clear only the ids a forget and a reader need
(`sample_id`, `user_id`, `turn_id`) and carries the whole record sealed under the first key, bound to its sample id
(`sealed`, base64). Without keys a line is the record's JSON, as before. `read_judgements` reads both kinds.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from contracts.learning import JudgementRecord
from openclaw_rl.encryption import DecryptError, Keyring

SEALED = "sealed"
"""A sealed line's field holding the record (base64 of `Keyring.seal`)."""


def _context(sample_id: str) -> bytes:
    """What a sealed record is bound to: a line copied under another sample id does not open."""
    return f"judgement:{sample_id}".encode()


def judgement_line(record: JudgementRecord, keyring: Keyring | None) -> str:
    """The record's line (no newline): its JSON, or with a keyring its ids and the record sealed."""
    if keyring is None:
        return record.model_dump_json()
    sealed = keyring.seal(record.model_dump_json().encode(), context=_context(record.sample_id))
    return json.dumps(
        {
            "sample_id": record.sample_id,
            "user_id": record.user_id,  # what a forget drops the user's lines by (control.user_data)
            "turn_id": record.turn_id,
            SEALED: base64.b64encode(sealed).decode(),
        }
    )


def open_judgement(line: str, keyring: Keyring | None) -> JudgementRecord:
    """One line as its record; a sealed line needs the keyring (DecryptError without it, or with other keys)."""
    raw = json.loads(line)
    if not isinstance(raw, dict) or SEALED not in raw:
        return JudgementRecord.model_validate(raw)
    if keyring is None:
        raise DecryptError(f"the judgement of {raw.get('sample_id')} is encrypted, but there are no encryption_keys")
    opened = keyring.open(base64.b64decode(raw[SEALED]), context=_context(str(raw.get("sample_id"))))
    return JudgementRecord.model_validate_json(opened)


def read_judgements(path: Path, keyring: Keyring | None) -> list[JudgementRecord]:
    """Every whole line of one file (a torn last line, from a crash mid-write, is skipped)."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            out.append(open_judgement(line, keyring))
        except json.JSONDecodeError:
            continue
    return out
