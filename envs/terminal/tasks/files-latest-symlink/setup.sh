#!/bin/bash
set -e
for v in v0.9.0 v1.2.0 v1.9.3 v1.10.0 v1.10.2 v1.2.10; do
  mkdir -p "releases/$v"
  printf '%s\n' "$v" > "releases/$v/VERSION"
done
