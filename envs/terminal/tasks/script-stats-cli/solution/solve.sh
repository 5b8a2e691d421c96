#!/bin/bash
set -e
cat > /app/stats.py <<'PY'
import json
import sys


def main() -> int:
    numbers = []
    for lineno, line in enumerate(sys.stdin, start=1):
        if not line.strip():
            continue
        try:
            numbers.append(float(line))
        except ValueError:
            print(f"line {lineno}: not a number: {line.strip()!r}", file=sys.stderr)
            return 2
    if not numbers:
        print(json.dumps({"count": 0}))
        return 0
    mean = round(sum(numbers) / len(numbers), 2)
    print(json.dumps({"count": len(numbers), "min": min(numbers), "max": max(numbers), "mean": mean}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
PY
