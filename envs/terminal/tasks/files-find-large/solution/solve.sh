#!/bin/bash
set -e
cd /app/data
find . -type f -size +10240c | sed 's|^\./||' | LC_ALL=C sort > /app/large_files.txt
