#!/bin/bash
set -e
mkdir -p inbox
for f in report.txt notes.TXT Photo.JPG scan.jpg logo.png data.csv backup.tar.gz README Makefile; do
  printf 'content of %s\n' "$f" > "inbox/$f"
done
