#!/bin/bash
set -e
cd /app
python3 - <<'PY'
import re
from pathlib import Path

for p in Path("docs").iterdir():
    stem, dot, ext = p.name.rpartition(".")
    if not dot:
        stem, ext = p.name, ""
    stem = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")
    new = stem + (("." + ext.lower()) if dot else "")
    if new != p.name:
        p.rename(p.with_name(new))
PY
