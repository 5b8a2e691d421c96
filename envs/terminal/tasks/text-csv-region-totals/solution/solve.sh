#!/bin/bash
set -e
cd /app
python3 - <<'PY'
import csv
from decimal import Decimal

totals: dict[str, Decimal] = {}
with open("sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        totals[row["region"]] = totals.get(row["region"], Decimal(0)) + int(row["units"]) * Decimal(row["unit_price"])
with open("region_totals.csv", "w") as f:
    f.write("region,total\n")
    for region in sorted(totals):
        f.write(f"{region},{totals[region]:.2f}\n")
PY
