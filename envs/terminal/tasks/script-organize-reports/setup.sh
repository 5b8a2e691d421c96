#!/bin/bash
set -e
mkdir -p reports
for f in report_2023-04-05.txt report_2023-11-30.txt report_2024-01-15.txt report_2024-01-02.txt notes.txt report_final.txt; do
  printf 'this is %s\n' "$f" > "reports/$f"
done
