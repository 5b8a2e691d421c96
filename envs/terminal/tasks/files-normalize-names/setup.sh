#!/bin/bash
set -e
mkdir -p docs
for f in "My Report (Final).TXT" "Budget 2024 - draft.xlsx" "meeting_notes.md" "ALL CAPS.PDF" "  Team Photo!.JPG" "already-fine.txt"; do
  printf 'original name: %s\n' "$f" > "docs/$f"
done
