#!/bin/bash
set -e
cat > /app/avg.py <<'PY'
import sys


def read_numbers(path):
    numbers = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            numbers.append(float(line))
    return numbers


def main():
    numbers = read_numbers(sys.argv[1])
    average = sum(numbers) / len(numbers)
    print(f"Average: {average:.2f}")


main()
PY
