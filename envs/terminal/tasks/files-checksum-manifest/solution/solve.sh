#!/bin/bash
set -e
cd /app/data
find . -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 sha256sum -- > /app/data.sha256
