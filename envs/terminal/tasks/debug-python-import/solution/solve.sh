#!/bin/bash
set -e
cd /app
cat > app/helpers.py <<'PY'
import re

SEPARATOR = "-"


def slugify(text):
    words = re.findall(r"[a-z0-9]+", text.lower())
    return SEPARATOR.join(words)
PY
sed -i 's/^from app.helpers import slugify$/from app.helpers import SEPARATOR, slugify  # noqa: F401/; /^SEPARATOR = "-"$/d' app/main.py
