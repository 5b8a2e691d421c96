#!/bin/bash
set -e
cd /app
python3 - <<'PY'
import hashlib
from pathlib import Path

root = Path("photos")
seen, removed = {}, []
for p in sorted((p for p in root.rglob("*") if p.is_file()), key=lambda p: str(p.relative_to(root)).encode()):
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    if digest in seen:
        removed.append(str(p.relative_to(root)))
        p.unlink()
    else:
        seen[digest] = p
Path("removed.txt").write_text("".join(r + "\n" for r in sorted(removed, key=str.encode)))
PY
